//! LU factorization with partial pivoting (LAPACK getrf / getf2): a
//! `stablehlo.while` over the columns; column j takes the first row of largest
//! |a| at or below the diagonal as pivot (for complex a, LAPACK's
//! |re| + |im|, so the pivots match zgetrf's), swaps whole rows, scales the column by
//! the pivot's reciprocal and updates the trailing block. Pivots are 1-based
//! int32 like LAPACK's ipiv; info is the first zero pivot (1-based) or 0.
//! Lowers linalg_lu_factor_ex, linalg_lu and lu_unpack.
use stablehlo::{Builder, CompareDir, DType, Value};

use super::{bc, check_float, flat3, unflat, unpack_lu};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::{LowerError, Result};

type R = Result<Vec<Value>>;

/// A factorization of `[B, m, n]`.
pub(super) struct Lu {
    /// L (unit, below the diagonal) and U packed, `[B, m, n]`.
    pub lu: Value,
    /// 1-based i32 `[B, min(m, n)]`.
    pub piv: Value,
    /// i32 `[B, m]`: row i of P^T A is row perm[i] of A.
    pub perm: Value,
    /// i32 `[B]`.
    pub info: Value,
}

/// The smallest f such that 1/f does not overflow (LAPACK's sfmin).
fn sfmin(dt: DType) -> f64 {
    match dt {
        DType::F64 | DType::C128 => f64::MIN_POSITIVE,
        _ => f32::MIN_POSITIVE as f64,
    }
}

/// The pivot-search magnitude: |x|, or |re| + |im| for complex (izamax's).
fn pivot_magnitude(l: &mut Lower, x: Value) -> Result<Value> {
    if !l.dtype(x).is_complex() {
        return Ok(l.b.abs(x)?);
    }
    let re = l.b.real(x)?;
    let im = l.b.imag(x)?;
    let (re, im) = (l.b.abs(re)?, l.b.abs(im)?);
    Ok(l.b.add(re, im)?)
}


/// Factors `a` ([B, m, n], float).
pub(super) fn factor(lx: &mut Lower, a: Value) -> Result<Lu> {
    let s = lx.shape(a);
    let (bt, m, n) = (s[0], s[1], s[2]);
    let k = m.min(n);
    let kid = lx.b.iota(DType::I32, &[bt, k], 1)?;
    let one = lx.full(DType::I32, 1.0, &[bt, k])?;
    let piv0 = lx.b.add(kid, one)?;
    let perm0 = lx.b.iota(DType::I32, &[bt, m], 1)?;
    let info0 = lx.full(DType::I32, 0.0, &[bt])?;
    if bt * k == 0 {
        return Ok(Lu { lu: a, piv: piv0, perm: perm0, info: info0 });
    }
    let j0 = lx.b.constant_i64(DType::I64, 0);
    let op = lx.op.to_string();
    let out = lx.b.while_loop::<LowerError>(
        &[j0, a, piv0, perm0, info0],
        |r, c| {
            let kk = r.constant_i64(DType::I64, k);
            Ok(r.compare(c[0], kk, CompareDir::Lt)?)
        },
        |r, c| step(&mut Lower::new(r, &op), c, bt, m, n, k),
    )?;
    Ok(Lu { lu: out[1], piv: out[2], perm: out[3], info: out[4] })
}

