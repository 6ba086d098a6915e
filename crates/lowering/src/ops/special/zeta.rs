//! The Hurwitz zeta function ζ(x, q) (special_zeta), Cephes' algorithm.
// Published coefficient tables (Cephes) are kept digit for digit.
#![allow(clippy::excessive_precision)]
use stablehlo::CompareDir;

use super::{binary, E, R, V};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;

/// Hurwitz ζ(x, q), Cephes' algorithm with its loops unrolled (q >= -20).
pub(crate) fn zeta_v(e: &mut E, x: V, q: V) -> Result<V> {
    const MACHEP: f64 = 1.110_223_024_625_156_5e-16;
    const A: [f64; 12] = [
        12.0,
        -720.0,
        30240.0,
        -1209600.0,
        47900160.0,
        -1.892_437_580_318_379_2e9,
        7.47242496e10,
        -2.950_130_727_918_164_2e12,
        1.164_678_281_435_006_7e14,
        -4.597_978_722_407_472_6e15,
        1.815_210_540_194_354_8e17,
        -7.166_165_256_175_667e18,
    ];
    let nx = e.lx.b.neg(x)?;
    let mut s = e.lx.b.pow(q, nx)?;
    let mut a = q;
    let mut b = e.c(x, 0.0)?;
    let f = e.c(x, 0.0)?;
    let mut done = e.cmp(f, f, CompareDir::Ne)?; // all false
    // Convergence test |b| < MACHEP * |s| as in Cephes.
    let conv = |e: &mut E, t: V, s: V| -> Result<V> {
        let ms = e.mulc(s, MACHEP)?;
        let nms = e.mulc(s, -MACHEP)?;
        let c1 = e.cmp(nms, t, CompareDir::Lt)?;
        let c2 = e.cmp(t, ms, CompareDir::Lt)?;
        e.and(c1, c2)
    };
    for i in 0..29 {
        let mut go = e.not(done)?;
        if i >= 9 {
            let le = e.cmpc(a, 9.0, CompareDir::Le)?;
            go = e.and(go, le)?;
        }
        let na = e.addc(a, 1.0)?;
        a = e.sel(go, na, a)?;
        let nb = e.lx.b.pow(a, nx)?;
        b = e.sel(go, nb, b)?;
        let ns = e.add(s, b)?;
        s = e.sel(go, ns, s)?;
        let cv = conv(e, b, s)?;
        let cv = e.and(go, cv)?;
        done = e.or(done, cv)?;
    }
    let w = a;
    let bw = e.mul(b, w)?;
    let xm1 = e.addc(x, -1.0)?;
    let t = e.div(bw, xm1)?;
    let ns = e.add(s, t)?;
    let hb = e.mulc(b, 0.5)?;
    let ns = e.sub(ns, hb)?;
    s = e.sel(done, s, ns)?;
    let mut aa = e.c(x, 1.0)?;
    let mut kk = 0.0;
    for &ai in &A {
        let go = e.not(done)?;
        let xk = e.addc(x, kk)?;
        aa = e.mul(aa, xk)?;
        b = e.div(b, w)?;
        let t = e.mul(aa, b)?;
        let t = e.mulc(t, 1.0 / ai)?;
        let ns = e.add(s, t)?;
        s = e.sel(go, ns, s)?;
        let r = e.div(t, s)?;
        let r = e.lx.b.abs(r)?;
        let cv = e.cmpc(r, MACHEP, CompareDir::Lt)?;
        let cv = e.and(go, cv)?;
        done = e.or(done, cv)?;
        kk += 1.0;
        let xk = e.addc(x, kk)?;
        aa = e.mul(aa, xk)?;
        b = e.div(b, w)?;
        kk += 1.0;
    }
    // Domain: x == 1 → inf; x < 1 → NaN; q <= 0 integer → inf; q <= 0 with
    // x not an integer → NaN.
    let qle = e.cmpc(q, 0.0, CompareDir::Le)?;
    let xint = e.is_int(x)?;
    let xnint = e.not(xint)?;
    let bad = e.and(qle, xnint)?;
    let s = e.selc(bad, f64::NAN, s)?;
    let qint = e.is_int(q)?;
    let pole = e.and(qle, qint)?;
    let s = e.selc(pole, f64::INFINITY, s)?;
    let lt1 = e.cmpc(x, 1.0, CompareDir::Lt)?;
    let s = e.selc(lt1, f64::NAN, s)?;
    let eq1 = e.cmpc(x, 1.0, CompareDir::Eq)?;
    e.selc(eq1, f64::INFINITY, s)
}

pub(super) fn zeta_op(lx: &mut Lower, args: &Args) -> R {
    binary(lx, args, 0, 1, zeta_v)
}
