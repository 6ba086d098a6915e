//! `fractional_max_pool2d/3d(self, kernel_size, output_size, random_samples)`
//! -> (output, indices) and their backwards.
//!
//! Window starts follow ATen's `generate_intervals` exactly, in the input's
//! own float type (16-bit types round after each operation, as c10's Half
//! and BFloat16 arithmetic does): `int((i + u) * alpha) - int(u * alpha)`
//! with `alpha = (in - pool) / (out - 1)`, the last start `in - pool`. The
//! samples' last dim holds (w, h) for 2d and (t, h, w) for 3d. The max runs
//! over the window taps in row-major order, a later value winning when it is
//! larger or NaN (CPU's `val > max || isnan(val)`); indices are flat within
//! each plane. The backward scatter-adds grad_output at those indices.
use stablehlo::{CompareDir, DType, Value};

use super::{add_rows, take_rows, tname};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::reduce::acc;

type R = Result<Vec<Value>>;

/// Rounds `v` (compute type) to `dt` and back, for 16-bit arithmetic.
fn rnd(lx: &mut Lower, v: Value, dt: DType, ct: DType) -> Result<Value> {
    if dt == ct {
        return Ok(v);
    }
    let r = lx.b.convert(v, dt)?;
    Ok(lx.b.convert(r, ct)?)
}

/// Window starts `[N, C, out]` (i64) from the samples `u` (`[N, C]`, ct).
/// Sizes along the dim are (input, output, pool); types (input, compute).
fn intervals(lx: &mut Lower, u: Value, (dt, ct): (DType, DType), n_c: [i64; 2], (inp, out, pool): (i64, i64, i64)) -> Result<Value> {
    let shape = [n_c[0], n_c[1], out];
    let last = lx.b.splat_i64(DType::I64, inp - pool, &shape)?;
    if out <= 1 {
        return Ok(last);
    }
    let num = lx.full(ct, (inp - pool) as f64, &[])?;
    let num = rnd(lx, num, dt, ct)?;
    let den = lx.full(ct, (out - 1) as f64, &[])?;
    let den = rnd(lx, den, dt, ct)?;
    let alpha = lx.b.div(num, den)?;
    let alpha = rnd(lx, alpha, dt, ct)?;
    let alpha = lx.b.broadcast_in_dim(alpha, &shape, &[])?;
    let i = lx.b.iota(ct, &shape, 2)?;
    let i = rnd(lx, i, dt, ct)?;
    let ub = lx.b.broadcast_in_dim(u, &shape, &[0, 1])?;
    let a = lx.b.add(i, ub)?;
    let a = rnd(lx, a, dt, ct)?;
    let a = lx.b.mul(a, alpha)?;
    let a = rnd(lx, a, dt, ct)?;
    let b = lx.b.mul(ub, alpha)?;
    let b = rnd(lx, b, dt, ct)?;
    // Both products are non-negative: truncation is floor.
    let a = lx.b.floor(a)?;
    let b = lx.b.floor(b)?;
    let a = lx.b.convert(a, DType::I64)?;
    let b = lx.b.convert(b, DType::I64)?;
    let seq = lx.b.sub(a, b)?;
    let io = lx.b.iota(DType::I64, &shape, 2)?;
    let lastk = lx.b.splat_i64(DType::I64, out - 1, &shape)?;
    let is_last = lx.b.compare(io, lastk, CompareDir::Eq)?;
    Ok(lx.b.select(is_last, last, seq)?)
}

fn triple(lx: &Lower, v: Vec<i64>, k: usize, what: &str) -> Result<Vec<i64>> {
    match v.len() {
        1 => Ok(vec![v[0]; k]),
        l if l == k => Ok(v),
        _ => bail!(Runtime, "{}: {what} must either be a single Int or tuple of {k} Ints", lx.op),
    }
}

