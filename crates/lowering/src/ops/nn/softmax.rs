//! softmax / log_softmax over one dim and their backward ops
//! (_softmax_backward_data, _log_softmax_backward_data).
use stablehlo::{DType, Value};

use super::{float_only, sum_back};
use crate::args::{norm_dim, Args, TensorArg};
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::reduce::{acc, unreduce};

/// (value as acc dtype in at least rank 1, dim, original shape).
fn softmax_input(lx: &mut Lower, t: &TensorArg, dim: i64) -> Result<(Value, i64)> {
    float_only(lx, t.dtype)?;
    let d = norm_dim(lx.op, dim, t.shape.len())? as i64;
    let v = if t.shape.is_empty() { lx.b.reshape(t.value, &[1])? } else { t.value };
    Ok((lx.cast(v, acc(t.dtype))?, d))
}

pub(super) fn softmax_impl(lx: &mut Lower, args: &Args, log: bool) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let out = if args.bool_or(2, false)? { DType::F32 } else { t.dtype };
    let (x, d) = softmax_input(lx, &t, args.int(1)?)?;
    let shape = lx.shape(x);
    // The max only keeps exp() in range: a NaN it drops still makes its
    // row NaN through x - m, so the plain (vectorized) reduction serves.
    let m = lx.b.reduce_max(x, &[d])?;
    let mb = unreduce(lx, m, &shape, &[d])?;
    let z = lx.b.sub(x, mb)?;
    let e = lx.b.exp(z)?;
    let s = sum_back(lx, e, &[d])?;
    let r = if log {
        let l = lx.b.log(s)?;
        lx.b.sub(z, l)?
    } else {
        lx.b.div(e, s)?
    };
    let r = lx.cast(r, out)?;
    Ok(vec![lx.b.reshape(r, &t.shape)?])
}

/// (grad_output, output, dim, input_dtype)
pub(super) fn softmax_backward_impl(lx: &mut Lower, args: &Args, log: bool) -> Result<Vec<Value>> {
    let g = args.tensor(0)?.clone();
    let y = args.tensor(1)?.clone();
    // As PyTorch's meta function: only float grads of a half_to_float
    // softmax (input_dtype float16) come back as float16.
    let out = match args.opt_dtype(3)? {
        Some(DType::F16) if g.dtype == DType::F32 => DType::F16,
        _ => g.dtype,
    };
    let (gv, d) = softmax_input(lx, &g, args.int(2)?)?;
    let (yv, _) = softmax_input(lx, &y, args.int(2)?)?;
    let yv = lx.cast(yv, lx.dtype(gv))?;
    let r = if log {
        let s = sum_back(lx, gv, &[d])?;
        let p = lx.b.exp(yv)?;
        let ps = lx.b.mul(p, s)?;
        lx.b.sub(gv, ps)?
    } else {
        let gy = lx.b.mul(gv, yv)?;
        let s = sum_back(lx, gy, &[d])?;
        let diff = lx.b.sub(gv, s)?;
        lx.b.mul(yv, diff)?
    };
    let r = lx.cast(r, out)?;
    Ok(vec![lx.b.reshape(r, &g.shape)?])
}
