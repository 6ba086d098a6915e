//! lgamma, digamma, trigamma and polygamma (the higher orders through the
//! Hurwitz zeta function).
// Published coefficient tables (Cephes) are kept digit for digit.
#![allow(clippy::excessive_precision)]
use stablehlo::{CompareDir, DType};

use super::zeta::zeta_v;
use super::{unary, E, R, V};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;

const PI: f64 = std::f64::consts::PI;
const LANCZOS: [f64; 9] = [
    0.999_999_999_999_809_9,
    676.520_368_121_885_1,
    -1_259.139_216_722_402_8,
    771.323_428_777_653_1,
    -176.615_029_162_140_6,
    12.507_343_278_686_905,
    -0.138_571_095_265_720_12,
    9.984_369_578_019_572e-6,
    1.505_632_735_149_311_6e-7,
];

/// log Γ(x) (real), by Lanczos (g = 7) with the reflection formula below 0.5.
pub(crate) fn lgamma_v(e: &mut E, x: V) -> Result<V> {
    let small = e.cmpc(x, 0.5, CompareDir::Lt)?;
    let r = e.rsubc(1.0, x)?;
    let y = e.sel(small, r, x)?; // y >= 0.5
    let z = e.addc(y, -1.0)?;
    let mut a = e.c(z, LANCZOS[0])?;
    for (i, &ci) in LANCZOS.iter().enumerate().skip(1) {
        let d = e.addc(z, i as f64)?;
        let q = e.rdivc(ci, d)?;
        a = e.add(a, q)?;
    }
    let t = e.addc(z, 7.5)?;
    let zh = e.addc(z, 0.5)?;
    let lt = e.lx.b.log(t)?;
    let p = e.mul(zh, lt)?;
    let p = e.sub(p, t)?;
    let la = e.lx.b.log(a)?;
    let p = e.add(p, la)?;
    let lg = e.addc(p, 0.5 * (2.0 * PI).ln())?;
    // Reflection: log(pi / |sin(pi x)|) - lgamma(1 - x).
    let fl = e.lx.b.floor(x)?;
    let fr = e.sub(x, fl)?;
    let fr2 = e.rsubc(1.0, fr)?;
    let fr = e.lx.b.min(fr, fr2)?;
    let s = e.mulc(fr, PI)?;
    let s = e.lx.b.sine(s)?;
    let ls = e.lx.b.log(s)?;
    let refl = e.rsubc(PI.ln(), ls)?;
    let refl = e.sub(refl, lg)?;
    let res = e.sel(small, refl, lg)?;
    // Non-positive integers and ±inf give +inf.
    let isint = e.is_int(x)?;
    let pole = e.and(small, isint)?;
    let ax = e.lx.b.abs(x)?;
    let inf = e.cmpc(ax, f64::INFINITY, CompareDir::Eq)?;
    let pole = e.or(pole, inf)?;
    e.selc(pole, f64::INFINITY, res)
}

pub(crate) fn lgamma(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, 0, lgamma_v)
}

/// ψ(x) for x >= 0 (x = 0 not handled): shift to x >= 10, then asymptotic.
fn digamma_pos(e: &mut E, x: V) -> Result<V> {
    let mut res = e.c(x, 0.0)?;
    let mut x = x;
    for _ in 0..10 {
        let m = e.cmpc(x, 10.0, CompareDir::Lt)?;
        let r = e.rdivc(1.0, x)?;
        let nr = e.sub(res, r)?;
        res = e.sel(m, nr, res)?;
        let nx = e.addc(x, 1.0)?;
        x = e.sel(m, nx, x)?;
    }
    const A: [f64; 7] = [
        8.333_333_333_333_333e-2,
        -2.109_279_609_279_609_3e-2,
        7.575_757_575_757_576e-3,
        -4.166_666_666_666_667e-3,
        3.968_253_968_253_968e-3,
        -8.333_333_333_333_333e-3,
        8.333_333_333_333_333e-2,
    ];
    let xx = e.mul(x, x)?;
    let z = e.rdivc(1.0, xx)?;
    let p = e.polevl(z, &A)?;
    let y = e.mul(z, p)?;
    let lg = e.lx.b.log(x)?;
    let h = e.rdivc(0.5, x)?;
    let r = e.add(res, lg)?;
    let r = e.sub(r, h)?;
    e.sub(r, y)
}

