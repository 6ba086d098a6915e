//! Bessel functions J0/J1/Y0/Y1, modified Bessel I0/I1/K0/K1 (and K
//! scaled by exp(x)), the spherical Bessel j0 and Airy Ai, step by step as
//! ATen's CPU kernels (Cephes), in the working dtype (see the module doc).
// Published coefficient tables (Cephes) are kept digit for digit.
#![allow(clippy::excessive_precision)]
use stablehlo::CompareDir::{Eq, Le, Lt};
use stablehlo::DType;

use super::coef::*;
use super::{chbevl, cos, exp, fma, fms, log, polevl, sin, sqrt, unary, R, V};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::special::E;

const SQ2OPI: f64 = 0.797_884_560_802_865_4; // sqrt(2 / pi)
const PIO4: f64 = std::f64::consts::FRAC_PI_4;
const THPIO4: f64 = 2.356_194_490_192_345; // 3 pi / 4
const TWOOPI: f64 = std::f64::consts::FRAC_2_PI;

/// `-x` where `x < 0`, else `x` (keeps -0.0).
fn flip_neg(e: &mut E, x: V) -> Result<(V, V)> {
    let neg = e.cmpc(x, 0.0, Lt)?;
    let nx = e.lx.b.neg(x)?;
    Ok((neg, e.sel(neg, nx, x)?))
}

/// The large-x form of J (`y` false) and Y (`y` true) in `w` (25/x² or
/// (5/x)²): `(pp/pq · c(x - shift) ∓ 5/x · qp/qq · s(x - shift)) · √(2/π) / √x`
/// with (c, s) = (cos, sin) for J and (sin, cos) and + for Y.
fn asymptotic(e: &mut E, x: V, w: V, t: [&[f64]; 4], shift: f64, y: bool) -> Result<V> {
    let pp = polevl(e, w, t[0])?;
    let pq = polevl(e, w, t[1])?;
    let qp = polevl(e, w, t[2])?;
    let qq = polevl(e, w, t[3])?;
    let s = e.addc(x, -shift)?;
    let (sn, cs) = (sin(e, s)?, cos(e, s)?);
    let (c1, c2) = if y { (sn, cs) } else { (cs, sn) };
    let a = e.div(pp, pq)?;
    let f = e.rdivc(5.0, x)?;
    let r = e.div(qp, qq)?;
    let b = e.mul(f, r)?;
    let b = e.mul(b, c2)?;
    let t = if y { fma(e, a, c1, b)? } else { fms(e, a, c1, b)? };
    let t = e.mulc(t, SQ2OPI)?;
    let sq = sqrt(e, x)?;
    e.div(t, sq)
}

fn j0_v(e: &mut E, x: V) -> Result<V> {
    let (_, x) = flip_neg(e, x)?;
    let xx = e.mul(x, x)?;
    let rp = polevl(e, xx, &J0_RP)?;
    let rq = polevl(e, xx, &J0_RQ)?;
    let a = e.addc(xx, -5.783_185_962_946_784_5)?;
    let b = e.addc(xx, -30.471_262_343_662_087)?;
    let s = e.mul(a, b)?;
    let s = e.mul(s, rp)?;
    let small = e.div(s, rq)?;
    let four = e.c(xx, 4.0)?;
    let q = e.div(xx, four)?;
    let tiny = e.rsubc(1.0, q)?;
    let w = e.rdivc(25.0, xx)?;
    let large = asymptotic(e, x, w, [&J0_PP, &J0_PQ, &J0_QP, &J0_QQ], PIO4, false)?;
    let is_tiny = e.cmpc(x, 0.00001, Lt)?;
    let small = e.sel(is_tiny, tiny, small)?;
    let le5 = e.cmpc(x, 5.0, Le)?;
    e.sel(le5, small, large)
}

