//! LU-based linear algebra written out in StableHLO (XLA CPU offers no LAPACK
//! calls we can rely on): the partial-pivoting LU factorization (LAPACK getrf's
//! pivot choice, so factors and pivots compare equal with the CPU) as a
//! `stablehlo.while` over columns, and what is built on it: lu_unpack /
//! linalg_lu, lu_solve, solve, inv, det, slogdet; LDL^T with Bunch-Kaufman
//! pivoting (sytrf/sytrs); and matrix_exp (ATen's Taylor / scaling-and-squaring).
//!
//! All helpers work on matrices flattened to `[B, m, n]` (one batch dim);
//! the lowerings reshape to and from the op's batch shape.
use stablehlo::{CompareDir, DType, Value};

use crate::args::TensorArg;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

mod det;
mod getrf;
mod ldl;
mod ldl_solve;
mod matrix_exp;
mod solve;

pub const OPS: &[OpEntry] = &[
    op!("linalg_lu_factor_ex", getrf::linalg_lu_factor_ex),
    op!("linalg_lu", getrf::linalg_lu),
    op!("lu_unpack", getrf::lu_unpack),
    op!("linalg_lu_solve", solve::linalg_lu_solve),
    op!("_linalg_solve_ex", solve::linalg_solve_ex),
    op!("linalg_inv_ex", solve::linalg_inv_ex),
    op!("_linalg_det", det::linalg_det),
    op!("_linalg_slogdet", det::linalg_slogdet),
    op!("linalg_matrix_exp", matrix_exp::linalg_matrix_exp),
    op!("linalg_ldl_factor_ex", ldl::linalg_ldl_factor_ex),
    op!("linalg_ldl_solve", ldl_solve::linalg_ldl_solve),
];

/// Checks that `t` is a (batch of) matrix of float32/float64 or
/// complex64/complex128 for `api`. (Complex tensors only reach the lowerings
/// that `ops::complex::COMPLEX_OPS` lists.)
pub(super) fn check_float(lx: &Lower, t: &TensorArg, api: &str) -> Result<()> {
    if t.shape.len() < 2 {
        bail!(Runtime, "{api}: The input tensor A must have at least 2 dimensions. ({})", lx.op);
    }
    super::lapack_dtypes::check(api, t.dtype)
}

/// Checks that `t` is a batch of square matrices.
pub(super) fn check_square(lx: &Lower, t: &TensorArg, api: &str) -> Result<()> {
    let r = t.shape.len();
    if r < 2 {
        bail!(Runtime, "{api}: The input tensor A must have at least 2 dimensions. ({})", lx.op);
    }
    if t.shape[r - 1] != t.shape[r - 2] {
        bail!(Runtime, "{api}: A must be batches of square matrices, but they are {} by {} matrices ({})",
            t.shape[r - 2], t.shape[r - 1], lx.op);
    }
    Ok(())
}

/// `[.., m, n]` → `[B, m, n]`; returns the value and the batch shape.
pub(super) fn flat3(lx: &mut Lower, v: Value) -> Result<(Value, Vec<i64>)> {
    let s = lx.shape(v);
    let r = s.len();
    let batch = s[..r - 2].to_vec();
    let b: i64 = batch.iter().product();
    Ok((lx.b.reshape(v, &[b, s[r - 2], s[r - 1]])?, batch))
}

/// `[B, rest..]` → `batch ++ rest`.
pub(super) fn unflat(lx: &mut Lower, v: Value, batch: &[i64]) -> Result<Value> {
    let s = lx.shape(v);
    let mut out = batch.to_vec();
    out.extend_from_slice(&s[1..]);
    Ok(lx.b.reshape(v, &out)?)
}

/// Swaps the last two dims of a rank-3 value.
pub(super) fn mt(lx: &mut Lower, v: Value) -> Result<Value> {
    Ok(lx.b.transpose(v, &[0, 2, 1])?)
}

/// Broadcasts `v` into `shape` with `dims` mapping its dims.
pub(super) fn bc(lx: &mut Lower, v: Value, shape: &[i64], dims: &[i64]) -> Result<Value> {
    Ok(lx.b.broadcast_in_dim(v, shape, dims)?)
}

/// i1 `[B, m, n]` mask of `col - row <cmp> k` (e.g. Le/-1 = strictly lower).
pub(super) fn diag_mask(lx: &mut Lower, shape: &[i64], dir: CompareDir, k: i64) -> Result<Value> {
    let row = lx.b.iota(DType::I64, shape, 1)?;
    let col = lx.b.iota(DType::I64, shape, 2)?;
    let d = lx.b.sub(col, row)?;
    let kk = lx.full(DType::I64, k as f64, shape)?;
    Ok(lx.b.compare(d, kk, dir)?)
}

/// The `[B, m, n]` identity-like matrix of `dtype`.
pub(super) fn eye(lx: &mut Lower, dtype: DType, shape: &[i64]) -> Result<Value> {
    let m = diag_mask(lx, shape, CompareDir::Eq, 0)?;
    lx.cast(m, dtype)
}

/// Keeps the entries where `mask`, zero elsewhere.
pub(super) fn keep(lx: &mut Lower, mask: Value, v: Value) -> Result<Value> {
    let z = lx.full_like(v, 0.0)?;
    Ok(lx.b.select(mask, v, z)?)
}

/// Unit lower triangle (`[B, m, k]`) and upper triangle (`[B, k, n]`) of a packed LU.
pub(super) fn unpack_lu(lx: &mut Lower, lu: Value) -> Result<(Value, Value)> {
    let s = lx.shape(lu);
    let (b, m, n) = (s[0], s[1], s[2]);
    let k = m.min(n);
    let dt = lx.dtype(lu);
    let lpart = lx.b.slice(lu, &[0, 0, 0], &[b, m, k], &[1, 1, 1])?;
    let strict = diag_mask(lx, &[b, m, k], CompareDir::Lt, 0)?;
    let l0 = keep(lx, strict, lpart)?;
    let i = eye(lx, dt, &[b, m, k])?;
    let l = lx.b.add(l0, i)?;
    let upart = lx.b.slice(lu, &[0, 0, 0], &[b, k, n], &[1, 1, 1])?;
    let upper = diag_mask(lx, &[b, k, n], CompareDir::Ge, 0)?;
    let u = keep(lx, upper, upart)?;
    Ok((l, u))
}

/// `[B, m, k] x [B, k, n]`.
pub(super) fn bmm(lx: &mut Lower, a: Value, b: Value) -> Result<Value> {
    Ok(lx.b.dot_general(a, b, &[0], &[0], &[2], &[1], None)?)
}

/// The diagonal `[B, n]` of a square `[B, n, n]`.
pub(crate) fn diagonal(lx: &mut Lower, v: Value) -> Result<Value> {
    let s = lx.shape(v);
    let m = diag_mask(lx, &s, CompareDir::Eq, 0)?;
    let d = keep(lx, m, v)?;
    Ok(lx.b.reduce_sum(d, &[2])?)
}

pub(super) use crate::ops::indexing::any;

/// Batch shape of `a` ([.., m, n]) and `b` broadcast, for the solvers.
pub(super) fn broadcast_batch(lx: &Lower, a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
    match stablehlo::broadcast_shapes(a, b) {
        Ok(s) => Ok(s),
        Err(_) => bail!(Runtime, "{}: The batch dimensions {a:?} and {b:?} are not broadcastable", lx.op),
    }
}
