//! The math layer norm and batch norm share (group_norm too): statistics
//! dtype, broadcast parameters, moments, 1/sqrt(var + eps), the affine
//! normalization and the input gradient.
use stablehlo::{DType, Value};

use super::{k, mean_back};
use crate::args::TensorArg;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::reduce::acc;

/// The dtype of a norm's saved statistics: the acc dtype when parameters of
/// another dtype make it a mixed-precision norm, else the input's.
pub(super) fn stats_dtype(x: DType, params: &[Option<&TensorArg>]) -> DType {
    if params.iter().flatten().any(|p| p.dtype != x) {
        acc(x)
    } else {
        x
    }
}

/// A parameter spanning `dims` of `shape`, broadcast to `shape` in dtype `a`.
pub(super) fn param(lx: &mut Lower, p: Option<&TensorArg>, shape: &[i64], dims: &[i64], a: DType) -> Result<Option<Value>> {
    let Some(p) = p else { return Ok(None) };
    let v = lx.cast(p.value, a)?;
    let want: Vec<i64> = dims.iter().map(|&d| shape[d as usize]).collect();
    let v = lx.b.reshape(v, &want)?;
    Ok(Some(lx.b.broadcast_in_dim(v, shape, dims)?))
}

pub(in crate::ops) fn rsqrt_eps(lx: &mut Lower, v: Value, eps: f64) -> Result<Value> {
    let e = k(lx, v, eps)?;
    let ve = lx.b.add(v, e)?;
    Ok(lx.b.rsqrt(ve)?)
}

/// (mean, biased variance), both broadcast back over `dims`.
pub(in crate::ops) fn moments(lx: &mut Lower, x: Value, dims: &[i64]) -> Result<(Value, Value)> {
    let m = mean_back(lx, x, dims)?;
    let d = lx.b.sub(x, m)?;
    let d2 = lx.b.mul(d, d)?;
    Ok((m, mean_back(lx, d2, dims)?))
}

/// (x - mean) * rstd * w + b, with w/b spanning `pdims`.
#[allow(clippy::too_many_arguments)]
pub(super) fn normalize(
    lx: &mut Lower,
    x: Value,
    mean: Value,
    rstd: Value,
    w: Option<&TensorArg>,
    b: Option<&TensorArg>,
    pdims: &[i64],
) -> Result<Value> {
    let (shape, a) = (lx.shape(x), lx.dtype(x));
    let d = lx.b.sub(x, mean)?;
    let mut y = lx.b.mul(d, rstd)?;
    if let Some(wv) = param(lx, w, &shape, pdims, a)? {
        y = lx.b.mul(y, wv)?;
    }
    if let Some(bv) = param(lx, b, &shape, pdims, a)? {
        y = lx.b.add(y, bv)?;
    }
    Ok(y)
}

/// The input gradient of a norm over `dims` with saved statistics:
/// `scale * (g - mean(g) - xhat * mean(g * xhat))`.
pub(in crate::ops) fn norm_dx(lx: &mut Lower, g: Value, xhat: Value, scale: Value, dims: &[i64]) -> Result<Value> {
    let mg = mean_back(lx, g, dims)?;
    let gx = lx.b.mul(g, xhat)?;
    let mgx = mean_back(lx, gx, dims)?;
    let t1 = lx.b.sub(g, mg)?;
    let t2 = lx.b.mul(xhat, mgx)?;
    let t3 = lx.b.sub(t1, t2)?;
    Ok(lx.b.mul(scale, t3)?)
}