fn j1_v(e: &mut E, x: V) -> Result<V> {
    let (neg, x) = flip_neg(e, x)?;
    let xx = e.mul(x, x)?;
    let rp = polevl(e, xx, &J1_RP)?;
    let rq = polevl(e, xx, &J1_RQ)?;
    let s = e.div(rp, rq)?;
    let s = e.mul(s, x)?;
    let a = e.addc(xx, -14.681_970_642_123_893)?;
    let s = e.mul(s, a)?;
    let b = e.addc(xx, -49.218_456_321_694_6)?;
    let small = e.mul(s, b)?;
    let f = e.rdivc(5.0, x)?;
    let w = e.mul(f, f)?;
    let large = asymptotic(e, x, w, [&J1_PP, &J1_PQ, &J1_QP, &J1_QQ], THPIO4, false)?;
    let le5 = e.cmpc(x, 5.0, Le)?;
    let r = e.sel(le5, small, large)?;
    let nr = e.lx.b.neg(r)?;
    e.sel(neg, nr, r)
}

/// Y0/Y1 below 5: -inf at 0, NaN for negative x (Y1: also -0).
fn y_domain(e: &mut E, x: V, r: V, neg_le: bool) -> Result<V> {
    let bad = e.cmpc(x, 0.0, if neg_le { Le } else { Lt })?;
    let r = e.selc(bad, f64::NAN, r)?;
    let zero = e.cmpc(x, 0.0, Eq)?;
    e.selc(zero, f64::NEG_INFINITY, r)
}

fn y0_v(e: &mut E, x: V) -> Result<V> {
    let xx = e.mul(x, x)?;
    let yp = polevl(e, xx, &Y0_YP)?;
    let yq = polevl(e, xx, &Y0_YQ)?;
    let a = e.div(yp, yq)?;
    let l = log(e, x)?;
    let l = e.mulc(l, TWOOPI)?;
    let j = j0_v(e, x)?;
    let small = fma(e, l, j, a)?;
    let small = y_domain(e, x, small, false)?;
    let w = e.rdivc(25.0, xx)?;
    let large = asymptotic(e, x, w, [&J0_PP, &J0_PQ, &J0_QP, &J0_QQ], PIO4, true)?;
    let le5 = e.cmpc(x, 5.0, Le)?;
    e.sel(le5, small, large)
}

fn y1_v(e: &mut E, x: V) -> Result<V> {
    let xx = e.mul(x, x)?;
    let yp = polevl(e, xx, &Y1_YP)?;
    let yq = polevl(e, xx, &Y1_YQ)?;
    let a = e.div(yp, yq)?;
    let j = j1_v(e, x)?;
    let l = log(e, x)?;
    let inv = e.rdivc(1.0, x)?;
    let t = fms(e, j, l, inv)?;
    let t = e.mulc(t, TWOOPI)?;
    let small = fma(e, x, a, t)?;
    let small = y_domain(e, x, small, true)?;
    let f = e.rdivc(5.0, x)?;
    let w = e.mul(f, f)?;
    let large = asymptotic(e, x, w, [&J1_PP, &J1_PQ, &J1_QP, &J1_QQ], THPIO4, true)?;
    let le5 = e.cmpc(x, 5.0, Le)?;
    e.sel(le5, small, large)
}

pub(super) fn j0(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, j0_v)
}
pub(super) fn j1(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, j1_v)
}
pub(super) fn y0(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, y0_v)
}
pub(super) fn y1(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, y1_v)
}

/// I0 (`order1` false) or I1: the two Chebyshev expansions, split at |x| = 8.
fn i_v(e: &mut E, x: V, order1: bool) -> Result<V> {
    let (a, b): (&[f64], &[f64]) = if order1 { (&I1_A, &I1_B) } else { (&I0_A, &I0_B) };
    let ax = e.lx.b.abs(x)?;
    let ex = exp(e, ax)?;
    let y = e.mulc(ax, 0.5)?;
    let y = e.addc(y, -2.0)?;
    let s = chbevl(e, y, a)?;
    let small = if order1 {
        let s = e.mul(s, ax)?;
        e.mul(s, ex)?
    } else {
        e.mul(ex, s)?
    };
    let y = e.rdivc(32.0, ax)?;
    let y = e.addc(y, -2.0)?;
    let l = chbevl(e, y, b)?;
    let l = e.mul(ex, l)?;
    let sq = sqrt(e, ax)?;
    let large = e.div(l, sq)?;
    let le8 = e.cmpc(ax, 8.0, Le)?;
    let r = e.sel(le8, small, large)?;
    if !order1 {
        return Ok(r);
    }
    let neg = e.cmpc(x, 0.0, Lt)?;
    let nr = e.lx.b.neg(r)?;
    e.sel(neg, nr, r)
}

