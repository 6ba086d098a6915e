//! Counting ops: bincount (data-dependent length, read back first),
//! histogram (bin count or bin edges) and the ops torch.histogramdd is built
//! from. Bins are chosen as PyTorch's CPU kernel does: linear interpolation
//! corrected against the linspace edges for bin counts, a search over the
//! edges for given edges; the rightmost bin includes its right edge.
use stablehlo::{CompareDir, DType, GatherDims, ScatterDims, Value};

use super::R;
use crate::args::{Arg, Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::dtypes;
use crate::error::Result;
use crate::ops::elementwise::not_for;

fn bincount_input(lx: &Lower, args: &Args) -> Result<(TensorArg, i64)> {
    let t = args.tensor(0)?.clone();
    if t.shape.len() != 1 || t.dtype.is_float() || t.dtype == DType::Bool {
        if t.dtype.is_float() || t.dtype == DType::Bool {
            return Err(not_for("bincount_cpu", t.dtype));
        }
        bail!(Runtime, "{}: bincount only supports 1-d non-negative integral inputs.", lx.op);
    }
    let minlength = args.int_or(2, 0)?;
    if minlength < 0 {
        bail!(Runtime, "{}: minlength should be >= 0", lx.op);
    }
    if let Some(w) = args.opt_tensor(1) {
        if w.shape.len() != 1 || w.shape[0] != t.shape[0] {
            bail!(Runtime, "{}: weights should be 1-d and have the same length as input", lx.op);
        }
    }
    Ok((t, minlength))
}

/// The length of bincount's result: max(max(self) + 1, minlength).
pub(super) fn bincount_size(lx: &mut Lower, args: &Args) -> R {
    let (t, minlength) = bincount_input(lx, args)?;
    let ml = lx.b.constant_i64(DType::I64, minlength);
    if t.shape[0] == 0 {
        return Ok(vec![ml]);
    }
    let v = lx.cast(t.value, DType::I64)?;
    let m = lx.b.reduce_max(v, &[0])?;
    let one = lx.b.constant_i64(DType::I64, 1);
    let m = lx.b.add(m, one)?;
    Ok(vec![lx.b.max(m, ml)?])
}

/// Adds `upd` (n) into `init` at `slot` (n, i64); out-of-range slots drop.
fn scatter_add(lx: &mut Lower, init: Value, slot: Value, upd: Value) -> Result<Value> {
    let n = lx.shape(slot)[0];
    if n == 0 {
        return Ok(init);
    }
    let slot = lx.b.reshape(slot, &[n, 1])?;
    let dims = ScatterDims::points_1d();
    Ok(lx.b.scatter(init, slot, upd, &dims, |rb, cur, u| Ok(vec![rb.add(cur[0], u[0])?]))?)
}

/// bincount(self, weights?, minlength=0): i64 counts, or summed weights
/// (float32 for float32 weights, else float64).
pub(super) fn bincount(lx: &mut Lower, args: &Args) -> R {
    let (t, _) = bincount_input(lx, args)?;
    let Some(count) = lx.dynamic_size else { bail!(Runtime, "{}: size not computed (internal error)", lx.op) };
    let n = t.shape[0];
    let idx = lx.cast(t.value, DType::I64)?;
    if n > 0 {
        let zero = lx.b.splat_i64(DType::I64, 0, &[n])?;
        let neg = lx.b.compare(idx, zero, CompareDir::Lt)?;
        let neg = lx.b.reduce_or(neg, &[0])?;
        lx.check_runtime(neg, format!("{}: bincount only supports 1-d non-negative integral inputs.", lx.op));
    }
    let (out, upd) = match args.opt_tensor(1) {
        Some(w) => {
            let d = if w.dtype == DType::F32 { DType::F32 } else { DType::F64 };
            (d, lx.cast(w.value, d)?)
        }
        None => (DType::I64, lx.full(DType::I64, 1.0, &[n])?),
    };
    let init = lx.full(out, 0.0, &[count])?;
    Ok(vec![scatter_add(lx, init, idx, upd)?])
}

/// Element `i` of a 1-D value, as rank 0.
fn at(lx: &mut Lower, v: Value, i: i64) -> Result<Value> {
    let s = lx.b.slice(v, &[i], &[i + 1], &[1])?;
    Ok(lx.b.reshape(s, &[])?)
}

/// `v[idx]` for a 1-D `v` and 1-D i64 `idx` (indices clamped into range).
fn gather_1d(lx: &mut Lower, v: Value, idx: Value) -> Result<Value> {
    let m = lx.shape(idx)[0];
    let idx = lx.b.reshape(idx, &[m, 1])?;
    let dims = GatherDims::points_1d();
    Ok(lx.b.gather(v, idx, &dims, &[1], false)?)
}

fn bcast(lx: &mut Lower, v: Value, m: i64) -> Result<Value> {
    Ok(lx.b.broadcast_in_dim(v, &[m], &[])?)
}

/// The bin of each of the m values `col` among `edges` (sorted, E >= 2),
/// and whether it falls inside [edges[0], edges[E-1]] (NaN does not).
fn bin_of(lx: &mut Lower, col: Value, edges: Value, linear: bool) -> Result<(Value, Value)> {
    let m = lx.shape(col)[0];
    let e = lx.shape(edges)[0];
    let dt = lx.dtype(col);
    let left = at(lx, edges, 0)?;
    let right = at(lx, edges, e - 1)?;
    let (lb, rb) = (bcast(lx, left, m)?, bcast(lx, right, m)?);
    let ge = lx.b.compare(col, lb, CompareDir::Ge)?;
    let le = lx.b.compare(col, rb, CompareDir::Le)?;
    let inside = lx.b.and(ge, le)?;
    let i64s = |lx: &mut Lower, x: i64| lx.b.splat_i64(DType::I64, x, &[m]);
    let pos = if linear {
        // (x - left) * (E - 1) / (right - left), truncated; then the bin among
        // pos-1, pos, pos+1 whose edges hold x.
        let off = lx.b.sub(col, lb)?;
        let nb = lx.full(dt, (e - 1) as f64, &[m])?;
        let q = lx.b.mul(off, nb)?;
        let span = lx.b.sub(rb, lb)?;
        let q = lx.b.div(q, span)?;
        let z = lx.full(dt, 0.0, &[m])?;
        let top = lx.full(dt, e as f64, &[m])?;
        let q = lx.b.clamp(z, q, top)?;
        let pos = lx.b.convert(q, DType::I64)?;
        let (one, two) = (i64s(lx, 1)?, i64s(lx, 2)?);
        let zero = i64s(lx, 0)?;
        let pm1 = lx.b.sub(pos, one)?;
        let pos_min = lx.b.max(pm1, zero)?;
        let pp2 = lx.b.add(pos, two)?;
        let ev = i64s(lx, e)?;
        let pos_max = lx.b.min(pp2, ev)?;
        let last = i64s(lx, e - 1)?;
        let mut count = zero;
        for kk in 0..3 {
            let kv = i64s(lx, kk)?;
            let idx = lx.b.add(pos_min, kv)?;
            let in_win = lx.b.compare(idx, pos_max, CompareDir::Lt)?;
            let ci = lx.b.min(idx, last)?;
            let edge = gather_1d(lx, edges, ci)?;
            let below = lx.b.compare(edge, col, CompareDir::Le)?;
            let hit = lx.b.and(in_win, below)?;
            let hit = lx.cast(hit, DType::I64)?;
            count = lx.b.add(count, hit)?;
        }
        let p = lx.b.add(pos_min, count)?;
        lx.b.sub(p, one)?
    } else {
        // upper_bound over all edges, minus one.
        let eb = lx.b.broadcast_in_dim(edges, &[m, e], &[1])?;
        let cb = lx.b.broadcast_in_dim(col, &[m, e], &[0])?;
        let le = lx.b.compare(eb, cb, CompareDir::Le)?;
        let le = lx.cast(le, DType::I64)?;
        let count = lx.b.reduce_sum(le, &[1])?;
        let one = i64s(lx, 1)?;
        lx.b.sub(count, one)?
    };
    // The rightmost bin includes its right edge.
    let last = i64s(lx, e - 1)?;
    let is_last = lx.b.compare(pos, last, CompareDir::Eq)?;
    let prev = i64s(lx, e - 2)?;
    Ok((lx.b.select(is_last, prev, pos)?, inside))
}

/// The D-dimensional histogram of x (M, D) over `edges` (one 1-D value per
/// dimension, in x's dtype), weighted by `weight` (M) and optionally
/// normalized to a density.
fn histogramdd_core(lx: &mut Lower, x: Value, edges: &[Value], weight: Option<Value>, density: bool, linear: bool) -> Result<Value> {
    let (m, d) = (lx.shape(x)[0], lx.shape(x)[1]);
    let dt = lx.dtype(x);
    let bins: Vec<i64> = edges.iter().map(|&e| lx.shape(e)[0] - 1).collect();
    let total: i64 = bins.iter().product();
    let mut hist = lx.full(dt, 0.0, &[total])?;
    if m > 0 && d > 0 {
        let mut flat = lx.b.splat_i64(DType::I64, 0, &[m])?;
        let mut ok = lx.full(DType::Bool, 1.0, &[m])?;
        let mut stride = total;
        for (i, &e) in edges.iter().enumerate() {
            stride /= bins[i];
            let col = lx.b.slice(x, &[0, i as i64], &[m, i as i64 + 1], &[1, 1])?;
            let col = lx.b.reshape(col, &[m])?;
            let (pos, inside) = bin_of(lx, col, e, linear)?;
            let s = lx.b.splat_i64(DType::I64, stride, &[m])?;
            let ps = lx.b.mul(pos, s)?;
            flat = lx.b.add(flat, ps)?;
            ok = lx.b.and(ok, inside)?;
        }
        let past = lx.b.splat_i64(DType::I64, total, &[m])?;
        let slot = lx.b.select(ok, flat, past)?;
        let upd = match weight {
            Some(w) => w,
            None => lx.full(dt, 1.0, &[m])?,
        };
        hist = scatter_add(lx, hist, slot, upd)?;
    }
    let mut hist = lx.b.reshape(hist, &bins)?;
    if density {
        let all: Vec<i64> = (0..bins.len() as i64).collect();
        let s = lx.b.reduce_sum(hist, &all)?;
        let s = lx.b.broadcast_in_dim(s, &bins, &[])?;
        hist = lx.b.div(hist, s)?;
        for (i, &e) in edges.iter().enumerate() {
            let n = bins[i];
            let hi = lx.b.slice(e, &[1], &[n + 1], &[1])?;
            let lo = lx.b.slice(e, &[0], &[n], &[1])?;
            let w = lx.b.sub(hi, lo)?;
            let w = lx.b.broadcast_in_dim(w, &bins, &[i as i64])?;
            hist = lx.b.div(hist, w)?;
        }
    }
    Ok(hist)
}

/// torch.linspace(lo, hi, bins + 1) in `dt`, from rank-0 f64 bounds.
fn linspace(lx: &mut Lower, lo: Value, hi: Value, bins: i64, dt: DType) -> Result<Value> {
    let steps = bins + 1;
    let start = lx.cast(lo, dt)?;
    let end = lx.cast(hi, dt)?;
    let nb = lx.b.constant_f64(dt, bins as f64);
    let span = lx.b.sub(end, start)?;
    let step = lx.b.div(span, nb)?;
    let i = lx.b.iota(dt, &[steps], 0)?;
    let sb = lx.b.broadcast_in_dim(start, &[steps], &[])?;
    let eb = lx.b.broadcast_in_dim(end, &[steps], &[])?;
    let stb = lx.b.broadcast_in_dim(step, &[steps], &[])?;
    let a = lx.b.mul(stb, i)?;
    let first = lx.b.add(sb, a)?;
    let last = lx.full(dt, (steps - 1) as f64, &[steps])?;
    let rem = lx.b.sub(last, i)?;
    let bb = lx.b.mul(stb, rem)?;
    let second = lx.b.sub(eb, bb)?;
    let ii = lx.b.iota(DType::I64, &[steps], 0)?;
    let half = lx.b.splat_i64(DType::I64, steps / 2, &[steps])?;
    let lower = lx.b.compare(ii, half, CompareDir::Lt)?;
    Ok(lx.b.select(lower, first, second)?)
}

/// The equal-width edges of each dimension of x (M, D), from `range` or the
/// data's extremes (an empty range widened by 0.5 each side).
fn linear_edges(lx: &mut Lower, x: Value, bins: &[i64], range: Option<Vec<f64>>) -> Result<Vec<Value>> {
    let (m, d) = (lx.shape(x)[0], lx.shape(x)[1]);
    let dt = lx.dtype(x);
    if bins.len() as i64 != d {
        bail!(Runtime, "{}: torch.histogramdd: expected {d} sequences of bin edges for a {d}-dimensional histogram but got {}", lx.op, bins.len());
    }
    if let Some(r) = &range {
        if r.len() as i64 != 2 * d {
            bail!(Runtime, "{}: torch.histogramdd: for a {d}-dimensional histogram range should have {} elements, but got {}", lx.op, 2 * d, r.len());
        }
    }
    let mut out = Vec::with_capacity(d as usize);
    for i in 0..d as usize {
        if bins[i] <= 0 {
            bail!(Runtime, "{}: torch.histogram(): bins must be > 0, but got {} for dimension {i}", lx.op, bins[i]);
        }
        let (lo, hi) = if let Some(r) = &range {
            let (mut lo, mut hi) = (r[2 * i], r[2 * i + 1]);
            if !lo.is_finite() || !hi.is_finite() {
                bail!(Runtime, "{}: torch.histogramdd: dimension {i}'s range [{lo}, {hi}] is not finite", lx.op);
            }
            if lo > hi {
                bail!(Runtime, "{}: torch.histogramdd: min should not exceed max, but got min {lo} max {hi} for dimension {i}", lx.op);
            }
            if lo == hi {
                lo -= 0.5;
                hi += 0.5;
            }
            (lx.b.constant_f64(DType::F64, lo), lx.b.constant_f64(DType::F64, hi))
        } else if m > 0 {
            let col = lx.b.slice(x, &[0, i as i64], &[m, i as i64 + 1], &[1, 1])?;
            let col = lx.b.reshape(col, &[m])?;
            let lo = lx.b.reduce_min(col, &[0])?;
            let hi = lx.b.reduce_max(col, &[0])?;
            let lo = lx.cast(lo, DType::F64)?;
            let hi = lx.cast(hi, DType::F64)?;
            let f1 = lx.b.is_finite(lo)?;
            let f2 = lx.b.is_finite(hi)?;
            let fin = lx.b.and(f1, f2)?;
            let bad = lx.b.not(fin)?;
            lx.check_runtime(bad, format!("{}: torch.histogramdd: dimension {i}'s range is not finite", lx.op));
            let same = lx.b.compare(lo, hi, CompareDir::Eq)?;
            let h = lx.b.constant_f64(DType::F64, 0.5);
            let lo2 = lx.b.sub(lo, h)?;
            let hi2 = lx.b.add(hi, h)?;
            (lx.b.select(same, lo2, lo)?, lx.b.select(same, hi2, hi)?)
        } else {
            (lx.b.constant_f64(DType::F64, 0.0), lx.b.constant_f64(DType::F64, 1.0))
        };
        out.push(linspace(lx, lo, hi, bins[i], dt)?);
    }
    Ok(out)
}

/// self as (M, D) (histogramdd: D = last dim, at least 2-D), floats only.
fn as_points(lx: &mut Lower, t: &TensorArg, flat: bool) -> Result<Value> {
    if !t.dtype.is_float() {
        return Err(not_for("histogram_cpu", t.dtype));
    }
    let n: i64 = t.shape.iter().product();
    if flat {
        return Ok(lx.b.reshape(t.value, &[n, 1])?);
    }
    if t.shape.len() < 2 {
        bail!(Runtime, "{}: torch.histogramdd: input tensor should have at least 2 dimensions, but got {}", lx.op, t.shape.len());
    }
    let d = *t.shape.last().unwrap_or(&1);
    let m = if d == 0 { t.shape[..t.shape.len() - 1].iter().product() } else { n / d };
    Ok(lx.b.reshape(t.value, &[m, d])?)
}

/// The weight argument `i` as (M), checked against self.
fn weight_of(lx: &mut Lower, args: &Args, i: usize, t: &TensorArg, m: i64) -> Result<Option<Value>> {
    let Some(w) = args.opt_tensor(i) else { return Ok(None) };
    if w.dtype != t.dtype {
        bail!(
            Runtime,
            "{}: torch.histogramdd: if weight tensor is provided, input tensor and weight tensor should have the same dtype, but got input({}), and weight({})",
            lx.op,
            dtypes::name(t.dtype),
            dtypes::name(w.dtype)
        );
    }
    if w.shape.iter().product::<i64>() != m {
        bail!(
            Runtime,
            "{}: torch.histogramdd: if weight tensor is provided it should have the same shape as the input tensor excluding its innermost dimension, but got input with shape {:?} and weight with shape {:?}",
            lx.op,
            t.shape,
            w.shape
        );
    }
    Ok(Some(lx.b.reshape(w.value, &[m])?))
}

fn opt_floats(args: &Args, i: usize) -> Option<Vec<f64>> {
    match args.get(i) {
        Arg::FloatList(v) => Some(v.clone()),
        Arg::IntList(v) => Some(v.iter().map(|&x| x as f64).collect()),
        _ => None,
    }
}

fn check_edges(lx: &Lower, t: &TensorArg, e: &TensorArg, dim: usize) -> Result<()> {
    if e.dtype != t.dtype {
        bail!(Runtime, "{}: torch.histogramdd: input tensor and bins tensors should have the same dtype, but got input with dtype {} and bins for dimension {dim} with dtype {}", lx.op, dtypes::name(t.dtype), dtypes::name(e.dtype));
    }
    if e.shape.len() != 1 || e.shape[0] == 0 {
        bail!(Runtime, "{}: torch.histogramdd: bins tensor should have one dimension and at least 1 element, but got shape {:?} for dimension {dim}", lx.op, e.shape);
    }
    Ok(())
}

/// histogram.bin_ct(self, bins=100, *, range?, weight?, density=False) and
/// histogram.bins_tensor(self, bins, *, weight?, density=False) -> (hist, bin_edges)
pub(super) fn histogram(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?.clone();
    let x = as_points(lx, &t, true)?;
    let m = lx.shape(x)[0];
    if let Some(e) = args.opt_tensor(1) {
        let e = e.clone();
        check_edges(lx, &t, &e, 0)?;
        let w = weight_of(lx, args, 2, &t, m)?;
        let density = args.bool_or(3, false)?;
        let hist = if e.shape[0] < 2 {
            lx.full(t.dtype, 0.0, &[0])?
        } else {
            histogramdd_core(lx, x, &[e.value], w, density, false)?
        };
        return Ok(vec![hist, e.value]);
    }
    let bins = args.int_or(1, 100)?;
    let edges = linear_edges(lx, x, &[bins], opt_floats(args, 2))?;
    let w = weight_of(lx, args, 3, &t, m)?;
    let hist = histogramdd_core(lx, x, &edges, w, args.bool_or(4, false)?, true)?;
    Ok(vec![hist, edges[0]])
}

/// _histogramdd_bin_edges(self, bins, *, range?, weight?, density) -> Tensor[]
pub(super) fn histogramdd_bin_edges(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?.clone();
    let x = as_points(lx, &t, false)?;
    let edges = linear_edges(lx, x, &args.ints(1)?, opt_floats(args, 2))?;
    lx.list_len = Some(edges.len());
    Ok(edges)
}

/// _histogramdd_from_bin_cts(self, bins, *, range?, weight?, density) -> hist
pub(super) fn histogramdd_from_bin_cts(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?.clone();
    let x = as_points(lx, &t, false)?;
    let m = lx.shape(x)[0];
    let edges = linear_edges(lx, x, &args.ints(1)?, opt_floats(args, 2))?;
    let w = weight_of(lx, args, 3, &t, m)?;
    Ok(vec![histogramdd_core(lx, x, &edges, w, args.bool_or(4, false)?, true)?])
}

/// _histogramdd_from_bin_tensors(self, bins: Tensor[], *, weight?, density) -> hist
pub(super) fn histogramdd_from_bin_tensors(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?.clone();
    let x = as_points(lx, &t, false)?;
    let (m, d) = (lx.shape(x)[0], lx.shape(x)[1]);
    let bins = args.tensors(1)?;
    if bins.len() as i64 != d {
        bail!(Runtime, "{}: torch.histogramdd: expected {d} sequences of bin edges for a {d}-dimensional histogram but got {}", lx.op, bins.len());
    }
    for (i, e) in bins.iter().enumerate() {
        check_edges(lx, &t, e, i)?;
    }
    let w = weight_of(lx, args, 2, &t, m)?;
    if bins.iter().any(|e| e.shape[0] < 2) {
        let shape: Vec<i64> = bins.iter().map(|e| e.shape[0] - 1).collect();
        return Ok(vec![lx.full(t.dtype, 0.0, &shape)?]);
    }
    let edges: Vec<Value> = bins.iter().map(|e| e.value).collect();
    Ok(vec![histogramdd_core(lx, x, &edges, w, args.bool_or(3, false)?, false)?])
}
