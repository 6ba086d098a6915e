//! linalg_ldl_solve: LAPACK sytrs (lower) with the Bunch-Kaufman LD and
//! pivots of ldl.rs: a forward sweep (row swaps, L and D^-1 with 1x1 or 2x2
//! blocks) then a backward sweep (L^T, swaps), each a `stablehlo.while` whose
//! row index is per matrix (a 2x2 block moves two rows).
use stablehlo::{CompareDir, DType, Value};

use super::ldl::{cmp_iota, pick, pick1, swap_rows};
use super::{any, bc, check_float, check_square, flat3, keep, unflat};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::{LowerError, Result};

type R = Result<Vec<Value>>;
use CompareDir::*;

/// Sets row `idx[b]` of `x` `[B, n, r]` to `row` `[B, r]` where `on[b]`.
fn put_row(l: &mut Lower, x: Value, idx: Value, row: Value, on: Value) -> Result<Value> {
    let s = l.shape(x);
    let at = cmp_iota(l, idx, s[1], Eq)?;
    let onn = bc(l, on, &[s[0], s[1]], &[0])?;
    let at = l.b.and(at, onn)?;
    let at3 = bc(l, at, &s, &[0, 1])?;
    let r3 = bc(l, row, &s, &[0, 2])?;
    Ok(l.b.select(at3, r3, x)?)
}

/// x - v[b, i] * row[b, c] on the rows i of `rows` (i1 `[B, n]`), as dger does.
fn ger(l: &mut Lower, x: Value, v: Value, row: Value, rows: Value) -> Result<Value> {
    let s = l.shape(x);
    let nr = l.b.neg(row)?;
    let v3 = bc(l, v, &s, &[0, 1])?;
    let r3 = bc(l, nr, &s, &[0, 2])?;
    let p = l.b.mul(v3, r3)?;
    let y = l.b.add(x, p)?;
    let m = bc(l, rows, &s, &[0, 1])?;
    Ok(l.b.select(m, y, x)?)
}

/// sum_{i in rows} v[b, i] * x[b, i, c] → `[B, r]`.
fn dot_rows(l: &mut Lower, x: Value, v: Value, rows: Value) -> Result<Value> {
    let s = l.shape(x);
    let v3 = bc(l, v, &s, &[0, 1])?;
    let p = l.b.mul(v3, x)?;
    let m = bc(l, rows, &s, &[0, 1])?;
    let p = keep(l, m, p)?; // not 0 * x: x may hold inf
    Ok(l.b.reduce_sum(p, &[1])?)
}

