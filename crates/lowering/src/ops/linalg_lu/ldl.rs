//! LDL^T with Bunch-Kaufman pivoting, LAPACK sytf2 (lower) step for step so
//! that LD and pivots equal the CPU's (MKL sytrf; checked on random symmetric
//! matrices with 1x1 and 2x2 pivots). A `stablehlo.while` whose column index is
//! per matrix (a 2x2 pivot advances two columns); the trailing block is kept
//! symmetric (each update computed on the lower triangle and mirrored).
//! Lowers linalg_ldl_factor_ex; ldl_solve.rs solves with its output.
use stablehlo::{CompareDir, DType, Value};

use super::{any, bc, check_float, check_square, diag_mask, flat3, keep, unflat};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::{LowerError, Result};

type R = Result<Vec<Value>>;
use CompareDir::*;

/// Row (`dim` 1) or column (`dim` 2) `idx[b]` of `a` `[B, n, m]`.
pub(super) fn pick(l: &mut Lower, a: Value, idx: Value, dim: i64) -> Result<Value> {
    let s = l.shape(a);
    let it = l.b.iota(DType::I64, &s, dim)?;
    let ib = bc(l, idx, &s, &[0])?;
    let m = l.b.compare(it, ib, Eq)?;
    let v = keep(l, m, a)?;
    Ok(l.b.reduce_sum(v, &[dim])?)
}

/// Entry `idx[b]` of `v` `[B, n]`.
pub(super) fn pick1(l: &mut Lower, v: Value, idx: Value) -> Result<Value> {
    let s = l.shape(v);
    let it = l.b.iota(DType::I64, &s, 1)?;
    let ib = bc(l, idx, &s, &[0])?;
    let m = l.b.compare(it, ib, Eq)?;
    let v = keep(l, m, v)?;
    Ok(l.b.reduce_sum(v, &[1])?)
}

/// i1 `[B, n]`: iota `<dir>` v[b].
pub(super) fn cmp_iota(l: &mut Lower, v: Value, n: i64, dir: CompareDir) -> Result<Value> {
    let bt = l.shape(v)[0];
    let it = l.b.iota(DType::I64, &[bt, n], 1)?;
    let vb = bc(l, v, &[bt, n], &[0])?;
    Ok(l.b.compare(it, vb, dir)?)
}

/// `[B, n, n]` i1 from `[B, n]` row / column masks.
fn rows_m(l: &mut Lower, m: Value) -> Result<Value> {
    let s = l.shape(m);
    bc(l, m, &[s[0], s[1], s[1]], &[0, 1])
}
fn cols_m(l: &mut Lower, m: Value) -> Result<Value> {
    let s = l.shape(m);
    bc(l, m, &[s[0], s[1], s[1]], &[0, 2])
}

/// Swaps rows `p` and `q` (i64 `[B]`) of `a` `[B, n, m]` in the columns where `cols_ok`.
pub(super) fn swap_rows(l: &mut Lower, a: Value, p: Value, q: Value, cols_ok: Value) -> Result<Value> {
    let s = l.shape(a);
    let n = s[1];
    let rp = pick(l, a, p, 1)?;
    let rq = pick(l, a, q, 1)?;
    let isp = cmp_iota(l, p, n, Eq)?;
    let isq = cmp_iota(l, q, n, Eq)?;
    let isp = bc(l, isp, &s, &[0, 1])?;
    let isq = bc(l, isq, &s, &[0, 1])?;
    let isp = l.b.and(isp, cols_ok)?;
    let isq = l.b.and(isq, cols_ok)?;
    let rp3 = bc(l, rp, &s, &[0, 2])?;
    let rq3 = bc(l, rq, &s, &[0, 2])?;
    let a = l.b.select(isq, rp3, a)?;
    Ok(l.b.select(isp, rq3, a)?)
}

fn alpha(dt: DType) -> f64 {
    if dt == DType::F64 { (1.0 + 17f64.sqrt()) / 8.0 } else { ((1.0f32 + 17f32.sqrt()) / 8.0) as f64 }
}

