//! Cholesky family on `stablehlo.cholesky` / `stablehlo.triangular_solve`:
//! linalg_cholesky_ex (+ info), cholesky, triangular_solve,
//! linalg_solve_triangular, cholesky_solve and cholesky_inverse (float32/64).
use stablehlo::{CompareDir, DType, Value};

use crate::args::{Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
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
    if !matches!(t.dtype, DType::F32 | DType::F64) {
        bail!(Runtime, "{}: Low precision dtypes not supported. Got {:?} for {what} (tpu supports float32/float64)", lx.op, t.dtype);
    }
    Ok(())
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
fn chol(lx: &mut Lower, a: &TensorArg, upper: bool, check: bool) -> Result<(Value, Value)> {
    square(lx, a, "A")?;
    let r = a.shape.len();
    let n = a.shape[r - 1];
    let l = lx.b.cholesky(a.value, true)?;
    let l = tri(lx, l, true)?;
    // info: 1 + first diagonal index that is not > 0 (NaN included), else 0.
    let s = a.shape.clone();
    let row = lx.b.iota(DType::I64, &s, r as i64 - 2)?;
    let col = lx.b.iota(DType::I64, &s, r as i64 - 1)?;
    let on_diag = lx.b.compare(row, col, CompareDir::Eq)?;
    let zero = lx.full_like(l, 0.0)?;
    let dvals = lx.b.select(on_diag, l, zero)?;
    let diag = lx.b.reduce_sum(dvals, &[r as i64 - 1])?; // [.., n]
    let dz = lx.full_like(diag, 0.0)?;
    let good = lx.b.compare(diag, dz, CompareDir::Gt)?;
    let ds = lx.shape(diag);
    let idx = lx.b.iota(DType::I64, &ds, r as i64 - 2)?;
    let one = lx.full(DType::I64, 1.0, &ds)?;
    let idx1 = lx.b.add(idx, one)?;
    let big = lx.full(DType::I64, (n + 1) as f64, &ds)?;
    let cand = lx.b.select(good, big, idx1)?;
    let first = lx.b.reduce_min(cand, &[r as i64 - 2])?;
    let bs = lx.shape(first);
    let bigb = lx.full(DType::I64, (n + 1) as f64, &bs)?;
    let ok = lx.b.compare(first, bigb, CompareDir::Ge)?; // also the empty-matrix identity
    let zb = lx.full(DType::I64, 0.0, &bs)?;
    let info = lx.b.select(ok, zb, first)?;
    let info = lx.cast(info, DType::I32)?;
    if check {
        let rank = bs.len() as i64;
        let dims: Vec<i64> = (0..rank).collect();
        let z32 = lx.full(DType::I32, 0.0, &bs)?;
        let bad = lx.b.compare(info, z32, CompareDir::Ne)?;
        let any = if rank > 0 { lx.b.reduce_or(bad, &dims)? } else { bad };
        lx.check_linalg(any, format!("{}: The factorization could not be completed because the input is not positive-definite.", lx.op));
    }
    let out = if upper {
        let perm: Vec<i64> = (0..r as i64 - 2).chain([r as i64 - 1, r as i64 - 2]).collect();
        lx.b.transpose(l, &perm)?
    } else {
        l
    };
    Ok((out, info))
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
    let x = lx.b.triangular_solve(av, bv, true, !upper, unit, trans)?;
    Ok(vec![x, av])
}

/// linalg_solve_triangular(self=A, B, *, upper, left=True, unitriangular=False)
fn linalg_solve_triangular(lx: &mut Lower, args: &Args) -> R {
    let (a, b) = (args.tensor(0)?, args.tensor(1)?);
    square(lx, a, "A")?;
    let (upper, left, unit) = (args.bool_or(2, false)?, args.bool_or(3, true)?, args.bool_or(4, false)?);
    let (av, bv) = bcast_batch(lx, a, b)?;
    Ok(vec![lx.b.triangular_solve(av, bv, left, !upper, unit, false)?])
}

/// cholesky_solve(self=B, L, upper=False): A^-1 B with A = L L^T (or U^T U).
fn cholesky_solve(lx: &mut Lower, args: &Args) -> R {
    let (b, l) = (args.tensor(0)?, args.tensor(1)?);
    square(lx, l, "A")?;
    let upper = args.bool_or(2, false)?;
    let (lv, bv) = bcast_batch(lx, l, b)?;
    // lower: L Y = B, L^T X = Y.  upper: U^T Y = B, U X = Y.
    let y = lx.b.triangular_solve(lv, bv, true, !upper, false, upper)?;
    Ok(vec![lx.b.triangular_solve(lv, y, true, !upper, false, !upper)?])
}

/// cholesky_inverse(self=L, upper=False): (L L^T)^-1 or (U^T U)^-1.
fn cholesky_inverse(lx: &mut Lower, args: &Args) -> R {
    let l = args.tensor(0)?;
    square(lx, l, "A")?;
    let upper = args.bool_or(1, false)?;
    let r = l.shape.len() as i64;
    let rows = lx.b.iota(DType::I64, &l.shape, r - 2)?;
    let cols = lx.b.iota(DType::I64, &l.shape, r - 1)?;
    let eye = lx.b.compare(rows, cols, CompareDir::Eq)?;
    let eye = lx.cast(eye, l.dtype)?;
    let inv = lx.b.triangular_solve(l.value, eye, true, !upper, false, false)?;
    let batch: Vec<i64> = (0..r - 2).collect();
    // lower: Linv^T Linv (contract rows); upper: Uinv Uinv^T (contract cols).
    let c = if upper { r - 1 } else { r - 2 };
    Ok(vec![lx.b.dot_general(inv, inv, &batch, &batch, &[c], &[c], None)?])
}