pub(super) fn i0(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, |e, x| i_v(e, x, false))
}
pub(super) fn i1(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, |e, x| i_v(e, x, true))
}

/// K0/K1 (`order1`), times exp(x) when `scaled`; split at x = 2.
fn k_v(e: &mut E, x: V, order1: bool, scaled: bool) -> Result<V> {
    let (a, b): (&[f64], &[f64]) = if order1 { (&K1_A, &K1_B) } else { (&K0_A, &K0_B) };
    let xx = e.mul(x, x)?;
    let y = e.addc(xx, -2.0)?;
    let s = chbevl(e, y, a)?;
    let i = i_v(e, x, order1)?;
    let small = if !order1 && !scaled {
        // ATen writes log(0.5 * x) with a double 0.5: this term is double.
        let w = e.lx.dtype(x);
        let x64 = e.lx.cast(x, DType::F64)?;
        let h = e.mulc(x64, 0.5)?;
        let l = e.lx.b.log(h)?;
        let i64_ = e.lx.cast(i, DType::F64)?;
        let l = e.mul(l, i64_)?;
        let s64 = e.lx.cast(s, DType::F64)?;
        let r = e.sub(s64, l)?;
        e.lx.cast(r, w)?
    } else {
        let h = e.mulc(x, 0.5)?;
        let l = log(e, h)?;
        let r = if order1 {
            let q = e.div(s, x)?;
            fma(e, l, i, q)?
        } else {
            let li = e.mul(l, i)?;
            e.sub(s, li)?
        };
        if scaled {
            let ex = exp(e, x)?;
            e.mul(r, ex)?
        } else {
            r
        }
    };
    let y = e.rdivc(8.0, x)?;
    let y = e.addc(y, -2.0)?;
    let l = chbevl(e, y, b)?;
    let l = if scaled {
        l
    } else {
        let nx = e.lx.b.neg(x)?;
        let ex = exp(e, nx)?;
        e.mul(ex, l)?
    };
    let sq = sqrt(e, x)?;
    let large = e.div(l, sq)?;
    let le2 = e.cmpc(x, 2.0, Le)?;
    let r = e.sel(le2, small, large)?;
    let neg = e.cmpc(x, 0.0, Lt)?;
    let r = e.selc(neg, f64::NAN, r)?;
    let zero = e.cmpc(x, 0.0, Eq)?;
    e.selc(zero, f64::INFINITY, r)
}

pub(super) fn k0(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, |e, x| k_v(e, x, false, false))
}
pub(super) fn k1(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, |e, x| k_v(e, x, true, false))
}
pub(super) fn k0e(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, |e, x| k_v(e, x, false, true))
}
pub(super) fn k1e(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, |e, x| k_v(e, x, true, true))
}

/// sin(x)/x, by its Taylor series below 0.5; 0 at ±inf.
pub(super) fn spherical_j0(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, |e, x| {
        let xx = e.mul(x, x)?;
        let c = [
            1.0 / 6_227_020_800.0,
            -1.0 / 39_916_800.0,
            1.0 / 362_880.0,
            -1.0 / 5040.0,
            1.0 / 120.0,
            -1.0 / 6.0,
            1.0,
        ];
        let small = polevl(e, xx, &c)?;
        let s = sin(e, x)?;
        let large = e.div(s, x)?;
        let ax = e.lx.b.abs(x)?;
        let lt = e.cmpc(ax, 0.5, Lt)?;
        let r = e.sel(lt, small, large)?;
        let inf = e.cmpc(ax, f64::INFINITY, Eq)?;
        e.selc(inf, 0.0, r)
    })
}

