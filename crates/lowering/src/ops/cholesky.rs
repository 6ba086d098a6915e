//! Cholesky family on `stablehlo.cholesky` / `stablehlo.triangular_solve`:
//! linalg_cholesky_ex (+ info), cholesky, triangular_solve,
//! linalg_solve_triangular, cholesky_solve and cholesky_inverse (float32/64,
//! complex64/128: A = L L^H).
use stablehlo::{CompareDir, DType, Transpose, Value};

use crate::args::{Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::complex;
use crate::op;
use crate::table::OpEntry;

type R = Result<Vec<Value>>;

pub const OPS: &[OpEntry] = &[
    op!("linalg_cholesky_ex", linalg_cholesky_ex),
    op!("linalg_cholesky", linalg_cholesky),
    op!("cholesky", cholesky),
    op!("triangular_solve", triangular_solve),
    op!("linalg_solve_triangular", linalg_solve_triangular),
    op!("cholesky_solve", cholesky_solve),
    op!("_cholesky_solve_helper", cholesky_solve),
    op!("cholesky_inverse", cholesky_inverse),
];

fn square(lx: &Lower, t: &TensorArg, what: &str) -> Result<()> {
    let r = t.shape.len();
    if r < 2 || t.shape[r - 1] != t.shape[r - 2] {
        bail!(Runtime, "{}: {what} must be batches of square matrices, but they are {} by {} matrices",
            lx.op, t.shape.get(r.wrapping_sub(2)).copied().unwrap_or(0), t.shape.last().copied().unwrap_or(0));
    }
    super::lapack_dtypes::check(lx.op, t.dtype)
}

/// Keeps the lower (or upper) triangle of `x`, zeroing the rest.
fn tri(lx: &mut Lower, x: Value, lower: bool) -> Result<Value> {
    let s = lx.shape(x);
    let r = s.len() as i64;
    let row = lx.b.iota(DType::I64, &s, r - 2)?;
    let col = lx.b.iota(DType::I64, &s, r - 1)?;
    let keep = lx.b.compare(row, col, if lower { CompareDir::Ge } else { CompareDir::Le })?;
    let z = lx.full_like(x, 0.0)?;
    Ok(lx.b.select(keep, x, z)?)
}

/// Returns (factor, info i32[batch]).
///
/// Like LAPACK's potrf, `upper` reads A's upper triangle (here: the lower
/// one of A^H, factored as L and returned as U = L^H), and a complex
/// diagonal counts by its real part. XLA's `stablehlo.cholesky` is fast
/// but fills a matrix it cannot factor with NaN, where potrf stops at the
/// first non-positive pivot, reports it in info (1-based) and leaves the
/// factorization up to there: a failed matrix is factored again by `potf2`
/// (a loop that runs only when some matrix failed), whose result replaces
/// XLA's for it.
fn chol(lx: &mut Lower, a: &TensorArg, upper: bool, check: bool) -> Result<(Value, Value)> {
    square(lx, a, "A")?;
    let r = a.shape.len();
    let n = a.shape[r - 1];
    let batch = a.shape[..r - 2].to_vec();
    let bt: i64 = batch.iter().product();
    let src = if upper { complex::adjoint(lx.b, a.value)? } else { a.value };
    let src = complex::real_diagonal(lx.b, src)?;
    let a3 = lx.b.reshape(src, &[bt, n, n])?;
    let fast = lx.b.cholesky(a3, true)?;
    // XLA failed on a matrix if its factor has a NaN or a diagonal entry that
    // is not > 0 (a 1x1 zero gives sqrt(0) = 0).
    let nan = lx.b.compare(fast, fast, CompareDir::Ne)?;
    let failed = lx.b.reduce_or(nan, &[1, 2])?; // [bt]
    let diag = diagonal(lx, fast)?;
    let zd = lx.full_like(diag, 0.0)?;
    let pos = lx.b.compare(diag, zd, CompareDir::Gt)?;
    let not_pos = lx.b.not(pos)?;
    let not_pos = lx.b.reduce_or(not_pos, &[1])?;
    let failed = lx.b.or(failed, not_pos)?;
    let any_failed = if bt > 0 { lx.b.reduce_or(failed, &[0])? } else { lx.b.constant_i64(DType::Bool, 0) };
    let (slow, info) = potf2(lx, a3, any_failed)?;
    let zi = lx.full(DType::I32, 0.0, &[bt])?;
    let use_slow = lx.b.compare(info, zi, CompareDir::Ne)?;
    let use_slow = lx.b.broadcast_in_dim(use_slow, &[bt, n, n], &[0])?;
    let l = lx.b.select(use_slow, slow, fast)?;
    let l = tri(lx, l, true)?;
    let l = lx.b.reshape(l, &a.shape)?;
    let info = lx.b.reshape(info, &batch)?;
    if check {
        let bs = lx.shape(info);
        let rank = bs.len() as i64;
        let dims: Vec<i64> = (0..rank).collect();
        let z32 = lx.full(DType::I32, 0.0, &bs)?;
        let bad = lx.b.compare(info, z32, CompareDir::Ne)?;
        let any = if rank > 0 { lx.b.reduce_or(bad, &dims)? } else { bad };
        lx.check_linalg(any, format!("{}: The factorization could not be completed because the input is not positive-definite.", lx.op));
    }
    let out = if upper { complex::adjoint(lx.b, l)? } else { l };
    Ok((out, info))
}

/// The real part of the diagonal `[B, n]` of `x` `[B, n, n]`.
fn diagonal(lx: &mut Lower, x: Value) -> Result<Value> {
    let d = crate::ops::linalg_lu::diagonal(lx, x)?;
    Ok(if lx.dtype(d).is_complex() { lx.b.real(d)? } else { d })
}

/// LAPACK's unblocked, left-looking Cholesky (potf2, lower) of `a`
/// `[B, n, n]`, one column per iteration, while `run`: column j becomes
/// A[:, j] - L[:, :j] L[j, :j]^H; its pivot d (real part) > 0 makes
/// L[j, j] = sqrt(d) and divides the entries below by it. Otherwise info =
/// j + 1, A[j, j] = d, and everything below and to the right keeps A's
/// values, as LAPACK leaves them. Returns (A factored in place, info).
fn potf2(lx: &mut Lower, a: Value, run: Value) -> Result<(Value, Value)> {
    let s = lx.shape(a);
    let (bt, n) = (s[0], s[1]);
    let info0 = lx.full(DType::I32, 0.0, &[bt])?;
    if bt * n == 0 {
        return Ok((a, info0));
    }
    let j0 = lx.b.constant_i64(DType::I64, 0);
    let op = lx.op.to_string();
    let out = lx.b.while_loop::<crate::error::LowerError>(
        &[j0, a, info0, run],
        |b, c| {
            let nn = b.constant_i64(DType::I64, n);
            let more = b.compare(c[0], nn, CompareDir::Lt)?;
            Ok(b.and(more, c[3])?)
        },
        |b, c| {
            let l = &mut Lower::new(b, &op);
            let (j, a, info) = (c[0], c[1], c[2]);
            let dt = l.dtype(a);
            let z = l.b.constant_i64(DType::I64, 0);
            let col = l.b.dynamic_slice(a, &[z, z, j], &[bt, n, 1])?;
            let col = l.b.reshape(col, &[bt, n])?;
            let row = l.b.dynamic_slice(a, &[z, j, z], &[bt, 1, n])?;
            let row = l.b.reshape(row, &[bt, n])?;
            let rid = l.b.iota(DType::I64, &[bt, n], 1)?;
            let jn = l.b.broadcast_in_dim(j, &[bt, n], &[])?;
            let before = l.b.compare(rid, jn, CompareDir::Lt)?;
            let zc = l.full_like(col, 0.0)?;
            let lrow = l.b.select(before, row, zc)?; // L[j, :j]
            let c3 = l.b.iota(DType::I64, &[bt, n, n], 2)?;
            let j3 = l.b.broadcast_in_dim(j, &[bt, n, n], &[])?;
            let left = l.b.compare(c3, j3, CompareDir::Lt)?;
            let z3 = l.full_like(a, 0.0)?;
            let lcols = l.b.select(left, a, z3)?; // L[:, :j]
            let clrow = complex::conj(l.b, lrow)?;
            let upd = l.b.dot_general(lcols, clrow, &[0], &[0], &[2], &[1], None)?; // [bt, n]
            let newcol = l.b.sub(col, upd)?;
            let at_j = l.b.compare(rid, jn, CompareDir::Eq)?;
            let dv = l.b.select(at_j, newcol, zc)?;
            let d = l.b.reduce_sum(dv, &[1])?; // [bt]
            let d = if dt.is_complex() { l.b.real(d)? } else { d };
            let zd = l.full_like(d, 0.0)?;
            let ok = l.b.compare(d, zd, CompareDir::Gt)?;
            let zi = l.full(DType::I32, 0.0, &[bt])?;
            let active = l.b.compare(info, zi, CompareDir::Eq)?;
            let proceed = l.b.and(active, ok)?;
            let not_ok = l.b.not(ok)?;
            let fail = l.b.and(active, not_ok)?;
            let one = l.b.constant_i64(DType::I64, 1);
            let j1 = l.b.add(j, one)?;
            let j1i = l.b.convert(j1, DType::I32)?;
            let j1b = l.b.broadcast_in_dim(j1i, &[bt], &[])?;
            let info = l.b.select(fail, j1b, info)?;
            // Column j: sqrt(d) on the diagonal and the rest below divided by
            // it; on failure only the diagonal takes d.
            let ones = l.full_like(d, 1.0)?;
            let safe = l.b.select(ok, d, ones)?;
            let ljj = l.b.sqrt(safe)?;
            let ljj = l.cast(ljj, dt)?;
            let ljjn = l.b.broadcast_in_dim(ljj, &[bt, n], &[0])?;
            let below = l.b.compare(rid, jn, CompareDir::Gt)?;
            let scaled = l.b.div(newcol, ljjn)?;
            let good = l.b.select(below, scaled, col)?;
            let good = l.b.select(at_j, ljjn, good)?;
            let dc = l.cast(d, dt)?;
            let dn = l.b.broadcast_in_dim(dc, &[bt, n], &[0])?;
            let bad = l.b.select(at_j, dn, col)?;
            let pn = l.b.broadcast_in_dim(proceed, &[bt, n], &[0])?;
            let fnn = l.b.broadcast_in_dim(fail, &[bt, n], &[0])?;
            let newcol = l.b.select(pn, good, col)?;
            let newcol = l.b.select(fnn, bad, newcol)?;
            let upd_col = l.b.reshape(newcol, &[bt, n, 1])?;
            let a = l.b.dynamic_update_slice(a, upd_col, &[z, z, j])?;
            Ok(vec![j1, a, info, c[3]])
        },
    )?;
    Ok((out[1], out[2]))
}

/// (self, *, upper=False, check_errors=False) -> (L, info)
fn linalg_cholesky_ex(lx: &mut Lower, args: &Args) -> R {
    let a = args.tensor(0)?;
    let (l, info) = chol(lx, a, args.bool_or(1, false)?, args.bool_or(2, false)?)?;
    Ok(vec![l, info])
}

/// linalg_cholesky(self, *, upper=False)
fn linalg_cholesky(lx: &mut Lower, args: &Args) -> R {
    let (l, _) = chol(lx, args.tensor(0)?, args.bool_or(1, false)?, true)?;
    Ok(vec![l])
}

/// cholesky(self, upper=False)
fn cholesky(lx: &mut Lower, args: &Args) -> R {
    let (l, _) = chol(lx, args.tensor(0)?, args.bool_or(1, false)?, true)?;
    Ok(vec![l])
}

/// Broadcasts the batch dims of `a` [.., n, n] and `b` [.., m, k].
fn bcast_batch(lx: &mut Lower, a: &TensorArg, b: &TensorArg) -> Result<(Value, Value)> {
    if a.dtype != b.dtype {
        bail!(Runtime, "{}: Expected b and A to have the same dtype, but found b of type {:?} and A of type {:?} instead.", lx.op, b.dtype, a.dtype);
    }
    if b.shape.len() < 2 {
        bail!(Runtime, "{}: b must have at least 2 dimensions, got {:?}", lx.op, b.shape);
    }
    let (ra, rb) = (a.shape.len(), b.shape.len());
    let batch = lx.b.broadcast_shapes(&a.shape[..ra - 2], &b.shape[..rb - 2])?;
    let mut sa = batch.clone();
    sa.extend_from_slice(&a.shape[ra - 2..]);
    let mut sb = batch;
    sb.extend_from_slice(&b.shape[rb - 2..]);
    Ok((lx.expand(a.value, &sa)?, lx.expand(b.value, &sb)?))
}

/// triangular_solve(self=b, A, upper=True, transpose=False, unitriangular=False) -> (X, A)
fn triangular_solve(lx: &mut Lower, args: &Args) -> R {
    let (b, a) = (args.tensor(0)?, args.tensor(1)?);
    square(lx, a, "A")?;
    let (upper, trans, unit) = (args.bool_or(2, true)?, args.bool_or(3, false)?, args.bool_or(4, false)?);
    let (av, bv) = bcast_batch(lx, a, b)?;
    let op = if trans { Transpose::Transpose } else { Transpose::No };
    let x = lx.b.triangular_solve(av, bv, true, !upper, unit, op)?;
    Ok(vec![x, av])
}

/// linalg_solve_triangular(self=A, B, *, upper, left=True, unitriangular=False)
fn linalg_solve_triangular(lx: &mut Lower, args: &Args) -> R {
    let (a, b) = (args.tensor(0)?, args.tensor(1)?);
    square(lx, a, "A")?;
    let (upper, left, unit) = (args.bool_or(2, false)?, args.bool_or(3, true)?, args.bool_or(4, false)?);
    if b.shape.len() < 2 {
        crate::bail!(Runtime, "linalg.solve_triangular: The input tensor B must have at least 2 dimensions.");
    }
    let n = a.shape[a.shape.len() - 1];
    let (br, bc) = (b.shape[b.shape.len() - 2], b.shape[b.shape.len() - 1]);
    if (if left { br } else { bc }) != n {
        crate::bail!(
            Runtime,
            "linalg.solve_triangular: Incompatible shapes of A and B for the equation {} ({n}x{n} and {})",
            if left { "AX = B" } else { "XA = B" },
            b.shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x")
        );
    }
    let (av, bv) = bcast_batch(lx, a, b)?;
    Ok(vec![lx.b.triangular_solve(av, bv, left, !upper, unit, Transpose::No)?])
}

/// cholesky_solve(self=B, L, upper=False): A^-1 B with A = L L^H (or U^H U).
fn cholesky_solve(lx: &mut Lower, args: &Args) -> R {
    let (b, l) = (args.tensor(0)?, args.tensor(1)?);
    square(lx, l, "A")?;
    let upper = args.bool_or(2, false)?;
    let (lv, bv) = bcast_batch(lx, l, b)?;
    // lower: L Y = B, L^H X = Y.  upper: U^H Y = B, U X = Y.
    let (first, second) = if upper { (Transpose::Adjoint, Transpose::No) } else { (Transpose::No, Transpose::Adjoint) };
    let y = lx.b.triangular_solve(lv, bv, true, !upper, false, first)?;
    Ok(vec![lx.b.triangular_solve(lv, y, true, !upper, false, second)?])
}

/// cholesky_inverse(self=L, upper=False): (L L^H)^-1 or (U^H U)^-1.
fn cholesky_inverse(lx: &mut Lower, args: &Args) -> R {
    let l = args.tensor(0)?;
    square(lx, l, "A")?;
    let upper = args.bool_or(1, false)?;
    let r = l.shape.len() as i64;
    let rows = lx.b.iota(DType::I64, &l.shape, r - 2)?;
    let cols = lx.b.iota(DType::I64, &l.shape, r - 1)?;
    let eye = lx.b.compare(rows, cols, CompareDir::Eq)?;
    let eye = lx.cast(eye, l.dtype)?;
    let inv = lx.b.triangular_solve(l.value, eye, true, !upper, false, Transpose::No)?;
    let batch: Vec<i64> = (0..r - 2).collect();
    // lower: Linv^H Linv (contract rows); upper: Uinv Uinv^H (contract cols).
    let c = if upper { r - 1 } else { r - 2 };
    let conj = complex::conj(lx.b, inv)?;
    let (lhs, rhs) = if upper { (inv, conj) } else { (conj, inv) };
    Ok(vec![lx.b.dot_general(lhs, rhs, &batch, &batch, &[c], &[c], None)?])
}
