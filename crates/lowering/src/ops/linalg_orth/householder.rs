//! Householder QR as LAPACK does it (dgeqr2's dlarfg reflectors, so R's signs
//! match the CPU; for complex inputs zgeqr2's zlarfg, whose beta is real and
//! whose reflectors H = I - tau v v^H are applied as H^H): geqrf, linalg_qr,
//! linalg_householder_product (orgqr) and ormqr, plus the rank-3 cores
//! `geqrf3` / `apply_reflectors` that the SVD reuses.
use stablehlo::{Builder, CompareDir, Value};

use super::{bc, c64, conj, div_batch, mul_batch, pow2_scale, check_matrix, cmp_k, eye3, from_batch, iota, keep, to3, triu3};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

type R = Result<Vec<Value>>;

/// One dgeqr2 step on column `i` of `a [B, m, n]`: returns the updated
/// matrix (reflector stored below the diagonal, beta on it, trailing columns
/// transformed) and tau `[B]`.
fn qr_step(b: &mut Builder, a: Value, i: Value) -> Result<(Value, Value)> {
    let s = b.shape(a).to_vec();
    let (bb, m) = (s[0], s[1]);
    let rows = iota(b, &s, 1)?;
    let cols = iota(b, &s, 2)?;
    let is_col = cmp_k(b, cols, i, CompareDir::Eq)?;
    let col = keep(b, is_col, a)?;
    let col = b.reduce_sum(col, &[2])?; // [B, m]
    let r1 = iota(b, &[bb, m], 1)?;
    let at_i = cmp_k(b, r1, i, CompareDir::Eq)?;
    let below = cmp_k(b, r1, i, CompareDir::Gt)?;
    let alpha = keep(b, at_i, col)?;
    let alpha = b.reduce_sum(alpha, &[1])?; // [B]
    let x = keep(b, below, col)?;
    let cx = conj(b, x)?;
    let x2 = b.mul(x, cx)?;
    let xn2 = b.reduce_sum(x2, &[1])?;
    let cplx = b.dtype(a).is_complex();
    // zlarfg: beta = -sign(re alpha) |(alpha, x)|, real; tau = (beta - alpha) / beta.
    let (ar, ai, xn2) = if cplx { (b.real(alpha)?, b.imag(alpha)?, b.real(xn2)?) } else { (alpha, alpha, xn2) };
    let ar2 = b.mul(ar, ar)?;
    let mut h = b.add(ar2, xn2)?;
    let zero = b.splat_like(ar, 0.0)?;
    let mut nz = b.compare(xn2, zero, CompareDir::Gt)?;
    if cplx {
        let ai2 = b.mul(ai, ai)?;
        h = b.add(h, ai2)?;
        let has_im = b.compare(ai, zero, CompareDir::Ne)?;
        nz = b.or(nz, has_im)?;
    }
    let h = b.sqrt(h)?;
    let pos = b.compare(ar, zero, CompareDir::Ge)?;
    let nh = b.neg(h)?;
    let beta = b.select(pos, nh, h)?;
    let beta = if cplx { b.convert(beta, b.dtype(a))? } else { beta };
    let zero = b.splat_like(alpha, 0.0)?;
    let one = b.splat_like(alpha, 1.0)?;
    let bma = b.sub(beta, alpha)?;
    let tau = b.div(bma, beta)?;
    let tau = b.select(nz, tau, zero)?;
    let amb = b.sub(alpha, beta)?;
    let scale = b.div(one, amb)?;
    let scale = b.select(nz, scale, zero)?;
    let beta = b.select(nz, beta, alpha)?;
    // v: 1 at i, x * scale below, 0 above.
    let sc = bc(b, scale, &[bb, m], &[0])?;
    let xv = b.mul(x, sc)?;
    let ones = b.splat_like(xv, 1.0)?;
    let v = b.select(at_i, ones, xv)?;
    // Trailing columns: A = H^H A = A - conj(tau) v (v^H A).
    let cv = conj(b, v)?;
    let w = b.dot_general(cv, a, &[0], &[0], &[1], &[1], None)?; // [B, n]
    let vb = bc(b, v, &s, &[0, 1])?;
    let wb = bc(b, w, &s, &[0, 2])?;
    let ctau = conj(b, tau)?;
    let tb = bc(b, ctau, &s, &[0])?;
    let vw = b.mul(vb, wb)?;
    let tvw = b.mul(tb, vw)?;
    let upd = b.sub(a, tvw)?;
    let right = cmp_k(b, cols, i, CompareDir::Gt)?;
    let out = b.select(right, upd, a)?;
    // Column i: beta on the diagonal, v below, rows above unchanged.
    let on_diag = cmp_k(b, rows, i, CompareDir::Eq)?;
    let on_diag = b.and(on_diag, is_col)?;
    let under = cmp_k(b, rows, i, CompareDir::Gt)?;
    let under = b.and(under, is_col)?;
    let betab = bc(b, beta, &s, &[0])?;
    let out = b.select(on_diag, betab, out)?;
    let out = b.select(under, vb, out)?;
    Ok((out, tau))
}

