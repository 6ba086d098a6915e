//! Orthogonal-factorization linear algebra written out in StableHLO (XLA CPU
//! has no LAPACK custom calls we can rely on): Householder QR (geqrf,
//! linalg_qr, linalg_householder_product, ormqr), symmetric eigen by cyclic
//! Jacobi (_linalg_eigh, linalg_matrix_sqrth), SVD by one-sided Jacobi
//! (_linalg_svd) with least squares (linalg_lstsq) and the polar
//! decomposition (linalg_polar) on top of it.
//!
//! The algorithms work on rank-3 `[B, m, n]` values (batch dims flattened)
//! inside `stablehlo.while` loops. Loop bodies are built on region builders,
//! so the helpers here take a plain `&mut Builder` and create their own
//! constants; a body may only use its loop-carried values.
use stablehlo::{Builder, CompareDir, DType, Value};

pub(super) use crate::ops::complex::{adjoint, conj, modulus};

use crate::args::TensorArg;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

mod eigh;
mod householder;
mod jacobi;
mod lstsq;
mod polar;
mod svd;

pub const OPS: &[OpEntry] = &[
    op!("geqrf", householder::geqrf),
    op!("linalg_qr", householder::linalg_qr),
    op!("linalg_householder_product", householder::linalg_householder_product),
    op!("orgqr", householder::linalg_householder_product),
    op!("ormqr", householder::ormqr),
    op!("_linalg_eigh", eigh::linalg_eigh),
    op!("linalg_matrix_sqrth", eigh::linalg_matrix_sqrth),
    op!("_linalg_svd", svd::linalg_svd),
    op!("linalg_lstsq", lstsq::linalg_lstsq),
    op!("linalg_polar", polar::linalg_polar),
];

/// Raises (at the next sync) the CPU's LinAlgError for a NaN entry of `t`,
/// as LAPACK's SVD fails on one (an infinity it takes), where Jacobi sweeps
/// would return NaN silently. (eigh is left alone: LAPACK fails on some
/// NaN input and returns NaN for other, with no rule to match.)
pub(super) fn check_no_nan(lx: &mut Lower, t: &TensorArg, message: &str) -> Result<()> {
    let m = modulus(lx.b, t.value)?;
    let nan = lx.b.compare(m, m, CompareDir::Ne)?;
    let bad = crate::ops::indexing::any(lx, nan)?;
    lx.check_linalg(bad, format!("{message} ({})", lx.op));
    Ok(())
}

/// Rejects anything but float32/float64 or complex64/complex128 `[.., m, n]`
/// inputs. (Complex tensors only reach the lowerings that
/// `ops::complex::COMPLEX_OPS` lists.)
pub(super) fn check_matrix(lx: &Lower, t: &TensorArg, what: &str) -> Result<()> {
    if t.shape.len() < 2 {
        bail!(Runtime, "{}: The input tensor {what} must have at least 2 dimensions.", lx.op);
    }
    super::lapack_dtypes::check(lx.op, t.dtype)
}

/// Flattens the batch dims of `[.., m, n]` into one: returns the `[B, m, n]`
/// value and the batch shape.
pub(super) fn to3(b: &mut Builder, v: Value) -> Result<(Value, Vec<i64>)> {
    let s = b.shape(v).to_vec();
    let r = s.len();
    let batch = s[..r - 2].to_vec();
    let bb: i64 = batch.iter().product();
    Ok((b.reshape(v, &[bb, s[r - 2], s[r - 1]])?, batch))
}

/// Reshapes `[B, ..tail]` back to `[..batch, ..tail]`.
pub(super) fn from_batch(b: &mut Builder, v: Value, batch: &[i64]) -> Result<Value> {
    let s = b.shape(v).to_vec();
    let mut shape = batch.to_vec();
    shape.extend_from_slice(&s[1..]);
    Ok(b.reshape(v, &shape)?)
}

pub(super) fn c64(b: &mut Builder, v: i64) -> Value {
    b.constant_i64(DType::I64, v)
}

pub(super) fn iota(b: &mut Builder, shape: &[i64], dim: i64) -> Result<Value> {
    Ok(b.iota(DType::I64, shape, dim)?)
}

/// `it <dir> k` with `k` a rank-0 i64 broadcast to `it`'s shape.
pub(super) fn cmp_k(b: &mut Builder, it: Value, k: Value, dir: CompareDir) -> Result<Value> {
    let s = b.shape(it).to_vec();
    let kb = b.broadcast_in_dim(k, &s, &[])?;
    Ok(b.compare(it, kb, dir)?)
}