/// Forward sweep (L D Y = P B); `c` = (k, X, LD, piv i64).
fn fwd_step(l: &mut Lower, c: &[Value], bt: i64, n: i64) -> R {
    let (k, x, ld, piv) = (c[0], c[1], c[2], c[3]);
    let dt = l.dtype(x);
    let r = l.shape(x)[2];
    let nb = l.full(DType::I64, n as f64, &[bt])?;
    let act = l.b.compare(k, nb, Lt)?;
    let ones = l.full(DType::I64, 1.0, &[bt])?;
    let zi = l.full(DType::I64, 0.0, &[bt])?;
    let k1 = l.b.add(k, ones)?;
    let pk = pick1(l, piv, k)?;
    let two = l.b.compare(pk, zi, Lt)?;
    let two = l.b.and(two, act)?;
    let npk = l.b.neg(pk)?;
    let kp = l.b.select(two, npk, pk)?;
    let kp = l.b.sub(kp, ones)?;
    let sr = l.b.select(two, k1, k)?;
    let all3 = l.full(DType::Bool, 1.0, &l.shape(x))?;
    let sw = swap_rows(l, x, sr, kp, all3)?;
    let act3 = bc(l, act, &[bt, n, r], &[0])?;
    let x = l.b.select(act3, sw, x)?;
    let lk = pick(l, ld, k, 2)?;
    let lk1 = pick(l, ld, k1, 2)?;
    let bk = pick(l, x, k, 1)?;
    let bk1 = pick(l, x, k1, 1)?;
    let twon = bc(l, two, &[bt, n], &[0])?;
    let actn = bc(l, act, &[bt, n], &[0])?;
    let gk = cmp_iota(l, k, n, Gt)?;
    let gk1 = cmp_iota(l, k1, n, Gt)?;
    let rows = l.b.select(twon, gk1, gk)?;
    let rows = l.b.and(rows, actn)?;
    let x = ger(l, x, lk, bk, rows)?;
    let rows2 = l.b.and(gk1, twon)?;
    let x = ger(l, x, lk1, bk1, rows2)?;
    // Diagonal blocks.
    let dkk = pick1(l, lk, k)?;
    let one = l.full(dt, 1.0, &[bt])?;
    let inv = l.b.div(one, dkk)?;
    let invr = bc(l, inv, &[bt, r], &[0])?;
    let s1 = l.b.mul(bk, invr)?;
    let e = pick1(l, lk, k1)?; // akm1k
    let akm1 = l.b.div(dkk, e)?;
    let dk1 = pick1(l, lk1, k1)?;
    let ak = l.b.div(dk1, e)?;
    let den = l.b.mul(akm1, ak)?;
    let den = l.b.sub(den, one)?;
    let br = |l: &mut Lower, v: Value| bc(l, v, &[bt, r], &[0]);
    let (er, akr, akm1r, denr) = (br(l, e)?, br(l, ak)?, br(l, akm1)?, br(l, den)?);
    let bkm1 = l.b.div(bk, er)?;
    let bkk = l.b.div(bk1, er)?;
    let t = l.b.mul(akr, bkm1)?;
    let t = l.b.sub(t, bkk)?;
    let nk = l.b.div(t, denr)?;
    let t = l.b.mul(akm1r, bkk)?;
    let t = l.b.sub(t, bkm1)?;
    let nk1 = l.b.div(t, denr)?;
    let twor = bc(l, two, &[bt, r], &[0])?;
    let rowk = l.b.select(twor, nk, s1)?;
    let x = put_row(l, x, k, rowk, act)?;
    let x = put_row(l, x, k1, nk1, two)?;
    let twos = l.full(DType::I64, 2.0, &[bt])?;
    let st = l.b.select(two, twos, ones)?;
    let kn = l.b.add(k, st)?;
    let kn = l.b.select(act, kn, k)?;
    Ok(vec![kn, x, ld, piv])
}

/// Backward sweep (L^T P^T X = Y), k running down; `c` = (k, X, LD, piv i64).
fn bwd_step(l: &mut Lower, c: &[Value], bt: i64, n: i64) -> R {
    let (k, x, ld, piv) = (c[0], c[1], c[2], c[3]);
    let r = l.shape(x)[2];
    let zi = l.full(DType::I64, 0.0, &[bt])?;
    let act = l.b.compare(k, zi, Ge)?;
    let ones = l.full(DType::I64, 1.0, &[bt])?;
    let km1 = l.b.sub(k, ones)?;
    let pk = pick1(l, piv, k)?;
    let two = l.b.compare(pk, zi, Lt)?;
    let two = l.b.and(two, act)?;
    let lk = pick(l, ld, k, 2)?;
    let lkm1 = pick(l, ld, km1, 2)?;
    let gk = cmp_iota(l, k, n, Gt)?;
    let sk = dot_rows(l, x, lk, gk)?;
    let skm1 = dot_rows(l, x, lkm1, gk)?;
    let bk = pick(l, x, k, 1)?;
    let bkm1 = pick(l, x, km1, 1)?;
    let nk = l.b.sub(bk, sk)?;
    let nkm1 = l.b.sub(bkm1, skm1)?;
    let x = put_row(l, x, k, nk, act)?;
    let x = put_row(l, x, km1, nkm1, two)?;
    let npk = l.b.neg(pk)?;
    let kp = l.b.select(two, npk, pk)?;
    let kp = l.b.sub(kp, ones)?;
    let all3 = l.full(DType::Bool, 1.0, &l.shape(x))?;
    let sw = swap_rows(l, x, k, kp, all3)?;
    let act3 = bc(l, act, &[bt, n, r], &[0])?;
    let x = l.b.select(act3, sw, x)?;
    let twos = l.full(DType::I64, 2.0, &[bt])?;
    let st = l.b.select(two, twos, ones)?;
    let kn = l.b.sub(k, st)?;
    let kn = l.b.select(act, kn, k)?;
    Ok(vec![kn, x, ld, piv])
}