/// dgeqrf of `a [B, m, n]`: (packed reflectors and R, tau `[B, min(m, n)]`).
pub(super) fn geqrf3(b: &mut Builder, a: Value) -> Result<(Value, Value)> {
    let s = b.shape(a).to_vec();
    let (bb, k) = (s[0], s[1].min(s[2]));
    let dt = b.dtype(a);
    let tau0 = b.splat(dt, 0.0, &[bb, k])?;
    if k == 0 || bb == 0 {
        return Ok((a, tau0));
    }
    // Work on a / 2^e (exact): R scales back, reflectors and tau do not.
    let sc = pow2_scale(b, a)?;
    let a = div_batch(b, a, sc)?;
    let i0 = c64(b, 0);
    let out = b.while_loop(
        &[i0, a, tau0],
        |r, c| {
            let kk = c64(r, k);
            Ok(r.compare(c[0], kk, CompareDir::Lt)?)
        },
        |r, c| -> Result<Vec<Value>> {
            let (i, a, tau) = (c[0], c[1], c[2]);
            let (a, t) = qr_step(r, a, i)?;
            let ti = iota(r, &[bb, k], 1)?;
            let at = cmp_k(r, ti, i, CompareDir::Eq)?;
            let tb = bc(r, t, &[bb, k], &[0])?;
            let tau = r.select(at, tb, tau)?;
            let one = c64(r, 1);
            Ok(vec![r.add(i, one)?, a, tau])
        },
    )?;
    let (rows, cols) = (iota(b, &s, 1)?, iota(b, &s, 2)?);
    let upper = b.compare(rows, cols, CompareDir::Le)?;
    let back = mul_batch(b, out[1], sc)?;
    Ok((b.select(upper, back, out[1])?, out[2]))
}