/// `select(mask, x, 0)`.
pub(super) fn keep(b: &mut Builder, mask: Value, x: Value) -> Result<Value> {
    let z = b.splat_like(x, 0.0)?;
    Ok(b.select(mask, x, z)?)
}

/// Broadcasts `v` to `shape`, its dims landing on `dims`.
pub(super) fn bc(b: &mut Builder, v: Value, shape: &[i64], dims: &[i64]) -> Result<Value> {
    Ok(b.broadcast_in_dim(v, shape, dims)?)
}

/// Batched `x @ y` of `[B, m, k]` and `[B, k, n]`.
pub(super) fn mm(b: &mut Builder, x: Value, y: Value) -> Result<Value> {
    Ok(b.dot_general(x, y, &[0], &[0], &[2], &[1], None)?)
}

/// Batched `x^T @ y` of `[B, k, m]` and `[B, k, n]`.
pub(super) fn mm_tn(b: &mut Builder, x: Value, y: Value) -> Result<Value> {
    Ok(b.dot_general(x, y, &[0], &[0], &[1], &[1], None)?)
}

/// Batched `x @ y^T` of `[B, m, k]` and `[B, n, k]`.
pub(super) fn mm_nt(b: &mut Builder, x: Value, y: Value) -> Result<Value> {
    Ok(b.dot_general(x, y, &[0], &[0], &[2], &[2], None)?)
}

/// Swaps the last two dims of a rank-3 value.
pub(super) fn t3(b: &mut Builder, x: Value) -> Result<Value> {
    Ok(b.transpose(x, &[0, 2, 1])?)
}

/// `[B, m, n]` identity (ones where row == col).
pub(super) fn eye3(b: &mut Builder, dt: DType, bb: i64, m: i64, n: i64) -> Result<Value> {
    let s = [bb, m, n];
    let (r, c) = (iota(b, &s, 1)?, iota(b, &s, 2)?);
    let e = b.compare(r, c, CompareDir::Eq)?;
    Ok(b.convert(e, dt)?)
}

/// Keeps the upper triangle (row <= col) of a rank-3 value.
pub(super) fn triu3(b: &mut Builder, x: Value) -> Result<Value> {
    let s = b.shape(x).to_vec();
    let (r, c) = (iota(b, &s, 1)?, iota(b, &s, 2)?);
    let m = b.compare(r, c, CompareDir::Le)?;
    keep(b, m, x)
}

/// The diagonal `[B, min(m, n)]` of a rank-3 value.
pub(super) fn diag3(b: &mut Builder, x: Value) -> Result<Value> {
    let s = b.shape(x).to_vec();
    let k = s[1].min(s[2]);
    let x = b.slice(x, &[0, 0, 0], &[s[0], k, k], &[1, 1, 1])?;
    let s = [s[0], k, k];
    let (r, c) = (iota(b, &s, 1)?, iota(b, &s, 2)?);
    let m = b.compare(r, c, CompareDir::Eq)?;
    let d = keep(b, m, x)?;
    Ok(b.reduce_sum(d, &[2])?)
}

/// Multiplies column j of `x` `[B, m, n]` by `d[B, j]` (real `d` scales
/// complex `x` alike).
pub(super) fn scale_cols(b: &mut Builder, x: Value, d: Value) -> Result<Value> {
    let s = b.shape(x).to_vec();
    let d = like(b, d, x)?;
    let db = bc(b, d, &s, &[0, 2])?;
    Ok(b.mul(x, db)?)
}

/// `v` converted to `x`'s dtype when `x` is complex and `v` is not.
pub(super) fn like(b: &mut Builder, v: Value, x: Value) -> Result<Value> {
    let dt = b.dtype(x);
    if dt.is_complex() && !b.dtype(v).is_complex() {
        Ok(b.convert(v, dt)?)
    } else {
        Ok(v)
    }
}

/// The real part of a complex value (a real value as is).
pub(super) fn real(b: &mut Builder, x: Value) -> Result<Value> {
    if b.dtype(x).is_complex() {
        Ok(b.real(x)?)
    } else {
        Ok(x)
    }
}

/// |x|^2 elementwise, real.
pub(super) fn abs2(b: &mut Builder, x: Value) -> Result<Value> {
    let cx = conj(b, x)?;
    let p = b.mul(x, cx)?;
    real(b, p)
}

/// Batched `x^H @ y` of `[B, k, m]` and `[B, k, n]`.
pub(super) fn mm_hn(b: &mut Builder, x: Value, y: Value) -> Result<Value> {
    let cx = conj(b, x)?;
    mm_tn(b, cx, y)
}