/// One pivot step; `c` = (k [B], A, piv, info).
fn factor_step(l: &mut Lower, c: &[Value], bt: i64, n: i64) -> R {
    let (k, a, piv, info) = (c[0], c[1], c[2], c[3]);
    let dt = l.dtype(a);
    let s3 = [bt, n, n];
    let nb = l.full(DType::I64, n as f64, &[bt])?;
    let act = l.b.compare(k, nb, Lt)?;
    let x = pick(l, a, k, 2)?;
    let akk = pick1(l, x, k)?;
    let absakk = l.b.abs(akk)?;
    let below = cmp_iota(l, k, n, Gt)?;
    let ax = l.b.abs(x)?;
    let neg = l.full(dt, -1.0, &[bt, n])?;
    let cand = l.b.select(below, ax, neg)?;
    let cm = l.b.reduce_max(cand, &[1])?;
    let cmb = bc(l, cm, &[bt, n], &[0])?;
    let ismax = l.b.compare(cand, cmb, Eq)?;
    let ism = l.b.and(ismax, below)?;
    let it = l.b.iota(DType::I64, &[bt, n], 1)?;
    let nn = l.full(DType::I64, n as f64, &[bt, n])?;
    let ic = l.b.select(ism, it, nn)?;
    let imax = l.b.reduce_min(ic, &[1])?;
    let none = l.b.compare(imax, nb, Ge)?;
    let imax = l.b.select(none, k, imax)?;
    let zb = l.full(dt, 0.0, &[bt])?;
    let colmax = l.b.max(cm, zb)?;
    let mx = l.b.max(absakk, colmax)?;
    let z1 = l.b.compare(mx, zb, Eq)?;
    let z2 = l.b.compare(absakk, absakk, Ne)?; // NaN
    let zero = l.b.or(z1, z2)?;
    // rowmax over row imax (columns >= k but imax), symmetric trailing block.
    let ri = pick(l, a, imax, 1)?;
    let ge_k = cmp_iota(l, k, n, Ge)?;
    let ne_i = cmp_iota(l, imax, n, Ne)?;
    let rm = l.b.and(ge_k, ne_i)?;
    let ari = l.b.abs(ri)?;
    let rc = l.b.select(rm, ari, neg)?;
    let rowmax = l.b.reduce_max(rc, &[1])?;
    let aii = pick1(l, ri, imax)?;
    let aii = l.b.abs(aii)?;
    let al = l.full(dt, alpha(dt), &[bt])?;
    let acm = l.b.mul(al, colmax)?;
    let c1 = l.b.compare(absakk, acm, Ge)?;
    let q = l.b.div(colmax, rowmax)?;
    let acq = l.b.mul(acm, q)?;
    let c2 = l.b.compare(absakk, acq, Ge)?;
    let arm = l.b.mul(al, rowmax)?;
    let c3 = l.b.compare(aii, arm, Ge)?;
    let keepk = l.b.or(c1, c2)?;
    let keepk = l.b.or(keepk, zero)?;
    let one_ok = l.b.or(keepk, c3)?;
    let two = l.b.not(one_ok)?;
    let kp = l.b.select(keepk, k, imax)?;
    let ones = l.full(DType::I64, 1.0, &[bt])?;
    let zi = l.full(DType::I64, 0.0, &[bt])?;
    let add = l.b.select(two, ones, zi)?;
    let kk = l.b.add(k, add)?; // the row that takes the pivot
    // Interchange kk <-> kp in the trailing block (rows, cols >= k).
    let ge3c = cols_m(l, ge_k)?;
    let ge3r = rows_m(l, ge_k)?;
    let a1 = swap_rows(l, a, kk, kp, ge3c)?;
    let a1t = l.b.transpose(a1, &[0, 2, 1])?;
    let a2t = swap_rows(l, a1t, kk, kp, ge3r)?;
    let a2 = l.b.transpose(a2t, &[0, 2, 1])?;
    let act3 = bc(l, act, &s3, &[0])?;
    let a = l.b.select(act3, a2, a)?;
    // Updates.
    let x = pick(l, a, k, 2)?;
    let k1 = l.b.add(k, ones)?;
    let y = pick(l, a, k1, 2)?;
    let akk = pick1(l, x, k)?;
    let one_b = l.full(dt, 1.0, &[bt])?;
    let d11 = l.b.div(one_b, akk)?;
    let nd11 = l.b.neg(d11)?;
    let x3i = bc(l, x, &s3, &[0, 1])?;
    let x3j = bc(l, x, &s3, &[0, 2])?;
    let nd3 = bc(l, nd11, &s3, &[0])?;
    let t = l.b.mul(nd3, x3j)?;
    let t = l.b.mul(x3i, t)?;
    let u1 = l.b.add(a, t)?;
    // 2x2 block.
    let d21 = pick1(l, x, k1)?;
    let ckk1 = pick1(l, y, k1)?;
    let e11 = l.b.div(ckk1, d21)?;
    let e22 = l.b.div(akk, d21)?;
    let p = l.b.mul(e11, e22)?;
    let p = l.b.sub(p, one_b)?;
    let tt = l.b.div(one_b, p)?;
    let f21 = l.b.div(tt, d21)?;
    let bn = |l: &mut Lower, v: Value| bc(l, v, &[bt, n], &[0]);
    let (f21n, e11n, e22n) = (bn(l, f21)?, bn(l, e11)?, bn(l, e22)?);
    let wk = l.b.mul(e11n, x)?;
    let wk = l.b.sub(wk, y)?;
    let wk = l.b.mul(f21n, wk)?;
    let wk1 = l.b.mul(e22n, y)?;
    let wk1 = l.b.sub(wk1, x)?;
    let wk1 = l.b.mul(f21n, wk1)?;
    let y3i = bc(l, y, &s3, &[0, 1])?;
    let wk3 = bc(l, wk, &s3, &[0, 2])?;
    let wk13 = bc(l, wk1, &s3, &[0, 2])?;
    let t1 = l.b.mul(x3i, wk3)?;
    let u2 = l.b.sub(a, t1)?;
    let t2 = l.b.mul(y3i, wk13)?;
    let u2 = l.b.sub(u2, t2)?;
    // Select per matrix, symmetrize from the lower triangle.
    let two3 = bc(l, two, &s3, &[0])?;
    let u = l.b.select(two3, u2, u1)?;
    let low = diag_mask(l, &s3, Le, 0)?;
    let ut = l.b.transpose(u, &[0, 2, 1])?;
    let u = l.b.select(low, u, ut)?;
    let off = l.b.select(two, k1, k)?; // trailing block starts after `off`
    let gt_off = cmp_iota(l, off, n, Gt)?;
    let r3 = rows_m(l, gt_off)?;
    let c3m = cols_m(l, gt_off)?;
    let blk = l.b.and(r3, c3m)?;
    let upd = l.b.not(zero)?;
    let upd = l.b.and(upd, act)?;
    let upd3 = bc(l, upd, &s3, &[0])?;
    let blk = l.b.and(blk, upd3)?;
    let a = l.b.select(blk, u, a)?;
    // Columns k (and k+1) below the pivot block: the multipliers.
    let d11n = bn(l, d11)?;
    let xs = l.b.mul(x, d11n)?;
    let twob = bc(l, two, &[bt, n], &[0])?;
    let colk = l.b.select(twob, wk, xs)?;
    let colk1 = wk1;
    let ck = cmp_iota(l, k, n, Eq)?;
    let ck1 = cmp_iota(l, k1, n, Eq)?;
    let ck = cols_m(l, ck)?;
    let ck1 = cols_m(l, ck1)?;
    let rb = rows_m(l, gt_off)?;
    let m_k = l.b.and(ck, rb)?;
    let m_k = l.b.and(m_k, upd3)?;
    let m_k1 = l.b.and(ck1, rb)?;
    let m_k1 = l.b.and(m_k1, upd3)?;
    let m_k1 = l.b.and(m_k1, two3)?;
    let colk3 = bc(l, colk, &s3, &[0, 1])?;
    let colk13 = bc(l, colk1, &s3, &[0, 1])?;
    let a = l.b.select(m_k, colk3, a)?;
    let a = l.b.select(m_k1, colk13, a)?;
    // Pivots, info, next k.
    let kp1 = l.b.add(kp, ones)?;
    let nkp1 = l.b.neg(kp1)?;
    let pv = l.b.select(two, nkp1, kp1)?;
    let pv = l.b.convert(pv, DType::I32)?;
    let pvn = bc(l, pv, &[bt, n], &[0])?;
    let atk = cmp_iota(l, k, n, Eq)?;
    let atk1 = cmp_iota(l, k1, n, Eq)?;
    let twon = bc(l, two, &[bt, n], &[0])?;
    let atk1 = l.b.and(atk1, twon)?;
    let w = l.b.or(atk, atk1)?;
    let actn = bc(l, act, &[bt, n], &[0])?;
    let w = l.b.and(w, actn)?;
    let piv = l.b.select(w, pvn, piv)?;
    let zi32 = l.full(DType::I32, 0.0, &[bt])?;
    let first = l.b.compare(info, zi32, Eq)?;
    let set = l.b.and(first, zero)?;
    let set = l.b.and(set, act)?;
    let k1i = l.b.convert(k1, DType::I32)?;
    let info = l.b.select(set, k1i, info)?;
    let twos = l.full(DType::I64, 2.0, &[bt])?;
    let step = l.b.select(two, twos, ones)?;
    let kn = l.b.add(k, step)?;
    let kn = l.b.select(act, kn, k)?;
    Ok(vec![kn, a, piv, info])
}

