//! Inclusive scans: cumsum and cumprod.
use stablehlo::{DType, Value};

use super::acc;
use crate::args::{norm_dim, Args};
use crate::ctx::Lower;
use crate::error::Result;

/// Inclusive scan along one dim with a reduce_window (window = the whole dim,
/// padded in front), summing or multiplying.
pub(super) fn scan(lx: &mut Lower, args: &Args, product: bool) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let dim = norm_dim(lx.op, args.int(1)?, t.shape.len())?;
    let out = args.opt_dtype(2)?.unwrap_or(if t.dtype.is_float() || t.dtype.is_complex() { t.dtype } else { DType::I64 });
    let x = lx.cast(t.value, out)?;
    if t.shape.is_empty() || t.shape[dim] <= 1 || t.shape.contains(&0) {
        return Ok(vec![x]);
    }
    let a = acc(out);
    let x = lx.cast(x, a)?;
    let n = t.shape[dim];
    let rank = t.shape.len();
    let mut window = vec![1; rank];
    window[dim] = n;
    let mut padding = vec![(0, 0); rank];
    padding[dim] = (n - 1, 0);
    let init = lx.b.constant_f64(a, if product { 1.0 } else { 0.0 });
    let r = lx.b.reduce_window(&[x], &[init], &window, &[], &[], &[], &padding, |b, l, r| {
        Ok(vec![if product { b.mul(l[0], r[0])? } else { b.add(l[0], r[0])? }])
    })?[0];
    Ok(vec![lx.cast(r, out)?])
}
