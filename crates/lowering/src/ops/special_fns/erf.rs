//! erfcx(x) = exp(x²) erfc(x) (Steven G. Johnson's piecewise Chebyshev
//! fits of erfcx(4/(4+x)·…) as in ATen's `calc_erfcx`, one polynomial per
//! unit interval of y100 = 400/(4+|x|), gathered per element) and
//! log_ndtr(x) = log Φ(x) built on it.
use stablehlo::CompareDir::{Ge, Gt, Lt};
use stablehlo::{DType, GatherDims};

use super::coef::ERFCX;
use super::{log, log1p, unary, R, V};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::special::E;

/// `erfcx_y100(y100)`: `t = 2 y100 - (2i + 1)` in the working dtype, the
/// polynomial in float64 (ATen's coefficients are double literals), the
/// result rounded to the working dtype; 1 from y100 = 100 on.
fn y100_poly(e: &mut E, y100: V) -> Result<V> {
    let w = e.lx.dtype(y100);
    let shape = e.lx.shape(y100);
    let fl = e.lx.b.floor(y100)?;
    let top = e.cmpc(fl, 100.0, Ge)?;
    let lo = e.c(fl, 0.0)?;
    let hi = e.c(fl, 99.0)?;
    let fl = e.lx.b.clamp(lo, fl, hi)?;
    let idx = e.lx.b.convert(fl, DType::I32)?; // a table index: plain convert
    let two = e.mulc(y100, 2.0)?;
    let odd = e.mulc(fl, 2.0)?;
    let odd = e.addc(odd, 1.0)?;
    let t = e.sub(two, odd)?;
    let t = e.lx.cast(t, DType::F64)?;
    let dims = GatherDims {
        offset_dims: vec![],
        collapsed_slice_dims: vec![0],
        operand_batching_dims: vec![],
        start_indices_batching_dims: vec![],
        start_index_map: vec![0],
        index_vector_dim: shape.len() as i64,
    };
    let mut acc: Option<V> = None;
    for j in (0..7).rev() {
        let col: Vec<f64> = ERFCX.iter().map(|row| row[j]).collect();
        let table = e.lx.b.constant_tensor_f64(DType::F64, &[100], &col)?;
        let c = e.lx.b.gather(table, idx, &dims, &[1], false)?;
        acc = Some(match acc {
            None => c,
            Some(a) => {
                let m = e.mul(a, t)?;
                e.add(c, m)?
            }
        });
    }
    let r = e.lx.cast(acc.expect("seven coefficients"), w)?;
    e.selc(top, 1.0, r)
}

/// erfcx in the dtype of `x`.
pub(super) fn erfcx_v(e: &mut E, x: V) -> Result<V> {
    let ax = e.lx.b.abs(x)?;
    let d = e.addc(ax, 4.0)?; // 4 + x, or 4 - x for x < 0
    let y100 = e.rdivc(400.0, d)?;
    let yv = y100_poly(e, y100)?;
    // x > 50: continued fraction (in float64; ATen mixes double literals in).
    let w = e.lx.dtype(x);
    let x64 = e.lx.cast(x, DType::F64)?;
    const ISPI: f64 = 0.564_189_583_547_756_3; // 1/sqrt(pi)
    let xx = e.mul(x64, x64)?;
    let a = e.addc(xx, 4.5)?;
    let a = e.mul(xx, a)?;
    let a = e.addc(a, 2.0)?;
    let a = e.mulc(a, ISPI)?;
    let b = e.addc(xx, 5.0)?;
    let b = e.mul(xx, b)?;
    let b = e.addc(b, 3.75)?;
    let b = e.mul(x64, b)?;
    let cf = e.div(a, b)?;
    let one_term = e.rdivc(ISPI, x64)?;
    let huge = e.cmpc(x64, 5e7, Gt)?;
    let cf = e.sel(huge, one_term, cf)?;
    let cf = e.lx.cast(cf, w)?;
    let big = e.cmpc(x, 50.0, Gt)?;
    let pos = e.sel(big, cf, yv)?;
    // x < 0: 2 exp(x²) - erfcx(-x), in float64 (ATen calls the double exp).
    let xx = e.mul(x, x)?;
    let xx = e.lx.cast(xx, DType::F64)?;
    let ex = e.lx.b.exp(xx)?;
    let ex2 = e.mulc(ex, 2.0)?;
    let y64 = e.lx.cast(yv, DType::F64)?;
    let diff = e.sub(ex2, y64)?;
    let diff = e.lx.cast(diff, w)?;
    let ex2 = e.lx.cast(ex2, w)?;
    let far = e.cmpc(x, -6.1, Lt)?;
    let neg = e.sel(far, ex2, diff)?;
    let ovf = e.cmpc(x, -26.7, Lt)?;
    let neg = e.selc(ovf, f64::INFINITY, neg)?;
    let nonneg = e.cmpc(x, 0.0, Ge)?;
    e.sel(nonneg, pos, neg)
}

/// erfc in float64 via erfcx (accurate in both tails), rounded to `x`'s dtype.
pub(super) fn erfc_v(e: &mut E, x: V) -> Result<V> {
    let w = e.lx.dtype(x);
    let x = e.lx.cast(x, DType::F64)?;
    let ax = e.lx.b.abs(x)?;
    let c = erfcx_v(e, ax)?;
    let xx = e.mul(x, x)?;
    let nxx = e.lx.b.neg(xx)?;
    let ex = e.lx.b.exp(nxx)?;
    let r = e.mul(ex, c)?;
    let two = e.rsubc(2.0, r)?;
    let neg = e.cmpc(x, 0.0, Lt)?;
    let r = e.sel(neg, two, r)?;
    e.lx.cast(r, w)
}

