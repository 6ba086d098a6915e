//! embedding_dense_backward: scatter-adds grad rows at the indices
//! (skipping padding_idx, optionally scaled by 1 / frequency); and
//! embedding_renorm_, which nn.Embedding(max_norm=...) applies in place.
use stablehlo::{CompareDir, DType, ScatterDims, Value};

use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::reduce::acc;

/// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
pub(super) fn embedding_dense_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let g = args.tensor(0)?.clone();
    let idx = args.tensor(1)?.clone();
    let v = args.int(2)?;
    let pad = args.int(3)?;
    let by_freq = args.bool_or(4, false)?;
    let n: i64 = idx.shape.iter().product();
    let d = *g.shape.last().unwrap_or(&1);
    if g.shape.iter().product::<i64>() != n * d {
        bail!(Runtime, "{}: grad_output {:?} does not match indices {:?}", lx.op, g.shape, idx.shape);
    }
    let a = acc(g.dtype);
    let gv = lx.cast(g.value, a)?;
    let gv = lx.b.reshape(gv, &[n, d])?;
    let iv = lx.cast(idx.value, DType::I64)?;
    let iv = lx.b.reshape(iv, &[n])?;
    let keep = if pad >= 0 {
        let p = lx.b.splat_i64(DType::I64, pad, &[n])?;
        let ne = lx.b.compare(iv, p, CompareDir::Ne)?;
        let keep = lx.b.broadcast_in_dim(ne, &[n, d], &[0])?;
        let z = lx.full(a, 0.0, &[n, d])?;
        lx.b.select(keep, gv, z)?
    } else {
        gv
    };
    let iv2 = lx.b.reshape(iv, &[n, 1])?;
    let add = |b: &mut stablehlo::Builder, cur: &[Value], upd: &[Value]| Ok(vec![b.add(cur[0], upd[0])?]);
    let dims = ScatterDims {
        update_window_dims: vec![1],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    let zeros = lx.full(a, 0.0, &[v, d])?;
    let mut out = lx.b.scatter(zeros, iv2, keep, &dims, add)?;
    if by_freq {
        let ones = lx.full(a, 1.0, &[n])?;
        let zc = lx.full(a, 0.0, &[v])?;
        let cdims = ScatterDims::points_1d();
        let counts = lx.b.scatter(zc, iv2, ones, &cdims, add)?;
        let one = lx.full(a, 1.0, &[v])?;
        let counts = lx.b.max(counts, one)?;
        let cb = lx.b.broadcast_in_dim(counts, &[v, d], &[0])?;
        out = lx.b.div(out, cb)?;
    }
    Ok(vec![lx.cast(out, g.dtype)?])
}

/// embedding_renorm_(self, indices, max_norm, norm_type): every weight row
/// that `indices` looks up (once, however often) whose norm exceeds
/// max_norm is scaled by `max_norm / (norm + 1e-7)`, as on the CPU.
pub(super) fn embedding_renorm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let w = args.tensor(0)?.clone();
    let idx = args.tensor(1)?.clone();
    let max_norm = args.float(2)?;
    let p = args.float(3)?;
    if w.shape.len() != 2 {
        bail!(Runtime, "{}: embedding_renorm_: self must be a 2-D tensor, got {:?}", lx.op, w.shape);
    }
    let (v, d) = (w.shape[0], w.shape[1]);
    let n: i64 = idx.shape.iter().product();
    let a = acc(w.dtype);
    let x = lx.cast(w.value, a)?;
    let norms = crate::ops::reduce::vector_norm(lx, x, p, &[1], a)?;
    // The rows looked up: a scatter-add of ones at the indices.
    let iv = lx.cast(idx.value, DType::I64)?;
    let iv = lx.b.reshape(iv, &[n, 1])?;
    let ones = lx.full(a, 1.0, &[n])?;
    let zeros = lx.full(a, 0.0, &[v])?;
    let add = |b: &mut stablehlo::Builder, cur: &[Value], upd: &[Value]| Ok(vec![b.add(cur[0], upd[0])?]);
    let counts = lx.b.scatter(zeros, iv, ones, &ScatterDims::points_1d(), add)?;
    let zero = lx.full(a, 0.0, &[v])?;
    let looked_up = lx.b.compare(counts, zero, CompareDir::Gt)?;
    let limit = lx.full(a, max_norm, &[v])?;
    let over = lx.b.compare(norms, limit, CompareDir::Gt)?;
    let renorm = lx.b.and(looked_up, over)?;
    let eps = lx.full(a, 1e-7, &[v])?;
    let den = lx.b.add(norms, eps)?;
    let scale = lx.b.div(limit, den)?;
    let one = lx.full(a, 1.0, &[v])?;
    let scale = lx.b.select(renorm, scale, one)?;
    let scale = lx.b.broadcast_in_dim(scale, &[v, d], &[0])?;
    let out = lx.b.mul(x, scale)?;
    Ok(vec![lx.cast(out, w.dtype)?])
}