/// One column of the factorization; `c` = (j, A, piv, perm, info).
fn step(l: &mut Lower, c: &[Value], bt: i64, m: i64, n: i64, k: i64) -> R {
    use CompareDir::*;
    let (j, a, piv, perm, info) = (c[0], c[1], c[2], c[3], c[4]);
    let dt = l.dtype(a);
    let real_dt = dt.complex_part().unwrap_or(dt);
    let z = l.b.constant_i64(DType::I64, 0);
    let bm = [bt, m];
    let bmn = [bt, m, n];
    // Pivot search: first row i >= j of largest |A[i, j]|.
    let col = l.b.dynamic_slice(a, &[z, z, j], &[bt, m, 1])?;
    let col = l.b.reshape(col, &bm)?;
    let rid = l.b.iota(DType::I64, &bm, 1)?;
    let jm = bc(l, j, &bm, &[])?;
    let at_or_below = l.b.compare(rid, jm, Ge)?;
    let absc = pivot_magnitude(l, col)?;
    let neg = l.full(real_dt, -1.0, &bm)?;
    let cand = l.b.select(at_or_below, absc, neg)?;
    let mx = l.b.reduce_max(cand, &[1])?;
    let mxb = bc(l, mx, &bm, &[0])?;
    let is_max = l.b.compare(cand, mxb, Eq)?;
    let mfull = l.full(DType::I64, m as f64, &bm)?;
    let idxc = l.b.select(is_max, rid, mfull)?;
    let idx = l.b.reduce_min(idxc, &[1])?;
    // A NaN column matches nothing: keep the diagonal row.
    let mb = l.full(DType::I64, m as f64, &[bt])?;
    let jb = bc(l, j, &[bt], &[])?;
    let none = l.b.compare(idx, mb, Ge)?;
    let idx = l.b.select(none, jb, idx)?;
    // Swap rows j and idx (whole rows, like getrf's laswp).
    let rows = l.b.iota(DType::I64, &bmn, 1)?;
    let cols = l.b.iota(DType::I64, &bmn, 2)?;
    let idx3 = bc(l, idx, &bmn, &[0])?;
    let j3 = bc(l, j, &bmn, &[])?;
    let at_p = l.b.compare(rows, idx3, Eq)?;
    let at_j = l.b.compare(rows, j3, Eq)?;
    let zero3 = l.full(dt, 0.0, &bmn)?;
    let rp = l.b.select(at_p, a, zero3)?;
    let rowp = l.b.reduce_sum(rp, &[1])?; // [bt, n]
    let rowj = l.b.dynamic_slice(a, &[z, j, z], &[bt, 1, n])?;
    let rowj = l.b.reshape(rowj, &[bt, n])?;
    let rowp3 = bc(l, rowp, &bmn, &[0, 2])?;
    let rowj3 = bc(l, rowj, &bmn, &[0, 2])?;
    let a = l.b.select(at_p, rowj3, a)?;
    let a = l.b.select(at_j, rowp3, a)?;
    // The pivot and the scaled column below it.
    let cid = l.b.iota(DType::I64, &[bt, n], 1)?;
    let jn = bc(l, j, &[bt, n], &[])?;
    let atjn = l.b.compare(cid, jn, Eq)?;
    let zn = l.full(dt, 0.0, &[bt, n])?;
    let pv = l.b.select(atjn, rowp, zn)?;
    let p = l.b.reduce_sum(pv, &[1])?; // [bt]
    let col = l.b.dynamic_slice(a, &[z, z, j], &[bt, m, 1])?;
    let col = l.b.reshape(col, &bm)?;
    let pb = bc(l, p, &bm, &[0])?;
    let zm = l.full(dt, 0.0, &bm)?;
    let nz = l.b.compare(pb, zm, Ne)?;
    let pabs = crate::ops::complex::modulus(l.b, pb)?;
    let sf = l.full(real_dt, sfmin(dt), &bm)?;
    let big = l.b.compare(pabs, sf, Ge)?;
    let onem = l.full(dt, 1.0, &bm)?;
    let recip = l.b.div(onem, pb)?;
    let by_recip = l.b.mul(col, recip)?;
    let by_div = l.b.div(col, pb)?;
    let scaled = l.b.select(big, by_recip, by_div)?;
    let below = l.b.compare(rid, jm, Gt)?;
    let apply = l.b.and(nz, below)?;
    let lcol = l.b.select(apply, scaled, col)?;
    let lcol3 = l.b.reshape(lcol, &[bt, m, 1])?;
    let a = l.b.dynamic_update_slice(a, lcol3, &[z, z, j])?;
    // Trailing update A[i, c] -= l[i] u[c] for i, c > j.
    let l3 = bc(l, lcol, &bmn, &[0, 1])?;
    let prod = l.b.mul(l3, rowp3)?;
    let upd = l.b.sub(a, prod)?;
    let rgt = l.b.compare(rows, j3, Gt)?;
    let cgt = l.b.compare(cols, j3, Gt)?;
    let mask = l.b.and(rgt, cgt)?;
    let a = l.b.select(mask, upd, a)?;
    // info, pivots, permutation.
    let zb = l.full(dt, 0.0, &[bt])?;
    let pzero = l.b.compare(p, zb, Eq)?;
    let zi = l.full(DType::I32, 0.0, &[bt])?;
    let first = l.b.compare(info, zi, Eq)?;
    let set = l.b.and(pzero, first)?;
    let one64 = l.b.constant_i64(DType::I64, 1);
    let j1 = l.b.add(j, one64)?;
    let j1i = l.b.convert(j1, DType::I32)?;
    let j1b = bc(l, j1i, &[bt], &[])?;
    let info = l.b.select(set, j1b, info)?;
    let kid = l.b.iota(DType::I64, &[bt, k], 1)?;
    let jk = bc(l, j, &[bt, k], &[])?;
    let atk = l.b.compare(kid, jk, Eq)?;
    let onesb = l.full(DType::I64, 1.0, &[bt])?;
    let idx1 = l.b.add(idx, onesb)?;
    let idx1 = l.b.convert(idx1, DType::I32)?;
    let idx1k = bc(l, idx1, &[bt, k], &[0])?;
    let piv = l.b.select(atk, idx1k, piv)?;
    let perm = swap_entries(l, perm, j, idx)?;
    Ok(vec![j1, a, piv, perm, info])
}