/// fractional_max_pool{2,3}d(self, kernel_size, output_size, random_samples)
pub(super) fn fractional_max_pool(lx: &mut Lower, args: &Args) -> R {
    let k = if lx.op.contains("3d") { 3 } else { 2 };
    let x = args.tensor(0)?.clone();
    let pool = triple(lx, args.ints(1)?, k, "kernel_size")?;
    let outs = triple(lx, args.ints(2)?, k, "output_size")?;
    let smp = args.tensor(3)?.clone();
    let rank = x.shape.len();
    if !(rank == k + 1 || rank == k + 2) || x.shape[rank - k - 1..].contains(&0) {
        bail!(Runtime, "{}: fractional_max_pool{k}d(): Expected {}D or {}D tensor, but got: {:?}", lx.op, k + 1, k + 2, x.shape);
    }
    if !x.dtype.is_float() {
        bail!(NotImplemented, "{}: \"fractional_max_pool{k}d_out_frame\" not implemented for '{}'", lx.op, tname(x.dtype));
    }
    let batched = rank == k + 2;
    let (n, ch) = if batched { (x.shape[0], x.shape[1]) } else { (1, x.shape[0]) };
    let ins = x.shape[rank - k..].to_vec();
    for d in 0..k {
        if outs[d] + pool[d] - 1 > ins[d] {
            bail!(Runtime, "{}: fractional_max_pool{k}d(): pool size {} too large relative to input size {} for output size {} (dim {d})", lx.op, pool[d], ins[d], outs[d]);
        }
    }
    if smp.shape != [n, ch, k as i64] {
        bail!(Runtime, "{}: fractional_max_pool{k}d(): expected random_samples of shape {:?}, got {:?}", lx.op, [n, ch, k as i64], smp.shape);
    }
    let mut out_shape: Vec<i64> = if batched { vec![n, ch] } else { vec![ch] };
    out_shape.extend(&outs);
    let total: i64 = n * ch * outs.iter().product::<i64>();
    if total == 0 {
        let v = lx.full(x.dtype, 0.0, &out_shape)?;
        let i = lx.full(DType::I64, 0.0, &out_shape)?;
        return Ok(vec![v, i]);
    }
    let dt = x.dtype;
    let ct = acc(dt);
    let sv = lx.cast(smp.value, ct)?;
    let full: Vec<i64> = [n, ch].iter().copied().chain(outs.iter().copied()).collect();
    let mut starts = Vec::new();
    for d in 0..k {
        // 2d samples are (w, h); 3d samples are (t, h, w).
        let si = if k == 2 { 1 - d as i64 } else { d as i64 };
        let u = lx.b.slice(sv, &[0, 0, si], &[n, ch, si + 1], &[])?;
        let u = lx.b.reshape(u, &[n, ch])?;
        let s = intervals(lx, u, (dt, ct), [n, ch], (ins[d], outs[d], pool[d]))?;
        starts.push(lx.b.broadcast_in_dim(s, &full, &[0, 1, 2 + d as i64])?);
    }
    let plane: i64 = ins.iter().product();
    let flat = lx.b.reshape(x.value, &[n * ch * plane])?;
    let nc = lx.b.iota(DType::I64, &full, 0)?;
    let chv = lx.b.splat_i64(DType::I64, ch, &full)?;
    let nc = lx.b.mul(nc, chv)?;
    let ci = lx.b.iota(DType::I64, &full, 1)?;
    let nc = lx.b.add(nc, ci)?;
    let pv = lx.b.splat_i64(DType::I64, plane, &full)?;
    let base = lx.b.mul(nc, pv)?;
    // All window taps at once along a new last dim: [N, C, out.., taps].
    let ntaps: i64 = pool.iter().product();
    let nd = full.len() as i64;
    let mut tfull = full.clone();
    tfull.push(ntaps);
    let keep: Vec<i64> = (0..nd).collect();
    let mut pidx: Option<Value> = None;
    let mut stride = plane;
    let mut inner = ntaps;
    for d in 0..k {
        stride /= ins[d];
        inner /= pool[d];
        // Row-major offset of each tap along dim d.
        let offs: Vec<i64> = (0..ntaps).map(|t| (t / inner) % pool[d]).collect();
        let o = lx.b.constant_tensor_i64(DType::I64, &[ntaps], &offs)?;
        let o = lx.b.broadcast_in_dim(o, &tfull, &[nd])?;
        let s = lx.b.broadcast_in_dim(starts[d], &tfull, &keep)?;
        let p = lx.b.add(s, o)?;
        let st = lx.b.splat_i64(DType::I64, stride, &tfull)?;
        let p = lx.b.mul(p, st)?;
        pidx = Some(match pidx {
            None => p,
            Some(a) => lx.b.add(a, p)?,
        });
    }
    let pidx = pidx.expect("k >= 2");
    let base = lx.b.broadcast_in_dim(base, &tfull, &keep)?;
    let gidx = lx.b.add(base, pidx)?;
    let vals = take_rows(lx, flat, gidx)?;
    let tap = lx.b.iota(DType::I64, &tfull, nd)?;
    // The preferred tap: any NaN (the last one), else the largest value
    // (the first one among equals), as CPU's sequential scan picks.
    let init_v = lx.b.constant_f64(dt, f64::NEG_INFINITY);
    let init_t = lx.b.constant_i64(DType::I64, i64::MAX);
    let init_p = lx.b.constant_i64(DType::I64, 0);
    let r = lx.b.reduce(&[vals, tap, pidx], &[init_v, init_t, init_p], &[nd], |b, l, r| {
        let (lv, lt, rv, rt) = (l[0], l[1], r[0], r[1]);
        let lnan = b.compare(lv, lv, CompareDir::Ne)?;
        let rnan = b.compare(rv, rv, CompareDir::Ne)?;
        let later = b.compare(lt, rt, CompareDir::Gt)?;
        let earlier = b.compare(lt, rt, CompareDir::Lt)?;
        let gt = b.compare(lv, rv, CompareDir::Gt)?;
        let eq = b.compare(lv, rv, CompareDir::Eq)?;
        let tie = b.and(eq, earlier)?;
        let plain = b.or(gt, tie)?;
        let both = b.and(lnan, rnan)?;
        let nan_pick = b.and(both, later)?;
        let not_r = b.not(rnan)?;
        let only_l = b.and(lnan, not_r)?;
        let either = b.or(lnan, rnan)?;
        let none = b.not(either)?;
        let plain = b.and(none, plain)?;
        let take = b.or(plain, only_l)?;
        let take = b.or(take, nan_pick)?;
        Ok(vec![b.select(take, l[0], r[0])?, b.select(take, l[1], r[1])?, b.select(take, l[2], r[2])?])
    })?;
    let (v, i) = (r[0], r[2]);
    Ok(vec![lx.b.reshape(v, &out_shape)?, lx.b.reshape(i, &out_shape)?])
}

