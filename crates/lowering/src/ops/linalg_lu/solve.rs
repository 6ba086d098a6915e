//! Solving with an LU factorization (LAPACK getrs): row permutation plus two
//! `stablehlo.triangular_solve`s. Lowers linalg_lu_solve (left/right,
//! adjoint), _linalg_solve_ex and linalg_inv_ex. Like ATen 2.15 on the CPU,
//! solve/inv factor A itself (not A^T, unlike det/slogdet): the LU and pivots
//! _linalg_solve_ex returns are used by linalg_solve's backward formula.
use stablehlo::{CompareDir, DType, Transpose, Value};

use super::getrf::{factor, perm_from_pivots};
use super::{any, bc, broadcast_batch, check_float, check_square, eye, flat3, unflat, unpack_lu};
use crate::ops::complex;
use crate::args::{Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

type R = Result<Vec<Value>>;

/// Y[b, i, c] = x[b, j, c] for the j with sel[b, i, j] (one per i).
fn gather_rows(lx: &mut Lower, x: Value, sel: Value) -> Result<Value> {
    let s = lx.shape(x);
    let (bt, n, r) = (s[0], s[1], s[2]);
    let sh = [bt, n, n, r];
    let sel4 = bc(lx, sel, &sh, &[0, 1, 2])?;
    let x4 = bc(lx, x, &sh, &[0, 2, 3])?;
    let z = lx.full(lx.dtype(x), 0.0, &sh)?;
    let picked = lx.b.select(sel4, x4, z)?;
    Ok(lx.b.reduce_sum(picked, &[2])?)
}

/// sel[b, i, j] = perm[b, i] == j (`inverse`: perm[b, j] == i).
fn perm_sel(lx: &mut Lower, perm: Value, inverse: bool) -> Result<Value> {
    let s = lx.shape(perm);
    let sh = [s[0], s[1], s[1]];
    let (pd, id) = if inverse { (2, 1) } else { (1, 2) };
    let p = bc(lx, perm, &sh, &[0, pd])?;
    let i = lx.b.iota(DType::I32, &sh, id)?;
    Ok(lx.b.compare(p, i, CompareDir::Eq)?)
}

/// Solves A X = B (`adjoint`: A^H X = B) with A = P L U packed in `lu` `[B, n, n]`,
/// `perm` `[B, n]` i32 its row permutation, `b` `[B, n, r]`.
pub(super) fn solve_left(lx: &mut Lower, lu: Value, perm: Value, b: Value, adjoint: bool) -> Result<Value> {
    let s = lx.shape(b);
    if s.iter().product::<i64>() == 0 {
        return Ok(b);
    }
    let (l, u) = unpack_lu(lx, lu)?;
    if !adjoint {
        let sel = perm_sel(lx, perm, false)?;
        let y = gather_rows(lx, b, sel)?;
        let z = lx.b.triangular_solve(l, y, true, true, true, Transpose::No)?;
        Ok(lx.b.triangular_solve(u, z, true, false, false, Transpose::No)?)
    } else {
        let z = lx.b.triangular_solve(u, b, true, false, false, Transpose::Adjoint)?;
        let w = lx.b.triangular_solve(l, z, true, true, true, Transpose::Adjoint)?;
        let sel = perm_sel(lx, perm, true)?;
        gather_rows(lx, w, sel)
    }
}

/// Left or right solve; `b` `[B, n, r]` (left) or `[B, r, n]` (right).
pub(super) fn solve_any(lx: &mut Lower, lu: Value, perm: Value, b: Value, left: bool, adjoint: bool) -> Result<Value> {
    if left {
        return solve_left(lx, lu, perm, b, adjoint);
    }
    // X A = B  <=>  A^H X^H = B^H;  X A^H = B  <=>  A X^H = B^H.
    let bh = complex::adjoint(lx.b, b)?;
    let x = solve_left(lx, lu, perm, bh, !adjoint)?;
    complex::adjoint(lx.b, x)
}

/// Broadcasts LU `[.., n, n]`, pivots `[.., n]` and B `[.., p, q]` to one batch
/// shape and flattens them; returns (lu3, piv2, b3, batch).
fn broadcast3(lx: &mut Lower, lu: Value, piv: Value, b: Value) -> Result<(Value, Value, Value, Vec<i64>)> {
    let (ls, bs) = (lx.shape(lu), lx.shape(b));
    let (rl, rb) = (ls.len(), bs.len());
    let batch = broadcast_batch(lx, &ls[..rl - 2], &bs[..rb - 2])?;
    let with = |tail: &[i64]| -> Vec<i64> { batch.iter().chain(tail).copied().collect() };
    let lu = lx.expand(lu, &with(&ls[rl - 2..]))?;
    let piv = lx.expand(piv, &with(&ls[rl - 1..]))?;
    let b = lx.expand(b, &with(&bs[rb - 2..]))?;
    let (lu3, _) = flat3(lx, lu)?;
    let bt: i64 = batch.iter().product();
    let piv2 = lx.b.reshape(piv, &[bt, ls[rl - 1]])?;
    let (b3, _) = flat3(lx, b)?;
    Ok((lu3, piv2, b3, batch))
}

fn same_dtype(lx: &Lower, a: &TensorArg, b: &TensorArg, api: &str) -> Result<()> {
    if a.dtype != b.dtype {
        bail!(Runtime, "{api}: Expected A and B to have the same dtype, but found A of type {:?} and B of type {:?} instead ({})", a.dtype, b.dtype, lx.op);
    }
    Ok(())
}

/// LAPACK's 1-based pivots must lie in [1, n]: others would index outside
/// the matrix. Deferred checks (the pivots are device data), raising the
/// CPU's RuntimeErrors in its order.
fn check_pivots(lx: &mut Lower, piv: Value, dtype: DType, n: i64) -> Result<()> {
    let shape = lx.shape(piv);
    let one = lx.b.splat_i64(dtype, 1, &shape)?;
    let below = lx.b.compare(piv, one, CompareDir::Lt)?;
    let below = any(lx, below)?;
    lx.check_runtime(below, format!(
        "{}: Pivots given to lu_solve must all be greater or equal to 1. Did you properly pass the result of lu_factor?",
        lx.op
    ));
    let size = lx.b.splat_i64(dtype, n, &shape)?;
    let above = lx.b.compare(piv, size, CompareDir::Gt)?;
    let above = any(lx, above)?;
    lx.check_runtime(above, format!(
        "{}: Pivots given to lu_solve must all be smaller or equal to LU.size(-2). Did you properly pass the result of lu_factor?",
        lx.op
    ));
    Ok(())
}

/// linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False)
pub(super) fn linalg_lu_solve(lx: &mut Lower, args: &Args) -> R {
    let (lu, piv, b) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    let (left, adjoint) = (args.bool_or(3, true)?, args.bool_or(4, false)?);
    const API: &str = "linalg.lu_solve";
    check_square(lx, lu, API)?;
    check_float(lx, lu, API)?;
    if b.shape.len() < 2 {
        bail!(Runtime, "{API}: The input tensor B must have at least 2 dimensions. ({})", lx.op);
    }
    same_dtype(lx, lu, b, API)?;
    let n = *lu.shape.last().unwrap();
    let rb = b.shape.len();
    let bn = if left { b.shape[rb - 2] } else { b.shape[rb - 1] };
    if bn != n {
        bail!(Runtime, "{API}: Incompatible shapes of A and B for the equation {} ({n}x{n} and {}x{}) ({})",
            if left { "AX = B" } else { "XA = B" }, b.shape[rb - 2], b.shape[rb - 1], lx.op);
    }
    if !piv.dtype.is_integer() || piv.shape.len() + 1 != lu.shape.len() || piv.shape[..] != lu.shape[..lu.shape.len() - 1] {
        bail!(Runtime, "{API}: Expected LU.shape[:-1] == pivots.shape and pivots of dtype int32. Got LU {:?}, pivots {:?} {:?} ({})",
            lu.shape, piv.shape, piv.dtype, lx.op);
    }
    check_pivots(lx, piv.value, piv.dtype, n)?;
    let (lu3, piv2, b3, batch) = broadcast3(lx, lu.value, piv.value, b.value)?;
    let perm = perm_from_pivots(lx, piv2, n)?;
    let x = solve_any(lx, lu3, perm, b3, left, adjoint)?;
    Ok(vec![unflat(lx, x, &batch)?])
}

/// Factors A: returns flattened (LU `[B, n, n]`, pivots `[B, n]`, perm,
/// info `[B]`) and A's batch shape.
fn factor_a(lx: &mut Lower, a: &TensorArg) -> Result<(super::getrf::Lu, Vec<i64>)> {
    let (a3, batch) = flat3(lx, a.value)?;
    Ok((factor(lx, a3)?, batch))
}

/// _linalg_solve_ex(A, B, *, left=True, check_errors=False) -> (result, LU, pivots, info)
pub(super) fn linalg_solve_ex(lx: &mut Lower, args: &Args) -> R {
    let (a, b) = (args.tensor(0)?, args.tensor(1)?);
    let (left, check) = (args.bool_or(2, true)?, args.bool_or(3, false)?);
    const API: &str = "linalg.solve";
    check_square(lx, a, API)?;
    check_float(lx, a, API)?;
    same_dtype(lx, a, b, API)?;
    let ra = a.shape.len();
    let n = a.shape[ra - 1];
    let vector = b.shape.len() == 1 || (b.shape.len() + 1 == ra && b.shape[..] == a.shape[..ra - 1]);
    if !left && vector {
        bail!(Runtime, "{API}: Vector broadcasting of the left hand side is not supported for left=False. In this case linalg.solve is equivalent to B / A.squeeze(-1) ({})", lx.op);
    }
    let bv = if vector {
        let mut s = b.shape.clone();
        s.push(1);
        lx.b.reshape(b.value, &s)?
    } else {
        b.value
    };
    let bs = lx.shape(bv);
    let rb = bs.len();
    let bn = if left { bs[rb - 2] } else { bs[rb - 1] };
    if bn != n {
        bail!(Runtime, "{API}: Incompatible shapes of A and B for the equation {} ({n}x{n} and {}x{}) ({})",
            if left { "AX = B" } else { "XA = B" }, bs[rb - 2], bs[rb - 1], lx.op);
    }
    let (f, abatch) = factor_a(lx, a)?;
    if check {
        let zi = lx.full(DType::I32, 0.0, &lx.shape(f.info))?;
        let bad = lx.b.compare(f.info, zi, CompareDir::Gt)?;
        let bad = any(lx, bad)?;
        lx.check_linalg(bad, format!("torch.linalg.solve_ex: The solver failed because the input matrix is singular. ({})", lx.op));
    }
    let lu = unflat(lx, f.lu, &abatch)?;
    let piv = unflat(lx, f.piv, &abatch)?;
    let info = lx.b.reshape(f.info, &abatch)?;
    // Broadcast (the permutation rather than the pivots: it is already computed).
    let permb = unflat(lx, f.perm, &abatch)?;
    let (lu3, perm2, b3, batch) = broadcast3(lx, lu, permb, bv)?;
    let x = solve_any(lx, lu3, perm2, b3, left, false)?;
    let mut x = unflat(lx, x, &batch)?;
    if vector {
        let mut s = lx.shape(x);
        s.pop();
        x = lx.b.reshape(x, &s)?;
    }
    Ok(vec![x, lu, piv, info])
}

/// linalg_inv_ex(A, *, check_errors=False) -> (inverse, info)
pub(super) fn linalg_inv_ex(lx: &mut Lower, args: &Args) -> R {
    let a = args.tensor(0)?;
    const API: &str = "linalg.inv";
    check_square(lx, a, API)?;
    check_float(lx, a, API)?;
    let (f, batch) = factor_a(lx, a)?;
    if args.bool_or(1, false)? {
        let zi = lx.full(DType::I32, 0.0, &lx.shape(f.info))?;
        let bad = lx.b.compare(f.info, zi, CompareDir::Gt)?;
        let bad = any(lx, bad)?;
        lx.check_linalg(bad, format!("linalg.inv_ex: A diagonal element of U is zero, the inversion could not be completed because the input matrix is singular. ({})", lx.op));
    }
    let s = lx.shape(f.lu);
    let i = eye(lx, a.dtype, &s)?;
    let x = solve_left(lx, f.lu, f.perm, i, false)?;
    let info = lx.b.reshape(f.info, &batch)?;
    Ok(vec![unflat(lx, x, &batch)?, info])
}