/// Airy Ai: asymptotic forms below -2.09 and from 2.09 on, else the Maclaurin
/// series (iterated while its last term is above the dtype's epsilon).
pub(super) fn airy_ai(lx: &mut Lower, args: &Args) -> R {
    let eps = if args.tensor(0)?.dtype == DType::F64 { f64::EPSILON } else { f32::EPSILON as f64 };
    unary(lx, args, |e, x| {
        // x < -2.09
        let nx = e.lx.b.neg(x)?;
        let sq = sqrt(e, nx)?;
        let t = e.mulc(x, -2.0)?;
        let t = e.mul(t, sq)?;
        let three = e.c(t, 3.0)?;
        let t = e.div(t, three)?; // -2 x sqrt(-x) / 3
        let z = e.rdivc(1.0, t)?;
        let zz = e.mul(z, z)?;
        let afn = polevl(e, zz, &AIRY_AFN)?;
        let afd = polevl(e, zz, &AIRY_AFD)?;
        let agn = polevl(e, zz, &AIRY_AGN)?;
        let agd = polevl(e, zz, &AIRY_AGD)?;
        let th = e.addc(t, std::f64::consts::FRAC_PI_4)?;
        let s = sqrt(e, sq)?;
        let pre = e.rdivc(5.641_895_835_477_563e-1, s)?;
        let a = e.mul(zz, afn)?;
        let a = e.div(a, afd)?;
        let a = e.addc(a, 1.0)?;
        let sn = sin(e, th)?;
        let b = e.mul(z, agn)?;
        let b = e.div(b, agd)?;
        let cs = cos(e, th)?;
        let b = e.mul(cs, b)?;
        let d = fms(e, sn, a, b)?;
        let neg_branch = e.mul(pre, d)?;
        // x >= 2.09
        let sx = sqrt(e, x)?;
        let zeta = e.mulc(x, 2.0)?;
        let zeta = e.mul(zeta, sx)?;
        let three = e.c(zeta, 3.0)?;
        let zeta = e.div(zeta, three)?;
        let iz = e.rdivc(1.0, zeta)?;
        let an = polevl(e, iz, &AIRY_AN)?;
        let ad = polevl(e, iz, &AIRY_AD)?;
        let r = e.div(an, ad)?;
        let r = e.mulc(r, 5.641_895_835_477_563e-1)?;
        let ssx = sqrt(e, sx)?;
        let den = e.mulc(ssx, 2.0)?;
        let ez = exp(e, zeta)?;
        let den = e.mul(den, ez)?;
        let pos_branch = e.div(r, den)?;
        // Maclaurin series.
        let (mut f, mut g, mut k) = (e.c(x, 1.0)?, x, e.c(x, 1.0)?);
        let (mut m, mut n, mut t) = (e.c(x, 1.0)?, x, e.c(x, 1.0)?);
        let xx = e.mul(x, x)?;
        let z3 = e.mul(xx, x)?;
        for _ in 0..14 {
            let go = e.cmpc(t, eps, stablehlo::CompareDir::Gt)?;
            let m1 = e.mul(m, z3)?;
            let k1 = e.addc(k, 1.0)?;
            let m1 = e.div(m1, k1)?;
            let n1 = e.mul(n, z3)?;
            let k2 = e.addc(k1, 1.0)?;
            let n1 = e.div(n1, k2)?;
            let m1 = e.div(m1, k2)?;
            let f1 = e.add(f, m1)?;
            let k3 = e.addc(k2, 1.0)?;
            let n1 = e.div(n1, k3)?;
            let g1 = e.add(g, n1)?;
            let r = e.div(m1, f1)?;
            let t1 = e.lx.b.abs(r)?;
            m = e.sel(go, m1, m)?;
            n = e.sel(go, n1, n)?;
            k = e.sel(go, k3, k)?;
            f = e.sel(go, f1, f)?;
            g = e.sel(go, g1, g)?;
            t = e.sel(go, t1, t)?;
        }
        let c1 = e.c(f, 0.355_028_053_887_817_24)?;
        let b = e.mulc(g, 0.258_819_403_792_806_8)?;
        let series = fms(e, c1, f, b)?;
        let lo = e.cmpc(x, -2.09, Lt)?;
        let hi = e.cmpc(x, 2.09, stablehlo::CompareDir::Ge)?;
        let r = e.sel(hi, pos_branch, series)?;
        let r = e.sel(lo, neg_branch, r)?;
        let big = e.cmpc(x, 103.892, stablehlo::CompareDir::Gt)?;
        let r = e.selc(big, 0.0, r)?;
        let ax = e.lx.b.abs(x)?;
        let inf = e.cmpc(ax, f64::INFINITY, Eq)?;
        e.selc(inf, f64::NAN, r)
    })
}
