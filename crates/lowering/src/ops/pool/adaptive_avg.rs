//! Adaptive average pooling and its backward: each spatial dim contracted
//! with an averaging matrix.
use stablehlo::{DType, Value};

use super::expand;
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::dtypes;
use crate::error::Result;
use crate::ops::reduce::acc;

/// The `[out, in]` averaging matrix of adaptive pooling along one dim.
fn adaptive_matrix(lx: &mut Lower, input: i64, out: i64, dt: DType) -> Result<Value> {
    let mut data = vec![0.0; (input * out) as usize];
    for o in 0..out {
        let start = (o * input) / out;
        let end = ((o + 1) * input + out - 1) / out;
        for i in start..end {
            data[(o * input + i) as usize] = 1.0 / (end - start) as f64;
        }
    }
    Ok(lx.b.constant_tensor_f64(dt, &[out, input], &data)?)
}

/// Contracts the last `n` dims of `v` with matrices `m[i]` (`[to, from]` when
/// `forward`, else used transposed), keeping the dim order.
fn contract(lx: &mut Lower, mut v: Value, sizes_from: &[i64], sizes_to: &[i64], n: usize, forward: bool) -> Result<Value> {
    let dt = lx.dtype(v);
    for i in 0..n {
        let rank = lx.shape(v).len();
        let dim = (rank - n + i) as i64;
        let m = adaptive_matrix(lx, sizes_from[i], sizes_to[i], dt)?;
        // forward: contract v[dim] (in) with m[1]; backward: v[dim] (out) with m[0].
        let mc = if forward { 1 } else { 0 };
        let r = lx.b.dot_general(v, m, &[], &[], &[dim], &[mc], None)?;
        // result: v dims without `dim`, then the new dim last; move it back.
        let mut perm: Vec<i64> = (0..dim).collect();
        perm.push(rank as i64 - 1);
        perm.extend(dim..rank as i64 - 1);
        v = lx.b.transpose(r, &perm)?;
    }
    Ok(v)
}

/// _adaptive_avg_pool{2,3}d(self, output_size)
pub(super) fn adaptive_avg_pool(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    if !t.dtype.is_float() {
        bail!(NotImplemented, "{}: \"adaptive_avg_pool{}d\" not implemented for '{}'", lx.op, n, dtypes::name(t.dtype));
    }
    if t.shape.len() != n + 1 && t.shape.len() != n + 2 {
        bail!(Runtime, "{}: Expected {}D or {}D tensor, got {:?}", lx.op, n + 1, n + 2, t.shape);
    }
    let out = expand(lx, args.ints(1)?, n, &[], "output_size")?;
    let input = t.shape[t.shape.len() - n..].to_vec();
    let a = acc(t.dtype);
    let x = lx.cast(t.value, a)?;
    let y = contract(lx, x, &input, &out, n, true)?;
    Ok(vec![lx.cast(y, t.dtype)?])
}

/// _adaptive_avg_pool{2,3}d_backward(grad_output, self)
pub(super) fn adaptive_avg_pool_backward(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
    let g = args.tensor(0)?.clone();
    let x = args.tensor(1)?.clone();
    let r = x.shape.len();
    let input = x.shape[r - n..].to_vec();
    let out = g.shape[r - n..].to_vec();
    let a = acc(g.dtype);
    let gv = lx.cast(g.value, a)?;
    let y = contract(lx, gv, &input, &out, n, false)?;
    Ok(vec![lx.cast(y, x.dtype)?])
}