/// Swaps entries `j` (rank-0 i64) and `idx[b]` (i64 `[B]`) of each row of `v` `[B, m]`.
fn swap_entries(l: &mut Lower, v: Value, j: Value, idx: Value) -> Result<Value> {
    let s = l.shape(v);
    let (bt, m) = (s[0], s[1]);
    let dt = l.dtype(v);
    let z = l.b.constant_i64(DType::I64, 0);
    let rid = l.b.iota(DType::I64, &s, 1)?;
    let jm = bc(l, j, &s, &[])?;
    let im = bc(l, idx, &s, &[0])?;
    let at_j = l.b.compare(rid, jm, CompareDir::Eq)?;
    let at_p = l.b.compare(rid, im, CompareDir::Eq)?;
    let vj = l.b.dynamic_slice(v, &[z, j], &[bt, 1])?;
    let vj = l.b.reshape(vj, &[bt])?;
    let zm = l.full(dt, 0.0, &[bt, m])?;
    let vp = l.b.select(at_p, v, zm)?;
    let vp = l.b.reduce_sum(vp, &[1])?;
    let vjb = bc(l, vj, &s, &[0])?;
    let vpb = bc(l, vp, &s, &[0])?;
    let v = l.b.select(at_p, vjb, v)?;
    Ok(l.b.select(at_j, vpb, v)?)
}

/// The row permutation `[B, m]` (i32) that the 1-based pivots `[B, k]` apply.
pub(super) fn perm_from_pivots(lx: &mut Lower, piv: Value, m: i64) -> Result<Value> {
    let s = lx.shape(piv);
    let (bt, k) = (s[0], s[1]);
    let piv = lx.cast(piv, DType::I32)?;
    let perm0 = lx.b.iota(DType::I32, &[bt, m], 1)?;
    if bt * k * m == 0 {
        return Ok(perm0);
    }
    let i0 = lx.b.constant_i64(DType::I64, 0);
    let op = lx.op.to_string();
    let out = lx.b.while_loop::<LowerError>(
        &[i0, piv, perm0],
        |r, c| {
            let kk = r.constant_i64(DType::I64, k);
            Ok(r.compare(c[0], kk, CompareDir::Lt)?)
        },
        |r: &mut Builder, c| {
            let l = &mut Lower::new(r, &op);
            let z = l.b.constant_i64(DType::I64, 0);
            let p = l.b.dynamic_slice(c[1], &[z, c[0]], &[bt, 1])?;
            let p = l.b.reshape(p, &[bt])?;
            let p = l.b.convert(p, DType::I64)?;
            let one = l.full(DType::I64, 1.0, &[bt])?;
            let p = l.b.sub(p, one)?;
            let lo = l.full(DType::I64, 0.0, &[bt])?;
            let hi = l.full(DType::I64, (m - 1) as f64, &[bt])?;
            let p = l.b.clamp(lo, p, hi)?;
            let perm = swap_entries(l, c[2], c[0], p)?;
            let one = l.b.constant_i64(DType::I64, 1);
            let i1 = l.b.add(c[0], one)?;
            Ok(vec![i1, c[1], perm])
        },
    )?;
    Ok(out[2])
}