/// Applies the reflectors H_j = I - tau_j v_j v_j^H stored in the columns of
/// `v [B, r, k]` (unit diagonal implied, entries above ignored) to `c`:
/// from the left (`c [B, r, p]`: c = H c) or the right (`c [B, p, r]`:
/// c = c H), for j ascending or descending; `adjoint` applies H_j^H (tau
/// conjugated) instead. Uses the first `tau [B, t]` reflectors (t <= k).
pub(super) fn apply_reflectors(b: &mut Builder, v: Value, tau: Value, c: Value, left: bool, ascending: bool, adjoint: bool) -> Result<Value> {
    let tau = if adjoint { conj(b, tau)? } else { tau };
    let vs = b.shape(v).to_vec();
    let (bb, rr, kk) = (vs[0], vs[1], vs[2]);
    let t = b.shape(tau)[1];
    if t == 0 || bb == 0 || b.shape(c).iter().product::<i64>() == 0 {
        return Ok(c);
    }
    let i0 = c64(b, 0);
    let out = b.while_loop(
        &[i0, v, tau, c],
        |r, a| {
            let tt = c64(r, t);
            Ok(r.compare(a[0], tt, CompareDir::Lt)?)
        },
        |r, a| -> Result<Vec<Value>> {
            let (j, v, tau, c) = (a[0], a[1], a[2], a[3]);
            let idx = if ascending {
                j
            } else {
                let last = c64(r, t - 1);
                r.sub(last, j)?
            };
            let cols = iota(r, &[bb, rr, kk], 2)?;
            let m = cmp_k(r, cols, idx, CompareDir::Eq)?;
            let vj = keep(r, m, v)?;
            let vj = r.reduce_sum(vj, &[2])?; // [B, r]
            let r1 = iota(r, &[bb, rr], 1)?;
            let at = cmp_k(r, r1, idx, CompareDir::Eq)?;
            let below = cmp_k(r, r1, idx, CompareDir::Gt)?;
            let vj = keep(r, below, vj)?;
            let ones = r.splat_like(vj, 1.0)?;
            let vj = r.select(at, ones, vj)?;
            let ti = iota(r, &[bb, t], 1)?;
            let tm = cmp_k(r, ti, idx, CompareDir::Eq)?;
            let tj = keep(r, tm, tau)?;
            let tj = r.reduce_sum(tj, &[1])?; // [B]
            let cs = r.shape(c).to_vec();
            // Left: c -= tau v (v^H c); right: c -= tau (c v) v^H.
            let cvj = conj(r, vj)?;
            let (vb, wb) = if left {
                let w = r.dot_general(cvj, c, &[0], &[0], &[1], &[1], None)?; // [B, p]
                (bc(r, vj, &cs, &[0, 1])?, bc(r, w, &cs, &[0, 2])?)
            } else {
                let w = r.dot_general(c, vj, &[0], &[0], &[2], &[1], None)?; // [B, p]
                (bc(r, cvj, &cs, &[0, 2])?, bc(r, w, &cs, &[0, 1])?)
            };
            let tb = bc(r, tj, &cs, &[0])?;
            let vw = r.mul(vb, wb)?;
            let tvw = r.mul(tb, vw)?;
            let c = r.sub(c, tvw)?;
            let one = c64(r, 1);
            Ok(vec![r.add(j, one)?, v, tau, c])
        },
    )?;
    Ok(out[3])
}

/// Q `[B, m, n]` = first n columns of H_0 ... H_{t-1} (dorgqr).
pub(super) fn orgqr3(b: &mut Builder, v: Value, tau: Value) -> Result<Value> {
    let s = b.shape(v).to_vec();
    let dt = b.dtype(v);
    let e = eye3(b, dt, s[0], s[1], s[2])?;
    apply_reflectors(b, v, tau, e, true, false, false)
}

/// geqrf(self) -> (a, tau)
pub(super) fn geqrf(lx: &mut Lower, args: &Args) -> R {
    let a = args.tensor(0)?;
    check_matrix(lx, a, "A")?;
    let (a3, batch) = to3(lx.b, a.value)?;
    let (p, tau) = geqrf3(lx.b, a3)?;
    Ok(vec![from_batch(lx.b, p, &batch)?, from_batch(lx.b, tau, &batch)?])
}

/// linalg_qr(A, mode="reduced") -> (Q, R)
pub(super) fn linalg_qr(lx: &mut Lower, args: &Args) -> R {
    let a = args.tensor(0)?;
    check_matrix(lx, a, "A")?;
    let mode = args.opt_str(1).unwrap_or("reduced").to_string();
    if !matches!(mode.as_str(), "reduced" | "complete" | "r") {
        bail!(Runtime, "qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', or 'complete'");
    }
    let r = a.shape.len();
    let (m, n) = (a.shape[r - 2], a.shape[r - 1]);
    let k = m.min(n);
    let (a3, batch) = to3(lx.b, a.value)?;
    let bb = lx.shape(a3)[0];
    let (p, tau) = geqrf3(lx.b, a3)?;
    let rows = if mode == "complete" { m } else { k };
    let rm = lx.b.slice(p, &[0, 0, 0], &[bb, rows, n], &[1, 1, 1])?;
    let rm = triu3(lx.b, rm)?;
    let rm = from_batch(lx.b, rm, &batch)?;
    if mode == "r" {
        let q = lx.full(a.dtype, 0.0, &[0])?;
        return Ok(vec![q, rm]);
    }
    let v = lx.b.slice(p, &[0, 0, 0], &[bb, m, k], &[1, 1, 1])?;
    let cols = if mode == "complete" { m } else { k };
    let e = eye3(lx.b, a.dtype, bb, m, cols)?;
    let q = apply_reflectors(lx.b, v, tau, e, true, false, false)?;
    Ok(vec![from_batch(lx.b, q, &batch)?, rm])
}