/// fractional_max_pool{2,3}d_backward(grad_output, self, kernel_size,
/// output_size, indices): grad_output added at the per-plane indices.
pub(super) fn fractional_max_pool_backward(lx: &mut Lower, args: &Args) -> R {
    let k = if lx.op.contains("3d") { 3 } else { 2 };
    let g = args.tensor(0)?.clone();
    let x = args.tensor(1)?.clone();
    let ind = args.tensor(4)?.clone();
    if g.shape != ind.shape || g.shape.len() != x.shape.len() || x.shape.len() < k {
        bail!(Runtime, "{}: grad_output {:?} and indices {:?} do not match input {:?}", lx.op, g.shape, ind.shape, x.shape);
    }
    let lead = x.shape.len() - k;
    let planes: i64 = x.shape[..lead].iter().product();
    let p_in: i64 = x.shape[lead..].iter().product();
    let p_out: i64 = g.shape[lead..].iter().product();
    let a = acc(g.dtype);
    if planes * p_in == 0 || p_out == 0 {
        return Ok(vec![lx.full(x.dtype, 0.0, &x.shape)?]);
    }
    let gv = lx.cast(g.value, a)?;
    let gv = lx.b.reshape(gv, &[planes * p_out])?;
    let iv = lx.cast(ind.value, DType::I64)?;
    let iv = lx.b.reshape(iv, &[planes, p_out])?;
    let base = lx.b.iota(DType::I64, &[planes, p_out], 0)?;
    let pin = lx.b.splat_i64(DType::I64, p_in, &[planes, p_out])?;
    let base = lx.b.mul(base, pin)?;
    let flat = lx.b.add(base, iv)?;
    let flat = lx.b.reshape(flat, &[planes * p_out])?;
    let zeros = lx.full(a, 0.0, &[planes * p_in])?;
    let out = add_rows(lx, zeros, flat, gv)?;
    let out = lx.b.reshape(out, &x.shape)?;
    Ok(vec![lx.cast(out, x.dtype)?])
}