pub(super) fn erfcx(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, erfcx_v)
}

/// log Φ(x): log(erfcx(-x/√2)/2) - x²/2 below -1, else log1p(-erfc(x/√2)/2).
pub(super) fn log_ndtr(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, |e, x| {
        let t = e.mulc(x, std::f64::consts::FRAC_1_SQRT_2)?;
        let nt = e.lx.b.neg(t)?;
        let c = erfcx_v(e, nt)?;
        let c = e.mulc(c, 0.5)?;
        let l = log(e, c)?;
        let tt = e.mul(t, t)?; // not contracted by the CPU build here
        let lo = e.sub(l, tt)?;
        let c = erfc_v(e, t)?;
        let c = e.mulc(c, -0.5)?;
        let hi = log1p(e, c)?;
        let lt = e.cmpc(x, -1.0, Lt)?;
        e.sel(lt, lo, hi)
    })
}


/// erf(x) at full float64 precision (the builder's erf is a Chebyshev fit
/// good to about 1e-10 there): the Maclaurin series x P(x²) below 0.5,
/// 1 - erfc(|x|) (through erfcx) above. Other dtypes: the builder's.
pub(crate) fn erf_precise(lx: &mut Lower, x: V) -> Result<V> {
    if lx.dtype(x) != DType::F64 {
        return Ok(lx.b.erf(x)?);
    }
    let e = &mut E { lx };
    // P(u) = 2/sqrt(pi) sum (-1)^n u^n / (n! (2n + 1)), highest degree first;
    // 13 terms leave < 1e-17 at |x| = 0.5.
    const TWO_OVER_SQRT_PI: f64 = std::f64::consts::FRAC_2_SQRT_PI;
    let mut coef = Vec::with_capacity(13);
    let mut fact = 1.0f64;
    for n in 0..13 {
        if n > 0 {
            fact *= n as f64;
        }
        let sign = if n % 2 == 0 { 1.0 } else { -1.0 };
        coef.push(TWO_OVER_SQRT_PI * sign / (fact * (2 * n + 1) as f64));
    }
    coef.reverse();
    let u = e.mul(x, x)?;
    let p = e.polevl(u, &coef)?;
    let series = e.mul(x, p)?;
    let ax = e.lx.b.abs(x)?;
    let c = erfc_v(e, ax)?;
    let big = e.rsubc(1.0, c)?;
    let neg = e.cmpc(x, 0.0, Lt)?;
    let nbig = e.lx.b.neg(big)?;
    let big = e.sel(neg, nbig, big)?;
    let small = e.cmpc(ax, 0.5, Lt)?;
    // NaN: the series keeps it.
    let nan = e.cmp(x, x, stablehlo::CompareDir::Ne)?;
    let small = e.or(small, nan)?;
    e.sel(small, series, big)
}

/// erfinv(y) at full float64 precision: the builder's fit (about 2e-8
/// relative in float64) refined by two Newton steps on erf(x) = |y|,
/// written as (1 - |y|) - erfc(x) = 0 from |y| = 0.5 on so that the tail
/// keeps its digits. Other dtypes: the builder's.
pub(crate) fn erfinv_precise(lx: &mut Lower, y: V) -> Result<V> {
    let x0 = lx.b.erfinv(y)?;
    if lx.dtype(y) != DType::F64 {
        return Ok(x0);
    }
    let t = lx.b.abs(y)?;
    let mut x = lx.b.abs(x0)?;
    for _ in 0..2 {
        let by_erf = {
            let ef = erf_precise(lx, x)?;
            lx.b.sub(ef, t)?
        };
        let by_erfc = {
            let e = &mut E { lx };
            let c = erfc_v(e, x)?;
            let one_minus = e.rsubc(1.0, t)?;
            e.sub(one_minus, c)? // erf(x) - t = (1 - t) - erfc(x)
        };
        let e = &mut E { lx };
        let tail = e.cmpc(t, 0.5, Ge)?;
        let f = e.sel(tail, by_erfc, by_erf)?;
        // f' = 2/sqrt(pi) exp(-x^2)
        let xx = e.mul(x, x)?;
        let nxx = e.lx.b.neg(xx)?;
        let ex = e.lx.b.exp(nxx)?;
        let d = e.mulc(ex, std::f64::consts::FRAC_2_SQRT_PI)?;
        let step = e.div(f, d)?;
        let x1 = e.sub(x, step)?;
        // Only finite, nonzero-derivative points move (y = ±1 stays ±inf).
        let fin = e.lx.b.is_finite(x1)?;
        x = e.sel(fin, x1, x)?;
    }
    let e = &mut E { lx };
    // Tiny |y|: erfinv(t) = t sqrt(pi)/2 to float64 precision; Newton's
    // residuals there would be subnormal, which the plugin flushes to 0.
    let lin = e.mulc(t, 0.886_226_925_452_758)?;
    let tiny = e.cmpc(t, 1e-100, Lt)?;
    let x = e.sel(tiny, lin, x)?;
    let neg = e.cmpc(y, 0.0, Lt)?;
    let nx = e.lx.b.neg(x)?;
    let x = e.sel(neg, nx, x)?;
    // NaN, ±1 and 0 as the fit gives them (0 keeps its sign).
    let fin = e.lx.b.is_finite(x0)?;
    let nz = e.cmpc(y, 0.0, stablehlo::CompareDir::Ne)?;
    let keep = e.and(fin, nz)?;
    e.sel(keep, x, x0)
}