/// linalg_householder_product(input [.., m, n], tau [.., k]) -> Q [.., m, n]
pub(super) fn linalg_householder_product(lx: &mut Lower, args: &Args) -> R {
    let (a, tau) = (args.tensor(0)?, args.tensor(1)?);
    check_matrix(lx, a, "input")?;
    let r = a.shape.len();
    let (m, n) = (a.shape[r - 2], a.shape[r - 1]);
    if m < n {
        bail!(Runtime, "{}: input.shape[-2] must be greater than or equal to input.shape[-1]", lx.op);
    }
    if tau.shape.len() != r - 1 || tau.shape[..r - 2] != a.shape[..r - 2] {
        bail!(Runtime, "{}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got {:?} and {:?}", lx.op, tau.shape, a.shape);
    }
    if tau.shape[r - 2] > n {
        bail!(Runtime, "{}: input.shape[-1] must be greater than or equal to tau.shape[-1]", lx.op);
    }
    if tau.dtype != a.dtype {
        bail!(Runtime, "{}: tau dtype {:?} does not match input dtype {:?}", lx.op, tau.dtype, a.dtype);
    }
    let (a3, batch) = to3(lx.b, a.value)?;
    let bb = lx.shape(a3)[0];
    let t2 = lx.b.reshape(tau.value, &[bb, tau.shape[r - 2]])?;
    let q = orgqr3(lx.b, a3, t2)?;
    Ok(vec![from_batch(lx.b, q, &batch)?])
}

/// ormqr(self [.., mn, k], input2=tau [.., t], input3=other [.., m, n],
/// left=True, transpose=False): op(Q) @ other or other @ op(Q).
pub(super) fn ormqr(lx: &mut Lower, args: &Args) -> R {
    let (a, tau, c) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    let (left, trans) = (args.bool_or(3, true)?, args.bool_or(4, false)?);
    check_matrix(lx, a, "input")?;
    check_matrix(lx, c, "other")?;
    let r = a.shape.len();
    if c.shape.len() != r || tau.shape.len() != r - 1 {
        bail!(Runtime, "{}: input, tau and other must have matching ranks, got {:?}, {:?} and {:?}", lx.op, a.shape, tau.shape, c.shape);
    }
    if c.shape[..r - 2] != a.shape[..r - 2] || tau.shape[..r - 2] != a.shape[..r - 2] {
        bail!(Runtime, "{}: Expected batch dimensions of other and tau to be equal to input.shape[:-2], got {:?}, {:?} and {:?}", lx.op, a.shape, tau.shape, c.shape);
    }
    let other_dim = if left { c.shape[r - 2] } else { c.shape[r - 1] };
    if a.shape[r - 2] != other_dim {
        bail!(Runtime, "{}: input.shape[-2] must be equal to other.shape[{}], got {:?} and {:?}", lx.op, if left { -2 } else { -1 }, a.shape, c.shape);
    }
    if tau.shape[r - 2] != a.shape[r - 1].min(other_dim) {
        bail!(Runtime, "torch.ormqr: tau.shape[-1] must be equal to min(other.shape[{}], input.shape[-1])", if left { -2 } else { -1 });
    }
    if tau.dtype != a.dtype || c.dtype != a.dtype {
        bail!(Runtime, "{}: Expected input, tau and other to have the same dtype, got {:?}, {:?} and {:?}", lx.op, a.dtype, tau.dtype, c.dtype);
    }
    let (a3, batch) = to3(lx.b, a.value)?;
    let bb = lx.shape(a3)[0];
    let t2 = lx.b.reshape(tau.value, &[bb, tau.shape[r - 2]])?;
    let (c3, _) = to3(lx.b, c.value)?;
    // Q = H_0 .. H_{t-1}: Q C and C Q^H apply the last reflector first;
    // `transpose` means Q^H (= H_{t-1}^H .. H_0^H) for complex inputs.
    let ascending = left == trans;
    let out = apply_reflectors(lx.b, a3, t2, c3, left, ascending, trans)?;
    Ok(vec![from_batch(lx.b, out, &batch)?])
}
