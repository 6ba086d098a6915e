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