/// Batched `x @ y^H` of `[B, m, k]` and `[B, n, k]`.
pub(super) fn mm_nh(b: &mut Builder, x: Value, y: Value) -> Result<Value> {
    let cy = conj(b, y)?;
    mm_nt(b, x, cy)
}

/// Machine epsilon of a float dtype.
pub(super) fn eps(dt: DType) -> f64 {
    if matches!(dt, DType::F64 | DType::C128) { f64::EPSILON } else { f32::EPSILON as f64 }
}

/// Sorts `keys [B, n]` along dim 1 (ascending, or descending) and returns the
/// sorted keys and the one-hot permutation `[B, n, n]` (dtype of keys) with
/// `perm[b, j, k] = 1` when sorted position k holds original index j, so that
/// `x @ perm` reorders the columns of `x` alike.
pub(super) fn sort_perm(b: &mut Builder, keys: Value, descending: bool) -> Result<(Value, Value)> {
    let s = b.shape(keys).to_vec();
    let dt = b.dtype(keys);
    let idx = iota(b, &s, 1)?;
    let out = b.sort(&[keys, idx], 1, true, |r, a| {
        let dir = if descending { CompareDir::Gt } else { CompareDir::Lt };
        r.compare(a[0], a[1], dir)
    })?;
    let (bb, n) = (s[0], s[1]);
    let rows = iota(b, &[bb, n, n], 1)?;
    let ib = bc(b, out[1], &[bb, n, n], &[0, 2])?;
    let p = b.compare(rows, ib, CompareDir::Eq)?;
    Ok((out[0], b.convert(p, dt)?))
}

/// A power of two near max|a| per matrix of `a [B, m, n]` (1 where that is
/// 0 or not finite), as `[B]`: dividing by it is exact and keeps squared
/// norms away from overflow/underflow, as LAPACK's scaling does.
pub(super) fn pow2_scale(b: &mut Builder, a: Value) -> Result<Value> {
    let dt = b.dtype(a).complex_part().unwrap_or(b.dtype(a));
    let ab = if b.dtype(a).is_complex() {
        // max(|re|, |im|): any power of two near the magnitude will do.
        let (re, im) = (b.real(a)?, b.imag(a)?);
        let (re, im) = (b.abs(re)?, b.abs(im)?);
        b.max(re, im)?
    } else {
        b.abs(a)?
    };
    let m = b.reduce_max(ab, &[1, 2])?;
    let fin = b.is_finite(m)?;
    let z = b.splat_like(m, 0.0)?;
    let pos = b.compare(m, z, CompareDir::Gt)?;
    let ok = b.and(fin, pos)?;
    let one = b.splat_like(m, 1.0)?;
    let m = b.select(ok, m, one)?;
    let l = b.log(m)?;
    let inv_ln2 = b.splat_like(m, std::f64::consts::LOG2_E)?;
    let l = b.mul(l, inv_ln2)?;
    let e = b.floor(l)?;
    let (it, bias, shift, lo, hi) = if dt == DType::F64 {
        (DType::I64, 1023, 52, -1022, 1023)
    } else {
        (DType::I32, 127, 23, -126, 127)
    };
    let e = b.convert(e, it)?;
    let s = b.shape(e).to_vec();
    let (lo, hi) = (b.splat_i64(it, lo, &s)?, b.splat_i64(it, hi, &s)?);
    let e = b.clamp(lo, e, hi)?;
    let bias = b.splat_i64(it, bias, &s)?;
    let e = b.add(e, bias)?;
    let shift = b.splat_i64(it, shift, &s)?;
    let bits = b.shift_left(e, shift)?;
    Ok(b.bitcast_convert(bits, dt)?)
}

/// `a [B, ..]` divided by the real `s [B]`.
pub(super) fn div_batch(b: &mut Builder, a: Value, s: Value) -> Result<Value> {
    let sb = batch_scale(b, a, s)?;
    Ok(b.div(a, sb)?)
}

/// `a [B, ..]` times the real `s [B]`.
pub(super) fn mul_batch(b: &mut Builder, a: Value, s: Value) -> Result<Value> {
    let sb = batch_scale(b, a, s)?;
    Ok(b.mul(a, sb)?)
}

/// `s [B]` broadcast to `a`'s shape and type (complex: imaginary part 0).
fn batch_scale(b: &mut Builder, a: Value, s: Value) -> Result<Value> {
    let sh = b.shape(a).to_vec();
    let dt = b.dtype(a);
    let s = if dt.is_complex() { b.convert(s, dt)? } else { s };
    bc(b, s, &sh, &[0])
}