pub(crate) fn digamma_v(e: &mut E, x: V) -> Result<V> {
    let neg = e.cmpc(x, 0.0, CompareDir::Lt)?;
    let r = e.rsubc(1.0, x)?;
    let y = e.sel(neg, r, x)?;
    let p = digamma_pos(e, y)?;
    // Reflection: ψ(1 - x) - π / tan(π r), r the fractional part of x.
    let tr = e.lx.b.sign(x)?;
    let ax = e.lx.b.abs(x)?;
    let fl = e.lx.b.floor(ax)?;
    let tr = e.mul(tr, fl)?;
    let fr = e.sub(x, tr)?;
    let a = e.mulc(fr, PI)?;
    let s = e.lx.b.sine(a)?;
    let c = e.lx.b.cosine(a)?;
    let t = e.div(c, s)?; // cot(π r)
    let t = e.mulc(t, PI)?;
    let refl = e.sub(p, t)?;
    let res = e.sel(neg, refl, p)?;
    let isint = e.is_int(x)?;
    let negint = e.and(neg, isint)?;
    let res = e.selc(negint, f64::NAN, res)?;
    let zero = e.cmpc(x, 0.0, CompareDir::Eq)?;
    let inv = e.rdivc(-1.0, x)?; // copysign(inf, -x)
    e.sel(zero, inv, res)
}

pub(crate) fn digamma(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, 0, digamma_v)
}

/// ψ'(x), as ATen's `trigamma`. With `f32`, π x is rounded to float as
/// CPU's float kernel does (it dominates the error near the poles).
fn trigamma_v(e: &mut E, x: V, f32: bool) -> Result<V> {
    let small = e.cmpc(x, 0.5, CompareDir::Lt)?;
    let a = if f32 {
        let xf = e.lx.cast(x, DType::F32)?;
        let p = e.mulc(xf, PI)?;
        e.lx.cast(p, DType::F64)?
    } else {
        e.mulc(x, PI)?
    };
    let s = e.lx.b.sine(a)?;
    let s2 = e.mul(s, s)?;
    let refl = e.rdivc(-PI * PI, s2)?;
    let zero = e.c(x, 0.0)?;
    let mut res = e.sel(small, refl, zero)?;
    let r = e.rsubc(1.0, x)?;
    let mut x = e.sel(small, r, x)?;
    for _ in 0..6 {
        let xx = e.mul(x, x)?;
        let q = e.rdivc(1.0, xx)?;
        res = e.add(res, q)?;
        x = e.addc(x, 1.0)?;
    }
    let xx = e.mul(x, x)?;
    let ixx = e.rdivc(1.0, xx)?;
    // (1 + 1/(2x) + ixx (1/6 - ixx (1/30 - ixx / 42))) / x
    let t = e.mulc(ixx, 1.0 / 42.0)?;
    let t = e.rsubc(1.0 / 30.0, t)?;
    let t = e.mul(ixx, t)?;
    let t = e.rsubc(1.0 / 6.0, t)?;
    let t = e.mul(ixx, t)?;
    let h = e.rdivc(0.5, x)?;
    let t = e.add(t, h)?;
    let t = e.addc(t, 1.0)?;
    let t = e.div(t, x)?;
    let res = e.add(res, t)?;
    let neg = e.mulc(res, -1.0)?;
    e.sel(small, neg, res)
}

pub(crate) fn polygamma(lx: &mut Lower, args: &Args) -> R {
    let n = args.int(0)?;
    if n < 0 {
        crate::bail!(Runtime, "{}: polygamma(n, x) does not support negative n.", lx.op);
    }
    let f32 = args.tensor(1)?.dtype != DType::F64;
    unary(lx, args, 1, |e, x| match n {
        0 => digamma_v(e, x),
        1 => trigamma_v(e, x, f32),
        _ => {
            let fact: f64 = (1..=n).map(|i| i as f64).product();
            let sign = if n % 2 == 1 { 1.0 } else { -1.0 };
            let s = e.c(x, (n + 1) as f64)?;
            let z = zeta_v(e, s, x)?;
            e.mulc(z, sign * fact)
        }
    })
}
