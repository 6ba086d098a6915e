//! _ctc_loss and _ctc_loss_backward (the IntList overloads the composite
//! torch.ctc_loss calls): the alpha/beta recursions of Graves et al. as
//! while loops over time, vectorized over batch and extended-target states,
//! with PyTorch's CPU formulas (log-sum-exp with a max shift that is 0 when
//! every term is -inf). Unwritten log_alpha entries hold -inf.
use stablehlo::{Builder, CompareDir, DType, GatherDims, ScatterDims, Value};

use super::R;
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::{LowerError, Result};

const NEG_INF: f64 = f64::NEG_INFINITY;

/// What forward and backward share. `sp` = 2 * max target length + 1.
struct Ctc {
    t: i64,
    n: i64,
    c: i64,
    sp: i64,
    il: Vec<i64>,
    tl: Vec<i64>,
    /// (T, N, C) log-probabilities.
    lp: Value,
    /// (N * sp) flat class index `b * C + l'[b, s]`.
    flat_idx: Value,
    /// (T, N, sp): `lp[t, b, l'[b, s]]`.
    lp_ext: Value,
    /// (N, sp) i1: `l'[b, s - 2] != l'[b, s]` and s > 1.
    skip_fwd: Value,
    /// (N, sp) i1: `l'[b, s + 2] != l'[b, s]` and s < 2L - 1.
    skip_bwd: Value,
}

