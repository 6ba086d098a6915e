//! Determinants from the LU factorization: _linalg_det (det, LU, pivots) and
//! _linalg_slogdet (sign, logabsdet, LU, pivots). Like ATen, they factor
//! A^T (det(A^T) = det(A)) when A is real and contiguous, else A itself; the
//! backward formulas pick the matching solve by the same test, so the
//! returned LU must follow it.
use stablehlo::{CompareDir, DType, Value};

use super::getrf::{factor, Lu};
use super::{check_float, check_square, diagonal, flat3, mt, unflat};
use crate::args::Args;
use crate::ctx::Lower;
use crate::ops::complex;
use crate::error::Result;

type R = Result<Vec<Value>>;

/// det(P) as ±1 of `dtype`, `[B]`: -1 when an odd number of pivots swap.
fn det_p(lx: &mut Lower, piv: Value, dtype: DType) -> Result<Value> {
    let s = lx.shape(piv);
    let id = lx.b.iota(DType::I32, &s, 1)?;
    let one = lx.full(DType::I32, 1.0, &s)?;
    let id1 = lx.b.add(id, one)?;
    let swapped = lx.b.compare(piv, id1, CompareDir::Ne)?;
    let cnt = lx.cast(swapped, DType::I32)?;
    let cnt = lx.b.reduce_sum(cnt, &[1])?;
    let two = lx.full(DType::I32, 2.0, &[s[0]])?;
    let odd = lx.b.rem(cnt, two)?;
    let odd = lx.cast(odd, DType::Bool)?;
    let neg = lx.full(dtype, -1.0, &[s[0]])?;
    let pos = lx.full(dtype, 1.0, &[s[0]])?;
    Ok(lx.b.select(odd, neg, pos)?)
}

fn factor_t(lx: &mut Lower, args: &Args, api: &str) -> Result<(Lu, Vec<i64>, DType)> {
    let a = args.tensor(0)?;
    check_square(lx, a, api)?;
    check_float(lx, a, api)?;
    let (a3, batch) = flat3(lx, a.value)?;
    let a3 = if a.contiguous && !a.dtype.is_complex() { mt(lx, a3)? } else { a3 };
    Ok((factor(lx, a3)?, batch, a.dtype))
}

/// _linalg_det(A) -> (result, LU, pivots)
pub(super) fn linalg_det(lx: &mut Lower, args: &Args) -> R {
    let (f, batch, dt) = factor_t(lx, args, "linalg.det")?;
    let d = diagonal(lx, f.lu)?;
    let prod = lx.b.reduce_prod(d, &[1])?;
    let sp = det_p(lx, f.piv, dt)?;
    let det = lx.b.mul(sp, prod)?;
    let det = lx.b.reshape(det, &batch)?;
    Ok(vec![det, unflat(lx, f.lu, &batch)?, unflat(lx, f.piv, &batch)?])
}

/// _linalg_slogdet(A) -> (sign, logabsdet, LU, pivots)
pub(super) fn linalg_slogdet(lx: &mut Lower, args: &Args) -> R {
    let (f, batch, dt) = factor_t(lx, args, "linalg.slogdet")?;
    let d = diagonal(lx, f.lu)?;
    // Complex: the product of the unit phases d / |d|.
    let (sg, ad) = if dt.is_complex() {
        (complex::sgn(lx, d)?, complex::abs(lx, d)?)
    } else {
        (lx.b.sign(d)?, lx.b.abs(d)?)
    };
    let sg = lx.b.reduce_prod(sg, &[1])?;
    let sp = det_p(lx, f.piv, dt)?;
    let sign = lx.b.mul(sg, sp)?;
    let lg = lx.b.log(ad)?;
    let logabs = lx.b.reduce_sum(lg, &[1])?;
    let sign = lx.b.reshape(sign, &batch)?;
    let logabs = lx.b.reshape(logabs, &batch)?;
    Ok(vec![sign, logabs, unflat(lx, f.lu, &batch)?, unflat(lx, f.piv, &batch)?])
}
