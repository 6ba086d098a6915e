//! Sum-like reductions: sum, nansum, prod and mean.
use stablehlo::{CompareDir, DType, Value};

use super::{acc, count, dims_keep_dtype, keep, not_float, overload, reduce_dims};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;

/// Sum-like reductions: integers and bool give int64 unless `dtype` says.
pub(super) fn sum_like(lx: &mut Lower, args: &Args, nan_to_zero: bool, product: bool) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let (dims, keepdim, dtype) = if product && !matches!(overload(lx.op), "" | "out") {
        (Some(vec![args.int(1)?]), args.bool_or(2, false)?, args.opt_dtype(3)?)
    } else {
        dims_keep_dtype(args, if nan_to_zero { &[] } else { &["", "out"] }, lx.op)?
    };
    let out = dtype.unwrap_or(if t.dtype.is_float() || t.dtype.is_complex() { t.dtype } else { DType::I64 });
    let dims = reduce_dims(lx, dims, t.shape.len(), true)?;
    let x = lx.cast(t.value, out)?;
    let mut x = lx.cast(x, acc(out))?;
    if nan_to_zero && out.is_float() {
        let nan = lx.b.compare(x, x, CompareDir::Ne)?;
        let zero = lx.full_like(x, 0.0)?;
        x = lx.b.select(nan, zero, x)?;
    }
    let r = if product { lx.b.reduce_prod(x, &dims)? } else { lx.b.reduce_sum(x, &dims)? };
    let r = lx.cast(r, out)?;
    Ok(vec![keep(lx, r, &t.shape, &dims, keepdim)?])
}

pub(super) fn mean(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let (dims, keepdim, dtype) = dims_keep_dtype(args, &["", "dtype_out"], lx.op)?;
    let out = dtype.unwrap_or(t.dtype);
    if !out.is_complex() {
        not_float(
            lx,
            "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype",
            out,
        )?;
    }
    let dims = reduce_dims(lx, dims, t.shape.len(), true)?;
    let x = lx.cast(t.value, out)?;
    let x = lx.cast(x, acc(out))?;
    let s = lx.b.reduce_sum(x, &dims)?;
    let n = lx.full_like(s, count(&t.shape, &dims) as f64)?;
    let m = lx.b.div(s, n)?;
    let m = lx.cast(m, out)?;
    Ok(vec![keep(lx, m, &t.shape, &dims, keepdim)?])
}