/// linalg_ldl_solve(LD, pivots, B, *, hermitian=False)
pub(super) fn linalg_ldl_solve(lx: &mut Lower, args: &Args) -> R {
    let (ld, piv, b) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    const API: &str = "torch.linalg.ldl_solve";
    check_square(lx, ld, API)?;
    check_float(lx, ld, API)?;
    let r = ld.shape.len();
    let n = ld.shape[r - 1];
    if b.shape.len() < 2 || b.shape[b.shape.len() - 2] != n {
        crate::bail!(Runtime, "{API}: Incompatible shapes of LD {:?} and B {:?} ({})", ld.shape, b.shape, lx.op);
    }
    if b.dtype != ld.dtype {
        crate::bail!(Runtime, "{API}: Expected LD and B to have the same dtype, but found LD of type {:?} and B of type {:?} instead ({})", ld.dtype, b.dtype, lx.op);
    }
    if !piv.dtype.is_integer() || piv.shape[..] != ld.shape[..r - 1] {
        crate::bail!(Runtime, "{API}: Expected LD.shape[:-1] == pivots.shape and int32 pivots, got {:?} and {:?} {:?} ({})", ld.shape, piv.shape, piv.dtype, lx.op);
    }
    let rb = b.shape.len();
    let batch = super::broadcast_batch(lx, &ld.shape[..r - 2], &b.shape[..rb - 2])?;
    let with = |tail: &[i64]| -> Vec<i64> { batch.iter().chain(tail).copied().collect() };
    let ldv = lx.expand(ld.value, &with(&ld.shape[r - 2..]))?;
    let pv = lx.expand(piv.value, &with(&ld.shape[r - 1..]))?;
    let bv = lx.expand(b.value, &with(&b.shape[rb - 2..]))?;
    let (ld3, _) = flat3(lx, ldv)?;
    let (b3, _) = flat3(lx, bv)?;
    let bt: i64 = batch.iter().product();
    let p2 = lx.b.reshape(pv, &[bt, n])?;
    let p2 = lx.cast(p2, DType::I64)?;
    if lx.shape(b3).iter().product::<i64>() == 0 {
        return Ok(vec![unflat(lx, b3, &batch)?]);
    }
    let op = lx.op.to_string();
    let k0 = lx.full(DType::I64, 0.0, &[bt])?;
    let out = lx.b.while_loop::<LowerError>(
        &[k0, b3, ld3, p2],
        |r, c| {
            let l = &mut Lower::new(r, &op);
            let nb = l.full(DType::I64, n as f64, &[bt])?;
            let more = l.b.compare(c[0], nb, Lt)?;
            any(l, more)
        },
        |r, c| fwd_step(&mut Lower::new(r, &op), c, bt, n),
    )?;
    let kl = lx.full(DType::I64, (n - 1) as f64, &[bt])?;
    let out = lx.b.while_loop::<LowerError>(
        &[kl, out[1], ld3, p2],
        |r, c| {
            let l = &mut Lower::new(r, &op);
            let z = l.full(DType::I64, 0.0, &[bt])?;
            let more = l.b.compare(c[0], z, Ge)?;
            any(l, more)
        },
        |r, c| bwd_step(&mut Lower::new(r, &op), c, bt, n),
    )?;
    let _ = args.bool_or(3, false)?; // hermitian: the same for real inputs
    Ok(vec![unflat(lx, out[1], &batch)?])
}