fn bool_const(lx: &mut Lower, shape: &[i64], f: impl Fn(&[i64]) -> bool) -> Result<Value> {
    let n: i64 = shape.iter().product();
    let mut data = Vec::with_capacity(n as usize);
    let mut idx = vec![0i64; shape.len()];
    for _ in 0..n {
        data.push(f(&idx) as i64);
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let v = lx.b.constant_tensor_i64(DType::I64, shape, &data)?;
    lx.cast(v, DType::Bool)
}

/// (log_probs, targets, input_lengths, target_lengths) at `first`.
fn setup(lx: &mut Lower, args: &Args, first: usize, blank: i64) -> Result<Ctc> {
    let lpa = args.tensor(first)?.clone();
    let tg = args.tensor(first + 1)?.clone();
    let (Ok(il), Ok(tl)) = (args.ints(first + 2), args.ints(first + 3)) else {
        bail!(NotImplemented, "{}: only integer-list input_lengths/target_lengths are lowered", lx.op);
    };
    if lpa.shape.len() != 3 {
        bail!(Runtime, "{}: log_probs must be 3-D (T, N, C), got {:?}", lx.op, lpa.shape);
    }
    if !lpa.dtype.is_float() {
        return Err(crate::ops::elementwise::not_for("ctc_loss_cpu", lpa.dtype));
    }
    let (t, n, c) = (lpa.shape[0], lpa.shape[1], lpa.shape[2]);
    if blank < 0 || blank >= c {
        bail!(Runtime, "{}: blank must be in label range", lx.op);
    }
    if il.len() as i64 != n || tl.len() as i64 != n {
        bail!(Runtime, "{}: input_lengths and target_lengths must have batch_size ({n}) entries", lx.op);
    }
    if let Some(&bad) = il.iter().find(|&&x| x > t || x < 0) {
        bail!(Runtime, "{}: Expected input_lengths to have value at most {t}, but got value {bad} (while checking arguments for ctc_loss_cpu)", lx.op);
    }
    let max_l = tl.iter().copied().max().unwrap_or(0).max(0);
    let sp = 2 * max_l + 1;
    // Targets l[b, j] (N, max_l) as i64.
    let tv = lx.cast(tg.value, DType::I64)?;
    let labels = if max_l == 0 {
        None
    } else if tg.shape.len() == 2 {
        if tg.shape[0] != n || tg.shape[1] < max_l {
            bail!(Runtime, "{}: Expected targets of shape (batch_size={n}, >= {max_l}), got {:?}", lx.op, tg.shape);
        }
        Some(lx.b.slice(tv, &[0, 0], &[n, max_l], &[1, 1])?)
    } else {
        let total: i64 = tl.iter().sum();
        if tg.shape != [total] {
            bail!(Runtime, "{}: Expected concatenated targets of size {total}, got {:?}", lx.op, tg.shape);
        }
        let mut idx = Vec::new();
        let mut off = 0;
        for &l in &tl {
            for j in 0..max_l {
                idx.push(off + j.min((l - 1).max(0)).min(total - 1).max(0));
            }
            off += l;
        }
        let iv = lx.b.constant_tensor_i64(DType::I64, &[n * max_l, 1], &idx)?;
        let dims = GatherDims::points_1d();
        let g = lx.b.gather(tv, iv, &dims, &[1], false)?;
        Some(lx.b.reshape(g, &[n, max_l])?)
    };
    // l'[b, s]: blank at even s, l[b, (s - 1) / 2] at odd s.
    let blank_col = lx.b.splat_i64(DType::I64, blank, &[n, 1])?;
    let tp = match labels {
        None => blank_col,
        Some(l) => {
            let l3 = lx.b.reshape(l, &[n, max_l, 1])?;
            let b3 = lx.b.splat_i64(DType::I64, blank, &[n, max_l, 1])?;
            let pairs = lx.b.concatenate(&[b3, l3], 2)?;
            let pairs = lx.b.reshape(pairs, &[n, 2 * max_l])?;
            lx.b.concatenate(&[pairs, blank_col], 1)?
        }
    };
    let ok_lo = lx.b.splat_i64(DType::I64, 0, &[n, sp])?;
    let ok_hi = lx.b.splat_i64(DType::I64, c, &[n, sp])?;
    let a = lx.b.compare(tp, ok_lo, CompareDir::Lt)?;
    let b = lx.b.compare(tp, ok_hi, CompareDir::Ge)?;
    let bad = lx.b.or(a, b)?;
    let bad = lx.b.reduce_or(bad, &[0, 1])?;
    lx.check(bad, format!("{}: target index out of range (number of classes {c})", lx.op));
    let clamped = lx.b.clamp(ok_lo, tp, ok_hi)?;
    let rows = lx.b.iota(DType::I64, &[n, sp], 0)?;
    let cc = lx.b.splat_i64(DType::I64, c, &[n, sp])?;
    let rc = lx.b.mul(rows, cc)?;
    let flat = lx.b.add(rc, clamped)?;
    let flat_idx = lx.b.reshape(flat, &[n * sp])?;
    let lp = lpa.value;
    let lp2 = lx.b.reshape(lp, &[t, n * c])?;
    let fi = lx.b.reshape(flat_idx, &[n * sp, 1])?;
    let dims = columns_by_index();
    let lp_ext = lx.b.gather(lp2, fi, &dims, &[t, 1], false)?;
    let lp_ext = lx.b.reshape(lp_ext, &[t, n, sp])?;
    // Skip transitions: compare l' with itself shifted by two.
    let pad = lx.b.constant_i64(DType::I64, -1);
    let sh_r = lx.b.pad(tp, pad, &[0, 2], &[0, 0], &[0, 0])?;
    let prev2 = lx.b.slice(sh_r, &[0, 0], &[n, sp], &[1, 1])?;
    let ne = lx.b.compare(prev2, tp, CompareDir::Ne)?;
    let far = bool_const(lx, &[n, sp], |i| i[1] > 1)?;
    let skip_fwd = lx.b.and(ne, far)?;
    let sh_l = lx.b.pad(tp, pad, &[0, 0], &[0, 2], &[0, 0])?;
    let next2 = lx.b.slice(sh_l, &[0, 2], &[n, sp + 2], &[1, 1])?;
    let ne = lx.b.compare(next2, tp, CompareDir::Ne)?;
    let tl2 = tl.clone();
    let near = bool_const(lx, &[n, sp], |i| i[1] < 2 * tl2[i[0] as usize] - 1)?;
    let skip_bwd = lx.b.and(ne, near)?;
    Ok(Ctc { t, n, c, sp, il, tl, lp, flat_idx, lp_ext, skip_fwd, skip_bwd })
}

/// `log(exp(a - m) + exp(b - m) + exp(c - m)) + m`, m the max (0 if all -inf).
fn lse3(lx: &mut Lower, a: Value, b: Value, c: Value) -> Result<Value> {
    let m = lx.b.max(a, b)?;
    let m = lx.b.max(m, c)?;
    let ninf = lx.full_like(m, NEG_INF)?;
    let is_ninf = lx.b.compare(m, ninf, CompareDir::Eq)?;
    let zero = lx.full_like(m, 0.0)?;
    let m = lx.b.select(is_ninf, zero, m)?;
    let mut s = lx.full_like(m, 0.0)?;
    for v in [a, b, c] {
        let d = lx.b.sub(v, m)?;
        let e = lx.b.exp(d)?;
        s = lx.b.add(s, e)?;
    }
    let l = lx.b.log(s)?;
    Ok(lx.b.add(l, m)?)
}

/// `v` (N, sp) shifted along s by `by` (positive: v[s - by]), -inf filled.
fn shift(lx: &mut Lower, v: Value, by: i64) -> Result<Value> {
    let (n, sp) = (lx.shape(v)[0], lx.shape(v)[1]);
    let ninf = lx.b.constant_f64(lx.dtype(v), NEG_INF);
    if by > 0 {
        let p = lx.b.pad(v, ninf, &[0, by], &[0, 0], &[0, 0])?;
        Ok(lx.b.slice(p, &[0, 0], &[n, sp], &[1, 1])?)
    } else {
        let p = lx.b.pad(v, ninf, &[0, 0], &[0, -by], &[0, 0])?;
        Ok(lx.b.slice(p, &[0, -by], &[n, sp - by], &[1, 1])?)
    }
}

/// Runs the recursion over t (ascending from 1, or descending from T-1) and
/// returns the (N, T, sp) table. Per step the row is `rec` where `upd[t]`,
/// `init` where `start[t]`, else -inf (`upd`/`start` are (T, N, 1) masks).
fn recurse(lx: &mut Lower, cx: &Ctc, first: Value, forward: bool, start: Value, upd: Value) -> Result<Value> {
    let (t, n, sp) = (cx.t, cx.n, cx.sp);
    let dt = lx.dtype(cx.lp);
    let ninf = lx.full(dt, NEG_INF, &[n, t, sp])?;
    let row = lx.b.reshape(first, &[n, 1, sp])?;
    let z = lx.b.constant_i64(DType::I64, 0);
    let t0 = lx.b.constant_i64(DType::I64, if forward { 0 } else { t - 1 });
    let table = lx.b.dynamic_update_slice(ninf, row, &[z, t0, z])?;
    let t1 = lx.b.constant_i64(DType::I64, if forward { 1 } else { t - 2 });
    let skip = if forward { cx.skip_fwd } else { cx.skip_bwd };
    let tl2: Vec<i64> = cx.tl.iter().map(|l| 2 * l).collect();
    let init_mask = bool_const(lx, &[n, sp], |i| {
        let l2 = tl2[i[0] as usize];
        i[1] == l2 || i[1] == l2 - 1
    })?;
    let op = lx.op.to_string();
    let out = lx.b.while_loop::<LowerError>(
        &[t1, first, table, cx.lp_ext, skip, start, upd, init_mask],
        |r, c| {
            let lim = r.constant_i64(DType::I64, if forward { t } else { 0 });
            let dir = if forward { CompareDir::Lt } else { CompareDir::Ge };
            Ok(r.compare(c[0], lim, dir)?)
        },
        |r: &mut Builder, c| {
            let l = &mut Lower::new(r, &op);
            let z = l.b.constant_i64(DType::I64, 0);
            let lp_t = l.b.dynamic_slice(c[3], &[c[0], z, z], &[1, n, sp])?;
            let lp_t = l.b.reshape(lp_t, &[n, sp])?;
            let dir = if forward { 1 } else { -1 };
            let v2 = shift(l, c[1], dir)?;
            let v3 = shift(l, c[1], 2 * dir)?;
            let ninf = l.full(dt, NEG_INF, &[n, sp])?;
            let v3 = l.b.select(c[4], v3, ninf)?;
            let s = lse3(l, c[1], v2, v3)?;
            let rec = l.b.add(s, lp_t)?;
            let mut pick = |m: Value| -> Result<Value> {
                let m = l.b.dynamic_slice(m, &[c[0], z, z], &[1, n, 1])?;
                let m = l.b.reshape(m, &[n])?;
                Ok(l.b.broadcast_in_dim(m, &[n, sp], &[0])?)
            };
            let st = pick(c[5])?;
            let up = pick(c[6])?;
            let init = l.b.select(c[7], lp_t, ninf)?;
            let new = l.b.select(up, rec, ninf)?;
            let new = l.b.select(st, init, new)?;
            let row = l.b.reshape(new, &[n, 1, sp])?;
            let table = l.b.dynamic_update_slice(c[2], row, &[z, c[0], z])?;
            let step = l.b.constant_i64(DType::I64, dir);
            let tn = l.b.add(c[0], step)?;
            Ok(vec![tn, new, table, c[3], c[4], c[5], c[6], c[7]])
        },
    )?;
    Ok(out[2])
}

/// Valid states (s <= 2L) and active steps (t < il), as constants.
fn valid_s(lx: &mut Lower, cx: &Ctc) -> Result<Value> {
    let tl = cx.tl.clone();
    bool_const(lx, &[cx.n, cx.sp], move |i| i[1] <= 2 * tl[i[0] as usize])
}

/// _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0,
/// zero_infinity=False) -> (neg_log_likelihood (N), log_alpha (N, T, 2S+1))
pub(super) fn ctc_loss(lx: &mut Lower, args: &Args) -> R {
    let blank = args.int_or(4, 0)?;
    let cx = setup(lx, args, 0, blank)?;
    let (t, n, sp) = (cx.t, cx.n, cx.sp);
    let dt = lx.dtype(cx.lp);
    let vs = valid_s(lx, &cx)?;
    let il = cx.il.clone();
    let lp0 = lx.b.slice(cx.lp_ext, &[0, 0, 0], &[1, n, sp], &[1, 1, 1])?;
    let lp0 = lx.b.reshape(lp0, &[n, sp])?;
    let il0 = il.clone();
    let first_ok = bool_const(lx, &[n, sp], move |i| i[1] < 2 && il0[i[0] as usize] > 0)?;
    let first_ok = lx.b.and(first_ok, vs)?;
    let ninf = lx.full(dt, NEG_INF, &[n, sp])?;
    let first = lx.b.select(first_ok, lp0, ninf)?;
    let none = bool_const(lx, &[t.max(1), n, 1], |_| false)?;
    let il1 = il.clone();
    let upd = bool_const(lx, &[t.max(1), n, 1], move |i| i[0] < il1[i[1] as usize])?;
    let vs3 = lx.b.broadcast_in_dim(vs, &[n, t.max(1), sp], &[0, 2])?;
    let la = if t > 0 { recurse(lx, &cx, first, true, none, upd)? } else { lx.full(dt, NEG_INF, &[n, 0, sp])? };
    let la = if t > 0 {
        let ninf3 = lx.full(dt, NEG_INF, &[n, t, sp])?;
        lx.b.select(vs3, la, ninf3)?
    } else {
        la
    };
    // The row at t = il - 1, then its last one or two states.
    let il2 = il.clone();
    let last_t = bool_const(lx, &[n, t, sp], move |i| i[1] == il2[i[0] as usize] - 1)?;
    let ninf3 = lx.full(dt, NEG_INF, &[n, t, sp])?;
    let row = lx.b.select(last_t, la, ninf3)?;
    let row = lx.b.reduce_max(row, &[1])?;
    let pick = |lx: &mut Lower, off: i64| -> Result<Value> {
        let tl = cx.tl.clone();
        let m = bool_const(lx, &[n, sp], move |i| i[1] == 2 * tl[i[0] as usize] - off)?;
        let ninf = lx.full(dt, NEG_INF, &[n, sp])?;
        let v = lx.b.select(m, row, ninf)?;
        Ok(lx.b.reduce_max(v, &[1])?)
    };
    let l1 = pick(lx, 0)?;
    let l2 = pick(lx, 1)?;
    let ninf1 = lx.full(dt, NEG_INF, &[n])?;
    let two = lse3(lx, l1, l2, ninf1)?;
    let tl = cx.tl.clone();
    let has_l = bool_const(lx, &[n], move |i| tl[i[0] as usize] > 0)?;
    let ll = lx.b.select(has_l, two, l1)?;
    // No input steps: likelihood 1 for an empty target, else 0.
    let (il3, tl3) = (il.clone(), cx.tl.clone());
    let empty_in = bool_const(lx, &[n], move |i| il3[i[0] as usize] == 0)?;
    let empty_val: Vec<f64> = (0..n as usize).map(|b| if tl3[b] == 0 { 0.0 } else { NEG_INF }).collect();
    let ev = lx.b.constant_tensor_f64(dt, &[n], &empty_val)?;
    let ll = lx.b.select(empty_in, ev, ll)?;
    Ok(vec![lx.b.neg(ll)?, la])
}

/// _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths,
/// neg_log_likelihood, log_alpha, blank, zero_infinity=False) -> grad (T, N, C)
pub(super) fn ctc_loss_backward(lx: &mut Lower, args: &Args) -> R {
    let blank = args.int(7)?;
    let zero_inf = args.bool_or(8, false)?;
    let cx = setup(lx, args, 1, blank)?;
    let (t, n, c, sp) = (cx.t, cx.n, cx.c, cx.sp);
    let dt = lx.dtype(cx.lp);
    if t == 0 || n == 0 {
        return Ok(vec![lx.full(dt, 0.0, &[t, n, c])?]);
    }
    let gr = lx.cast(args.tensor(0)?.value, dt)?;
    let gr = lx.b.reshape(gr, &[n])?;
    let nll = lx.cast(args.tensor(5)?.value, dt)?;
    let nll = lx.b.reshape(nll, &[n])?;
    let la = lx.cast(args.tensor(6)?.value, dt)?;
    let vs = valid_s(lx, &cx)?;
    let il = cx.il.clone();
    let il1 = il.clone();
    let start = bool_const(lx, &[t, n, 1], move |i| i[0] == il1[i[1] as usize] - 1)?;
    let il2 = il.clone();
    let upd = bool_const(lx, &[t, n, 1], move |i| i[0] < il2[i[1] as usize] - 1)?;
    // Row T-1 seeds the loop: the init row for inputs of full length.
    let lp_last = lx.b.slice(cx.lp_ext, &[t - 1, 0, 0], &[t, n, sp], &[1, 1, 1])?;
    let lp_last = lx.b.reshape(lp_last, &[n, sp])?;
    let (tl, il3) = (cx.tl.clone(), il.clone());
    let init_last = bool_const(lx, &[n, sp], move |i| {
        let l2 = 2 * tl[i[0] as usize];
        il3[i[0] as usize] == t && (i[1] == l2 || i[1] == l2 - 1)
    })?;
    let ninf = lx.full(dt, NEG_INF, &[n, sp])?;
    let first = lx.b.select(init_last, lp_last, ninf)?;
    let lb = recurse(lx, &cx, first, false, start, upd)?;
    let vs3 = lx.b.broadcast_in_dim(vs, &[n, t, sp], &[0, 2])?;
    let ab = lx.b.add(la, lb)?;
    let ninf3 = lx.full(dt, NEG_INF, &[n, t, sp])?;
    let ab = lx.b.select(vs3, ab, ninf3)?;
    // log-sum-exp of alpha * beta per class: scatter max, then sum of exp.
    let ab = lx.b.transpose(ab, &[1, 0, 2])?;
    let ab = lx.b.reshape(ab, &[t, n * sp])?;
    let idx = lx.b.reshape(cx.flat_idx, &[n * sp, 1])?;
    let sdims = ScatterDims {
        update_window_dims: vec![0],
        inserted_window_dims: vec![1],
        scatter_dims_to_operand_dims: vec![1],
        index_vector_dim: 1,
        ..Default::default()
    };
    let init = lx.full(dt, NEG_INF, &[t, n * c])?;
    let mx = lx.b.scatter(init, idx, ab, &sdims, |rb, cur, u| Ok(vec![rb.max(cur[0], u[0])?]))?;
    let ninf2 = lx.full(dt, NEG_INF, &[t, n * c])?;
    let zero2 = lx.full(dt, 0.0, &[t, n * c])?;
    let empty = lx.b.compare(mx, ninf2, CompareDir::Eq)?;
    let mx = lx.b.select(empty, zero2, mx)?;
    let gdims = columns_by_index();
    let mg = lx.b.gather(mx, idx, &gdims, &[t, 1], false)?;
    let d = lx.b.sub(ab, mg)?;
    let e = lx.b.exp(d)?;
    let se = lx.b.scatter(zero2, idx, e, &sdims, |rb, cur, u| Ok(vec![rb.add(cur[0], u[0])?]))?;
    let lse = lx.b.log(se)?;
    let lcab = lx.b.add(lse, mx)?;
    let lcab = lx.b.reshape(lcab, &[t, n, c])?;
    // (exp(lp) - exp(lcab + nll - lp)) * grad, zero past each input length.
    let lp = cx.lp;
    let nb = lx.b.broadcast_in_dim(nll, &[t, n, c], &[1])?;
    let x = lx.b.add(lcab, nb)?;
    let x = lx.b.sub(x, lp)?;
    let ex = lx.b.exp(x)?;
    let elp = lx.b.exp(lp)?;
    let dlt = lx.b.sub(elp, ex)?;
    let gb = lx.b.broadcast_in_dim(gr, &[t, n, c], &[1])?;
    let g = lx.b.mul(dlt, gb)?;
    let il4 = il.clone();
    let active = bool_const(lx, &[t, n, c], move |i| i[0] < il4[i[1] as usize])?;
    let active = if zero_inf {
        let inf = lx.full(dt, f64::INFINITY, &[t, n, c])?;
        let is_inf = lx.b.compare(nb, inf, CompareDir::Eq)?;
        let fin = lx.b.not(is_inf)?;
        lx.b.and(active, fin)?
    } else {
        active
    };
    let zeros = lx.full(dt, 0.0, &[t, n, c])?;
    Ok(vec![lx.b.select(active, g, zeros)?])
}

/// Gathers whole columns (axis 1) of a [T, K] operand at indices shaped [m, 1]: result [T, m].
fn columns_by_index() -> GatherDims {
    GatherDims {
        offset_dims: vec![0],
        collapsed_slice_dims: vec![1],
        operand_batching_dims: vec![],
        start_indices_batching_dims: vec![],
        start_index_map: vec![1],
        index_vector_dim: 1,
    }
}
