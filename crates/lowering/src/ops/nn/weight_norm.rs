//! The fused weight norm `nn.utils.weight_norm` calls on accelerators:
//! `w = v * (g / ||v||)`, the norm taken over every dim but `dim`.
use stablehlo::Value;

use super::{along, float_only, sum_back};
use crate::args::{Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::reduce::acc;

/// The dims the norm reduces: all but `dim`, which must be the first or
/// last (as for the CPU and CUDA kernels).
fn norm_dims(lx: &Lower, v: &TensorArg, g: &TensorArg, dim: i64) -> Result<Vec<i64>> {
    let rank = v.shape.len() as i64;
    let d = if dim < 0 { dim + rank } else { dim };
    if d != 0 && d != rank - 1 {
        bail!(Runtime, "{}: fused kernels can only be applied for first or last dim (got dim={dim} for a {rank}-d v)", lx.op);
    }
    let want: i64 = if rank == 0 { 1 } else { v.shape[d as usize] };
    if g.shape.iter().product::<i64>() != want {
        bail!(
            Runtime,
            "{}: g of shape {:?} must hold one value per slice of v (shape {:?}) along dim {dim}",
            lx.op,
            g.shape,
            v.shape
        );
    }
    Ok((0..rank).filter(|&i| i != d).collect())
}

/// ||v|| over `dims`, broadcast back to v's shape (in v's acc dtype).
fn norms_back(lx: &mut Lower, v: Value, dims: &[i64]) -> Result<Value> {
    let v2 = lx.b.mul(v, v)?;
    let s = sum_back(lx, v2, dims)?;
    Ok(lx.b.sqrt(s)?)
}

/// _weight_norm_interface(v, g, dim=0) -> (w, norms); norms has g's shape
/// and its acc dtype.
pub(super) fn weight_norm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (v, g) = (args.tensor(0)?.clone(), args.tensor(1)?.clone());
    float_only(lx, v.dtype)?;
    let dims = norm_dims(lx, &v, &g, args.int_or(2, 0)?)?;
    let a = acc(v.dtype);
    let x = lx.cast(v.value, a)?;
    let n = norms_back(lx, x, &dims)?;
    let gv = lx.cast(g.value, a)?;
    let gb = along(lx, gv, &v.shape, &dims)?;
    let scale = lx.b.div(gb, n)?;
    let w = lx.b.mul(x, scale)?;
    let norms = one_per_slice(lx, n, &v.shape, &dims, &g.shape)?;
    Ok(vec![lx.cast(w, v.dtype)?, lx.cast(norms, acc(g.dtype))?])
}

/// _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim)
/// -> (grad_v, grad_g):
/// `grad_g = sum(grad_w * v) / n`, `grad_v = (g / n) * (grad_w - v * grad_g / n)`.
pub(super) fn weight_norm_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (gw, v, g) = (args.tensor(0)?.clone(), args.tensor(1)?.clone(), args.tensor(2)?.clone());
    let norms = args.tensor(3)?.clone();
    float_only(lx, v.dtype)?;
    let dims = norm_dims(lx, &v, &g, args.int(4)?)?;
    let a = acc(v.dtype);
    let (x, dy) = (lx.cast(v.value, a)?, lx.cast(gw.value, a)?);
    let n = lx.cast(norms.value, a)?;
    let n = along(lx, n, &v.shape, &dims)?;
    let gv = lx.cast(g.value, a)?;
    let gb = along(lx, gv, &v.shape, &dims)?;
    let xdy = lx.b.mul(x, dy)?;
    let dot = sum_back(lx, xdy, &dims)?;
    let grad_g_full = lx.b.div(dot, n)?;
    let grad_g = one_per_slice(lx, grad_g_full, &v.shape, &dims, &g.shape)?;
    let t = lx.b.div(grad_g_full, n)?;
    let t = lx.b.mul(x, t)?;
    let t = lx.b.sub(dy, t)?;
    let scale = lx.b.div(gb, n)?;
    let grad_v = lx.b.mul(scale, t)?;
    Ok(vec![lx.cast(grad_v, v.dtype)?, lx.cast(grad_g, g.dtype)?])
}

/// One value per slice of `x`, which is constant along `dims` (a
/// broadcast-back reduction), in g's shape.
fn one_per_slice(lx: &mut Lower, x: Value, shape: &[i64], dims: &[i64], g_shape: &[i64]) -> Result<Value> {
    let first: Vec<i64> = shape.iter().enumerate().map(|(i, &s)| if dims.contains(&(i as i64)) { 1 } else { s }).collect();
    let s = lx.b.slice(x, &vec![0; shape.len()], &first, &[])?;
    Ok(lx.b.reshape(s, g_shape)?)
}
