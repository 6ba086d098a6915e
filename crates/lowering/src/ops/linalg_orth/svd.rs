//! `_linalg_svd` (behind linalg.svd / svdvals / cond / matrix_rank / pinv /
//! norm('nuc'), torch.svd) by one-sided Jacobi on the tall orientation.
//! Singular values descending. U's columns for (numerically) zero singular
//! values, and the extra columns of full_matrices, come from a Householder
//! QR of the known columns, which completes them to an orthonormal basis.
//! Singular vectors are defined up to sign (a phase, for complex): they can
//! differ from LAPACK's. Singular values are real for complex inputs.
use stablehlo::{Builder, CompareDir, Value};

use super::householder::{geqrf3, orgqr3};
use super::{abs2, bc, div_batch, adjoint, like, mul_batch, pow2_scale, diag3, eps, eye3, from_batch, jacobi, mm, real, scale_cols, sort_perm, to3};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;

type R = Result<Vec<Value>>;

/// SVD of a tall `a [B, m, n]` (m >= n): (U `[B, m, m or n]`, S `[B, n]`,
/// V `[B, n, n]`), A = U[:, :n] diag(S) V^H.
pub(super) fn svd_tall(b: &mut Builder, a: Value, full: bool, compute_uv: bool) -> Result<(Value, Value, Value)> {
    let s = b.shape(a).to_vec();
    let (bb, m, n) = (s[0], s[1], s[2]);
    let dt = b.dtype(a);
    let real_dt = dt.complex_part().unwrap_or(dt);
    if n == 0 || bb == 0 {
        let cols = if full { m } else { n };
        let u = eye3(b, dt, bb, m, cols)?;
        let sig = b.splat(real_dt, 0.0, &[bb, n])?;
        let v = eye3(b, dt, bb, n, n)?;
        return Ok((u, sig, v));
    }
    let sc = pow2_scale(b, a)?;
    let a = div_batch(b, a, sc)?;
    let (av, v) = jacobi::svd_jacobi3(b, a)?;
    let a2 = abs2(b, av)?;
    let sig = b.reduce_sum(a2, &[1])?;
    let sig = b.sqrt(sig)?; // [B, n]
    let (sig, perm) = sort_perm(b, sig, true)?;
    let sig_out = mul_batch(b, sig, sc)?;
    if !compute_uv {
        return Ok((av, sig_out, v));
    }
    let perm = like(b, perm, av)?;
    let av = mm(b, av, perm)?;
    let v = mm(b, v, perm)?;
    // U columns: A v_i / s_i where s_i is not negligible, else completed.
    let smax = b.slice(sig, &[0, 0], &[bb, 1], &[1, 1])?;
    let smax = b.reshape(smax, &[bb])?;
    let thr = b.splat_like(smax, (m.max(n) as f64) * eps(dt))?;
    let thr = b.mul(smax, thr)?;
    let thr = bc(b, thr, &[bb, n], &[0])?;
    let good = b.compare(sig, thr, CompareDir::Gt)?;
    let one = b.splat_like(sig, 1.0)?;
    let safe = b.select(good, sig, one)?;
    let inv = b.div(one, safe)?;
    let zero = b.splat_like(sig, 0.0)?;
    let inv = b.select(good, inv, zero)?;
    let u = scale_cols(b, av, inv)?; // [B, m, n], zero columns where not good
    let cols = if full { m } else { n };
    let u = if cols > n {
        let z = b.constant_f64(dt, 0.0);
        b.pad(u, z, &[0, 0, 0], &[0, 0, cols - n], &[0, 0, 0])?
    } else {
        u
    };
    let (p, tau) = geqrf3(b, u)?;
    let q = orgqr3(b, p, tau)?; // [B, m, cols]
    // Q R = U with R's diagonal +-1 on the known columns: undo the signs.
    let rd = diag3(b, p)?; // [B, cols]; real (+-1) for complex too
    let rd = real(b, rd)?;
    let z = b.splat_like(rd, 0.0)?;
    let neg = b.compare(rd, z, CompareDir::Lt)?;
    let o = b.splat_like(rd, 1.0)?;
    let mo = b.neg(o)?;
    let sg = b.select(neg, mo, o)?;
    let q = scale_cols(b, q, sg)?;
    // Keep the exact A v_i / s_i columns where they are defined.
    let gp = if cols > n {
        let f = b.constant_i64(stablehlo::DType::Bool, 0);
        b.pad(good, f, &[0, 0], &[0, cols - n], &[0, 0])?
    } else {
        good
    };
    let us = [bb, m, cols];
    let gb = bc(b, gp, &us, &[0, 2])?;
    let u = b.select(gb, u, q)?;
    Ok((u, sig_out, v))
}

/// _linalg_svd(A, full_matrices=False, compute_uv=True, *, driver=None)
/// -> (U, S, Vh)
pub(super) fn linalg_svd(lx: &mut Lower, args: &Args) -> R {
    let a = args.tensor(0)?;
    if args.opt_str(3).is_some() {
        // As on the CPU: the driver picks a cuSOLVER routine, nothing else.
        crate::bail!(
            Runtime,
            "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER backend."
        );
    }
    super::check_matrix(lx, a, "A")?;
    super::check_no_nan(
        lx,
        a,
        "linalg.svd: The algorithm failed to converge because the input matrix contained non-finite values.",
    )?;
    let full = args.bool_or(1, false)?;
    let compute_uv = args.bool_or(2, true)?;
    let r = a.shape.len();
    let (m, n) = (a.shape[r - 2], a.shape[r - 1]);
    let (a3, batch) = to3(lx.b, a.value)?;
    let wide = m < n;
    let at = if wide { adjoint(lx.b, a3)? } else { a3 };
    let (u, s, v) = svd_tall(lx.b, at, full, compute_uv)?;
    let s = from_batch(lx.b, s, &batch)?;
    if !compute_uv {
        let e = lx.full(a.dtype, 0.0, &[0])?;
        return Ok(vec![e, s, e]);
    }
    // Tall: A = U S V^H.  Wide: A^H = U S V^H, so A = V S U^H.
    let (uu, vh) = if wide { (v, adjoint(lx.b, u)?) } else { (u, adjoint(lx.b, v)?) };
    Ok(vec![from_batch(lx.b, uu, &batch)?, s, from_batch(lx.b, vh, &batch)?])
}