/// linalg_ldl_factor_ex(self, *, hermitian=False, check_errors=False) -> (LD, pivots, info)
pub(super) fn linalg_ldl_factor_ex(lx: &mut Lower, args: &Args) -> R {
    let a = args.tensor(0)?;
    const API: &str = "torch.linalg.ldl_factor_ex";
    check_square(lx, a, API)?;
    check_float(lx, a, API)?;
    let (a3, batch) = flat3(lx, a.value)?;
    let s = lx.shape(a3);
    let (bt, n) = (s[0], s[1]);
    // The lower triangle, mirrored.
    let low = diag_mask(lx, &s, Le, 0)?;
    let at = lx.b.transpose(a3, &[0, 2, 1])?;
    let sym = lx.b.select(low, a3, at)?;
    let piv0 = lx.full(DType::I32, 0.0, &[bt, n])?;
    let info0 = lx.full(DType::I32, 0.0, &[bt])?;
    let (ld, piv, info) = if bt * n == 0 {
        (a3, piv0, info0)
    } else {
        let k0 = lx.full(DType::I64, 0.0, &[bt])?;
        let op = lx.op.to_string();
        let out = lx.b.while_loop::<LowerError>(
            &[k0, sym, piv0, info0],
            |r, c| {
                let l = &mut Lower::new(r, &op);
                let nb = l.full(DType::I64, n as f64, &[bt])?;
                let more = l.b.compare(c[0], nb, Lt)?;
                any(l, more)
            },
            |r, c| factor_step(&mut Lower::new(r, &op), c, bt, n),
        )?;
        (out[1], out[2], out[3])
    };
    let low = diag_mask(lx, &s, Le, 0)?;
    let ld = keep(lx, low, ld)?;
    if args.bool_or(2, false)? {
        let zi = lx.full(DType::I32, 0.0, &[bt])?;
        let bad = lx.b.compare(info, zi, Gt)?;
        let bad = any(lx, bad)?;
        lx.check_linalg(bad, format!("{API}: The factorization could not be completed because the input is singular. ({})", lx.op));
    }
    let _ = args.bool_or(1, false)?; // hermitian: the same for real inputs
    Ok(vec![unflat(lx, ld, &batch)?, unflat(lx, piv, &batch)?, lx.b.reshape(info, &batch)?])
}
