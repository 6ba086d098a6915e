//! Symmetric eigendecomposition by cyclic Jacobi: `_linalg_eigh` (behind
//! linalg.eigh / eigvalsh, matrix_rank(hermitian), pinv(hermitian)) and
//! `linalg_matrix_sqrth` (V sqrt(max(w, 0)) V^H). Eigenvalues ascending
//! (real, also for Hermitian complex inputs); eigenvectors are only defined
//! up to sign (a phase, for complex), so they can differ from LAPACK's.
use stablehlo::{Builder, CompareDir, Value};

use super::{conj, div_batch, like, mul_batch, pow2_scale, diag3, from_batch, iota, jacobi, mm, mm_nh, real, scale_cols, sort_perm, to3};
use crate::args::{Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

type R = Result<Vec<Value>>;

fn square(lx: &Lower, a: &TensorArg) -> Result<()> {
    super::check_matrix(lx, a, "A")?;
    let r = a.shape.len();
    if a.shape[r - 1] != a.shape[r - 2] {
        bail!(Runtime, "{}: A must be batches of square matrices, but they are {} by {} matrices", lx.op, a.shape[r - 2], a.shape[r - 1]);
    }
    Ok(())
}

/// The symmetric (Hermitian) matrix read from the lower (or upper) triangle of `a`.
fn symmetrize(b: &mut Builder, a: Value, lower: bool) -> Result<Value> {
    let s = b.shape(a).to_vec();
    let rows = iota(b, &s, 1)?;
    let cols = iota(b, &s, 2)?;
    let dir = if lower { CompareDir::Ge } else { CompareDir::Le };
    let own = b.compare(rows, cols, dir)?;
    let at = b.transpose(a, &[0, 2, 1])?;
    let at = conj(b, at)?;
    let s = b.select(own, a, at)?;
    crate::ops::complex::real_diagonal(b, s)
}

/// (eigenvalues ascending `[B, n]`, eigenvectors `[B, n, n]`) of `[B, n, n]`.
pub(super) fn eigh_sorted(b: &mut Builder, a: Value, lower: bool) -> Result<(Value, Value)> {
    let s = symmetrize(b, a, lower)?;
    if b.shape(s)[0] == 0 || b.shape(s)[1] == 0 {
        let (d, v) = jacobi::eigh3(b, s)?;
        let w = diag3(b, d)?;
        return Ok((real(b, w)?, v));
    }
    let sc = pow2_scale(b, s)?;
    let s = div_batch(b, s, sc)?;
    let (d, v) = jacobi::eigh3(b, s)?;
    let w = diag3(b, d)?;
    let w = real(b, w)?;
    let w = mul_batch(b, w, sc)?;
    let (w, perm) = sort_perm(b, w, false)?;
    let perm = like(b, perm, v)?;
    Ok((w, mm(b, v, perm)?))
}

/// _linalg_eigh(A, UPLO="L", compute_v=True) -> (eigenvalues, eigenvectors)
pub(super) fn linalg_eigh(lx: &mut Lower, args: &Args) -> R {
    let a = args.tensor(0)?;
    square(lx, a)?;
    let uplo = args.opt_str(1).unwrap_or("L").to_string();
    if !matches!(uplo.as_str(), "L" | "l" | "U" | "u") {
        bail!(Runtime, "{}: Expected UPLO argument to be 'L' or 'U', but got {uplo}", lx.op);
    }
    let compute_v = args.bool_or(2, true)?;
    let (a3, batch) = to3(lx.b, a.value)?;
    let (w, v) = eigh_sorted(lx.b, a3, uplo.eq_ignore_ascii_case("L"))?;
    let w = from_batch(lx.b, w, &batch)?;
    let v = if compute_v { from_batch(lx.b, v, &batch)? } else { lx.full(a.dtype, 0.0, &[0])? };
    Ok(vec![w, v])
}

/// linalg_matrix_sqrth(self): the symmetric PSD square root V sqrt(w) V^T
/// (negative eigenvalues clamped to 0, as on the CPU).
pub(super) fn linalg_matrix_sqrth(lx: &mut Lower, args: &Args) -> R {
    let a = args.tensor(0)?;
    square(lx, a)?;
    let (a3, batch) = to3(lx.b, a.value)?;
    let (w, v) = eigh_sorted(lx.b, a3, true)?;
    let z = lx.full_like(w, 0.0)?;
    let w = lx.b.max(w, z)?;
    let r = lx.b.sqrt(w)?;
    let vr = scale_cols(lx.b, v, r)?;
    let out = mm_nh(lx.b, vr, v)?;
    Ok(vec![from_batch(lx.b, out, &batch)?])
}