/// The permutation matrix P `[B, m, m]` with P[perm[c], c] = 1 (A = P L U).
pub(super) fn perm_matrix(lx: &mut Lower, perm: Value, dtype: DType) -> Result<Value> {
    let s = lx.shape(perm);
    let sh = [s[0], s[1], s[1]];
    let rows = lx.b.iota(DType::I32, &sh, 1)?;
    let pc = bc(lx, perm, &sh, &[0, 2])?;
    let m = lx.b.compare(rows, pc, CompareDir::Eq)?;
    lx.cast(m, dtype)
}

/// linalg_lu_factor_ex(A, *, pivot=True, check_errors=False) -> (LU, pivots, info)
pub(super) fn linalg_lu_factor_ex(lx: &mut Lower, args: &Args) -> R {
    let a = args.tensor(0)?;
    check_float(lx, a, "torch.linalg.lu_factor_ex")?;
    if !args.bool_or(1, true)? {
        bail!(Runtime, "linalg.lu_factor: LU without pivoting is not implemented on the CPU ({})", lx.op);
    }
    let (a3, batch) = flat3(lx, a.value)?;
    let f = factor(lx, a3)?;
    if args.bool_or(2, false)? {
        let zi = lx.full(DType::I32, 0.0, &lx.shape(f.info))?;
        let bad = lx.b.compare(f.info, zi, CompareDir::Gt)?;
        let bad = super::any(lx, bad)?;
        lx.check_runtime(bad, format!("torch.linalg.lu_factor_ex: U[i,i] is zero and using it on lu_solve would result in a division by zero. If you still want to perform the factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot) ({})", lx.op));
    }
    let lu = unflat(lx, f.lu, &batch)?;
    let piv = unflat(lx, f.piv, &batch)?;
    let info = lx.b.reshape(f.info, &batch)?;
    Ok(vec![lu, piv, info])
}

/// linalg_lu(A, *, pivot=True) -> (P, L, U)
pub(super) fn linalg_lu(lx: &mut Lower, args: &Args) -> R {
    let a = args.tensor(0)?;
    check_float(lx, a, "linalg.lu")?;
    if !args.bool_or(1, true)? {
        bail!(Runtime, "linalg.lu: LU without pivoting is not implemented on the CPU ({})", lx.op);
    }
    let (a3, batch) = flat3(lx, a.value)?;
    let f = factor(lx, a3)?;
    let p = perm_matrix(lx, f.perm, a.dtype)?;
    let (l, u) = unpack_lu(lx, f.lu)?;
    Ok(vec![unflat(lx, p, &batch)?, unflat(lx, l, &batch)?, unflat(lx, u, &batch)?])
}

/// lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True) -> (P, L, U)
pub(super) fn lu_unpack(lx: &mut Lower, args: &Args) -> R {
    let (lu, piv) = (args.tensor(0)?, args.tensor(1)?);
    let (unpack_data, unpack_pivots) = (args.bool_or(2, true)?, args.bool_or(3, true)?);
    let r = lu.shape.len();
    if r < 2 {
        bail!(Runtime, "torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: {:?} instead ({})", lu.shape, lx.op);
    }
    let (m, n) = (lu.shape[r - 2], lu.shape[r - 1]);
    let k = m.min(n);
    if unpack_pivots {
        if !piv.dtype.is_integer() {
            bail!(Runtime, "torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype. Note: this function is intended to be used with the output produced by torch.linalg.lu_factor ({})", lx.op);
        }
        if piv.shape.len() != r - 1 || piv.shape[r - 2] != k || piv.shape[..r - 2] != lu.shape[..r - 2] {
            bail!(Runtime, "torch.lu_unpack: LU_pivots of shape {:?} does not match LU_data of shape {:?} ({})", piv.shape, lu.shape, lx.op);
        }
    }
    let (lu3, batch) = flat3(lx, lu.value)?;
    let empty = lx.full(lu.dtype, 0.0, &[0])?;
    let (l, u) = if unpack_data {
        let (l, u) = unpack_lu(lx, lu3)?;
        (unflat(lx, l, &batch)?, unflat(lx, u, &batch)?)
    } else {
        (empty, empty)
    };
    let p = if unpack_pivots {
        let bt: i64 = batch.iter().product();
        let piv2 = lx.b.reshape(piv.value, &[bt, k])?;
        let perm = perm_from_pivots(lx, piv2, m)?;
        let p = perm_matrix(lx, perm, lu.dtype)?;
        unflat(lx, p, &batch)?
    } else {
        empty
    };
    Ok(vec![p, l, u])
}
