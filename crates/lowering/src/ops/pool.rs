//! Pooling over the last 1-3 dims (batched or not): max pooling with indices
//! (+ backward), max_unpool, average pooling (+ backward), adaptive average
//! and adaptive max pooling (+ backward).
//!
//! - max pooling is one variadic `reduce_window` over (value, flat index) with
//!   a total order: NaN beats everything (the last NaN wins, as on CPU), else
//!   the larger value, ties to the smaller index; padding is (lowest, i64::MAX);
//! - its backward (and adaptive max's) scatter-adds grad_output at the saved
//!   indices; max_unpool scatters values to them;
//! - avg pooling is a windowed sum divided by the CPU's divisor (constants);
//!   its backward dilates grad/divisor by the stride and sums ones-windows;
//! - adaptive avg pooling contracts each spatial dim with an averaging matrix;
//!   adaptive max gathers each (padded, masked) window and reduces it.
use stablehlo::{Builder, CompareDir, DType, GatherDims, ScatterDims, Value};

use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::dtypes;
use crate::error::Result;
use crate::op;
use crate::ops::reduce::acc;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("max_pool2d_with_indices", |lx, a| max_pool(lx, a, 2)),
    op!("max_pool3d_with_indices", |lx, a| max_pool(lx, a, 3)),
    op!("max_pool2d_with_indices_backward", max_pool_backward),
    op!("max_pool3d_with_indices_backward", max_pool_backward),
    op!("adaptive_max_pool2d", |lx, a| adaptive_max_pool(lx, a, 2)),
    op!("adaptive_max_pool3d", |lx, a| adaptive_max_pool(lx, a, 3)),
    op!("adaptive_max_pool2d_backward", max_pool_backward),
    op!("adaptive_max_pool3d_backward", max_pool_backward),
    op!("max_unpool2d", |lx, a| max_unpool(lx, a, 2)),
    op!("max_unpool3d", |lx, a| max_unpool(lx, a, 3)),
    op!("avg_pool2d", |lx, a| avg_pool(lx, a, 2)),
    op!("avg_pool3d", |lx, a| avg_pool(lx, a, 3)),
    op!("avg_pool2d_backward", |lx, a| avg_pool_backward(lx, a, 2)),
    op!("avg_pool3d_backward", |lx, a| avg_pool_backward(lx, a, 3)),
    op!("_adaptive_avg_pool2d", |lx, a| adaptive_avg_pool(lx, a, 2)),
    op!("_adaptive_avg_pool3d", |lx, a| adaptive_avg_pool(lx, a, 3)),
    op!("_adaptive_avg_pool2d_backward", |lx, a| adaptive_avg_pool_backward(lx, a, 2)),
    op!("_adaptive_avg_pool3d_backward", |lx, a| adaptive_avg_pool_backward(lx, a, 3)),
];

/// One window geometry, per spatial dim (the last `n` dims of the input).
struct Win {
    k: Vec<i64>,
    s: Vec<i64>,
    p: Vec<i64>,
    d: Vec<i64>,
    input: Vec<i64>,
    out: Vec<i64>,
}

impl Win {
    /// High padding that makes a window reduction produce `out` (>= p).
    fn hi(&self, i: usize) -> i64 {
        let need = (self.out[i] - 1) * self.s[i] + self.d[i] * (self.k[i] - 1) + 1 - self.input[i] - self.p[i];
        need.max(self.p[i])
    }
}

/// Expands a 1-entry list to `n`; `empty` is used when the list is empty.
fn expand(lx: &Lower, v: Vec<i64>, n: usize, empty: &[i64], what: &str) -> Result<Vec<i64>> {
    match v.len() {
        0 => Ok(empty.to_vec()),
        1 => Ok(vec![v[0]; n]),
        l if l == n => Ok(v),
        _ => bail!(Runtime, "{}: {what} must either be a single int, or a tuple of {n} ints", lx.op),
    }
}

/// Reads kernel_size, stride, padding, dilation (if `dil_at`), ceil_mode at
/// `args[first..]` and computes the output size as PyTorch's pooling_output_shape.
fn window(lx: &Lower, args: &Args, shape: &[i64], n: usize, first: usize, dil_at: Option<usize>, ceil_at: usize) -> Result<Win> {
    if shape.len() != n + 1 && shape.len() != n + 2 {
        bail!(Runtime, "{}: Expected {}D or {}D input tensor, but got {:?}", lx.op, n + 1, n + 2, shape);
    }
    let k = expand(lx, args.ints(first)?, n, &[], "kernel_size")?;
    let s = expand(lx, args.ints(first + 1)?, n, &k, "stride")?;
    let p = expand(lx, args.ints(first + 2)?, n, &[], "padding")?;
    let d = match dil_at {
        Some(i) => expand(lx, args.ints(i)?, n, &vec![1; n], "dilation")?,
        None => vec![1; n],
    };
    let ceil = args.bool_or(ceil_at, false)?;
    let input = shape[shape.len() - n..].to_vec();
    let mut out = Vec::new();
    for i in 0..n {
        if k[i] <= 0 || s[i] <= 0 || d[i] <= 0 {
            bail!(Runtime, "{}: kernel_size, stride and dilation must be greater than zero", lx.op);
        }
        if p[i] < 0 || p[i] > k[i] / 2 {
            bail!(Runtime, "{}: pad should be at most half of effective kernel size, but got pad={}, kernel_size={}", lx.op, p[i], k[i]);
        }
        let num = input[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1 + if ceil { s[i] - 1 } else { 0 };
        let mut o = num.div_euclid(s[i]) + 1;
        if ceil && (o - 1) * s[i] >= input[i] + p[i] {
            o -= 1;
        }
        if o <= 0 {
            bail!(Runtime, "{}: Given input size {:?}, calculated output size {:?} is too small", lx.op, input, o);
        }
        out.push(o);
    }
    Ok(Win { k, s, p, d, input, out })
}

/// Full-rank window attributes (1 / 0 on the leading dims).
fn full(rank: usize, v: &[i64], fill: i64) -> Vec<i64> {
    let mut out = vec![fill; rank - v.len()];
    out.extend(v);
    out
}

/// Combiner of (value, index) pairs under a total order: NaN beats every
/// number (between NaNs the larger index wins, like the CPU's last NaN),
/// else the larger value, ties to the smaller index.
fn argmax_body(b: &mut Builder, l: &[Value], r: &[Value], float: bool) -> stablehlo::Result<Vec<Value>> {
    let gt = b.compare(r[0], l[0], CompareDir::Gt)?;
    let eq = b.compare(r[0], l[0], CompareDir::Eq)?;
    let ilt = b.compare(r[1], l[1], CompareDir::Lt)?;
    let tie = b.and(eq, ilt)?;
    let mut pick = b.or(gt, tie)?;
    if float {
        let ln = b.compare(l[0], l[0], CompareDir::Ne)?;
        let rn = b.compare(r[0], r[0], CompareDir::Ne)?;
        let not_ln = b.not(ln)?;
        let only_r = b.and(rn, not_ln)?;
        let both = b.and(rn, ln)?;
        let igt = b.compare(r[1], l[1], CompareDir::Gt)?;
        let both_later = b.and(both, igt)?;
        pick = b.or(pick, only_r)?;
        pick = b.or(pick, both_later)?;
    }
    let v = b.select(pick, r[0], l[0])?;
    let i = b.select(pick, r[1], l[1])?;
    Ok(vec![v, i])
}

/// The lowest value of `dt` (-inf for floats), the identity of max.
fn lowest(lx: &mut Lower, dt: DType) -> Value {
    if dt.is_float() {
        return lx.b.constant_f64(dt, f64::NEG_INFINITY);
    }
    let lo = match dt {
        DType::I8 => i8::MIN as i64,
        DType::I16 => i16::MIN as i64,
        DType::I32 => i32::MIN as i64,
        DType::I64 => i64::MIN,
        _ => 0,
    };
    lx.b.constant_i64(dt, lo)
}

/// max_pool{2,3}d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
fn max_pool(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    if t.dtype == DType::Bool {
        bail!(NotImplemented, "{}: not implemented for 'Bool'", lx.op);
    }
    let w = window(lx, args, &t.shape, n, 1, Some(4), 5)?;
    let rank = t.shape.len();
    let lead = rank - n;
    // Flat index within each plane: iota over the spatial dims.
    let mut idx: Option<Value> = None;
    for i in 0..n {
        let stride: i64 = w.input[i + 1..].iter().product();
        let io = lx.b.iota(DType::I64, &t.shape, (lead + i) as i64)?;
        let sc = lx.full(DType::I64, stride as f64, &t.shape)?;
        let term = lx.b.mul(io, sc)?;
        idx = Some(match idx {
            Some(acc) => lx.b.add(acc, term)?,
            None => term,
        });
    }
    let idx = idx.expect("n >= 1");
    let dt = t.dtype;
    let init_v = lowest(lx, dt);
    let init_i = lx.b.constant_i64(DType::I64, i64::MAX);
    let pad: Vec<(i64, i64)> = (0..rank)
        .map(|j| if j < lead { (0, 0) } else { (w.p[j - lead], w.hi(j - lead)) })
        .collect();
    let float = dt.is_float();
    let r = lx.b.reduce_window(
        &[t.value, idx],
        &[init_v, init_i],
        &full(rank, &w.k, 1),
        &full(rank, &w.s, 1),
        &[],
        &full(rank, &w.d, 1),
        &pad,
        |b, l, r| argmax_body(b, l, r, float),
    )?;
    Ok(vec![r[0], r[1]])
}

/// max_pool{2,3}d_with_indices_backward(grad_output, self, kernel_size, stride,
/// padding, dilation, ceil_mode, indices): scatter-add at the saved indices.
fn max_pool_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let at = if lx.op.contains("adaptive") { 2 } else { 7 };
    let n = if lx.op.contains("3d") { 3 } else { 2 };
    scatter_back(lx, args, at, n)
}

/// grad_input of a max pooling: grad_output (arg 0) added into a zero tensor
/// like self (arg 1) at the per-plane flat indices (arg `at`).
fn scatter_back(lx: &mut Lower, args: &Args, at: usize, n: usize) -> Result<Vec<Value>> {
    let g = args.tensor(0)?.clone();
    let x = args.tensor(1)?.clone();
    let ind = args.tensor(at)?.clone();
    let lead = x.shape.len() - n;
    let planes: i64 = x.shape[..lead].iter().product();
    let p_in: i64 = x.shape[lead..].iter().product();
    let p_out: i64 = g.shape[lead..].iter().product();
    let a = acc(g.dtype);
    let gv = lx.cast(g.value, a)?;
    let gv = lx.b.reshape(gv, &[planes * p_out])?;
    let iv = lx.cast(ind.value, DType::I64)?;
    let iv = lx.b.reshape(iv, &[planes, p_out])?;
    let base = lx.b.iota(DType::I64, &[planes, p_out], 0)?;
    let pin = lx.full(DType::I64, p_in as f64, &[planes, p_out])?;
    let base = lx.b.mul(base, pin)?;
    let flat = lx.b.add(base, iv)?;
    let flat = lx.b.reshape(flat, &[planes * p_out, 1])?;
    let zeros = lx.full(a, 0.0, &[planes * p_in])?;
    let dims = ScatterDims {
        update_window_dims: vec![],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    let out = lx.b.scatter(zeros, flat, gv, &dims, |b, l, r| Ok(vec![b.add(l[0], r[0])?]))?;
    let out = lx.b.reshape(out, &x.shape)?;
    Ok(vec![lx.cast(out, x.dtype)?])
}

/// max_unpool{2,3}d(self, indices, output_size[, stride, padding]): zeros of
/// the output size with each value written at its per-plane flat index.
fn max_unpool(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
    let x = args.tensor(0)?.clone();
    let ind = args.tensor(1)?.clone();
    let out = expand(lx, args.ints(2)?, n, &[], "output_size")?;
    let rank = x.shape.len();
    if (rank != n + 1 && rank != n + 2) || ind.shape != x.shape || out.len() != n {
        bail!(Runtime, "{}: expected input and indices of the same {}D or {}D shape and {} output sizes, got {:?}, {:?}, {:?}", lx.op, n + 1, n + 2, n, x.shape, ind.shape, out);
    }
    let lead = rank - n;
    let planes: i64 = x.shape[..lead].iter().product();
    let p_in: i64 = x.shape[lead..].iter().product();
    let p_out: i64 = out.iter().product();
    let v = lx.b.reshape(x.value, &[planes * p_in])?;
    let iv = lx.cast(ind.value, DType::I64)?;
    let iv = lx.b.reshape(iv, &[planes, p_in])?;
    let zero = lx.full(DType::I64, 0.0, &[planes, p_in])?;
    let lim = lx.full(DType::I64, p_out as f64, &[planes, p_in])?;
    let lo = lx.b.compare(iv, zero, CompareDir::Lt)?;
    let hi = lx.b.compare(iv, lim, CompareDir::Ge)?;
    let bad = lx.b.or(lo, hi)?;
    let bad = lx.b.reduce_or(bad, &[0, 1])?;
    lx.check(bad, format!("{}: Found an invalid max index (output size {:?})", lx.op, out));
    let base = lx.b.iota(DType::I64, &[planes, p_in], 0)?;
    let base = lx.b.mul(base, lim)?;
    let flat = lx.b.add(base, iv)?;
    let flat = lx.b.reshape(flat, &[planes * p_in, 1])?;
    let zeros = lx.full(x.dtype, 0.0, &[planes * p_out])?;
    let dims = ScatterDims {
        update_window_dims: vec![],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    let r = lx.b.scatter(zeros, flat, v, &dims, |_, _, r| Ok(vec![r[0]]))?;
    let mut oshape = x.shape[..lead].to_vec();
    oshape.extend(&out);
    Ok(vec![lx.b.reshape(r, &oshape)?])
}

/// The CPU's avg-pool divisor per output position, as a constant `[out...]`.
fn divisor(w: &Win, include_pad: bool, over: Option<i64>) -> (Vec<i64>, Vec<f64>) {
    let n = w.k.len();
    let total: i64 = w.out.iter().product();
    let mut data = Vec::with_capacity(total as usize);
    for flat in 0..total {
        let mut rem = flat;
        let mut count = 1i64;
        for i in (0..n).rev() {
            let o = rem % w.out[i];
            rem /= w.out[i];
            let start = o * w.s[i] - w.p[i];
            let end = (start + w.k[i]).min(w.input[i] + w.p[i]);
            let c = if include_pad { end - start } else { end.min(w.input[i]) - start.max(0) };
            count *= c;
        }
        data.push(over.unwrap_or(count) as f64);
    }
    (w.out.clone(), data)
}

fn avg_setup(lx: &Lower, args: &Args, first: usize, n: usize, shape: &[i64]) -> Result<(Win, bool, Option<i64>)> {
    let w = window(lx, args, shape, n, first, None, first + 3)?;
    let include_pad = args.bool_or(first + 4, true)?;
    let over = args.opt_int(first + 5)?;
    if over == Some(0) {
        bail!(Runtime, "{}: divisor must be not zero", lx.op);
    }
    Ok((w, include_pad, over))
}

fn divisor_value(lx: &mut Lower, w: &Win, include_pad: bool, over: Option<i64>, dt: DType, shape: &[i64]) -> Result<Value> {
    let (dshape, data) = divisor(w, include_pad, over);
    let c = if dt.is_float() {
        lx.b.constant_tensor_f64(dt, &dshape, &data)?
    } else {
        let ints: Vec<i64> = data.iter().map(|&v| v as i64).collect();
        lx.b.constant_tensor_i64(dt, &dshape, &ints)?
    };
    let lead = shape.len() - w.k.len();
    let dims: Vec<i64> = (lead as i64..shape.len() as i64).collect();
    Ok(lx.b.broadcast_in_dim(c, shape, &dims)?)
}

/// avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override?)
fn avg_pool(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    if t.dtype == DType::Bool {
        bail!(NotImplemented, "{}: not implemented for '{}'", lx.op, dtypes::name(t.dtype));
    }
    let (w, include_pad, over) = avg_setup(lx, args, 1, n, &t.shape)?;
    let rank = t.shape.len();
    let lead = rank - n;
    let a = acc(t.dtype);
    let x = lx.cast(t.value, a)?;
    let pad: Vec<(i64, i64)> = (0..rank)
        .map(|j| if j < lead { (0, 0) } else { (w.p[j - lead], w.hi(j - lead)) })
        .collect();
    let zero = lx.b.constant_f64(a, 0.0);
    let s = lx.b.reduce_window(&[x], &[zero], &full(rank, &w.k, 1), &full(rank, &w.s, 1), &[], &[], &pad, |b, l, r| {
        Ok(vec![b.add(l[0], r[0])?])
    })?[0];
    let shape = lx.shape(s);
    let dv = divisor_value(lx, &w, include_pad, over, a, &shape)?;
    let y = lx.b.div(s, dv)?;
    Ok(vec![lx.cast(y, t.dtype)?])
}

/// avg_pool{2,3}d_backward(grad_output, self, kernel_size, stride, padding,
/// ceil_mode, count_include_pad, divisor_override?)
fn avg_pool_backward(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
    let g = args.tensor(0)?.clone();
    let x = args.tensor(1)?.clone();
    let (w, include_pad, over) = avg_setup(lx, args, 2, n, &x.shape)?;
    let rank = x.shape.len();
    let lead = rank - n;
    let a = acc(g.dtype);
    let gv = lx.cast(g.value, a)?;
    let dv = divisor_value(lx, &w, include_pad, over, a, &g.shape)?;
    let gv = lx.b.div(gv, dv)?;
    // grad_in[i] = sum of g[o] over windows o*s - p <= i < o*s - p + k.
    let (mut lo, mut hi, mut interior) = (vec![0; rank], vec![0; rank], vec![0; rank]);
    for i in 0..n {
        let l = w.k[i] - 1 - w.p[i];
        lo[lead + i] = l;
        interior[lead + i] = w.s[i] - 1;
        hi[lead + i] = w.input[i] + w.k[i] - 1 - l - ((w.out[i] - 1) * w.s[i] + 1);
    }
    let zero = lx.b.constant_f64(a, 0.0);
    let padded = lx.b.pad(gv, zero, &lo, &hi, &interior)?;
    let r = lx.b.reduce_window(&[padded], &[zero], &full(rank, &w.k, 1), &[], &[], &[], &[], |b, l, r| {
        Ok(vec![b.add(l[0], r[0])?])
    })?[0];
    Ok(vec![lx.cast(r, x.dtype)?])
}

/// The `[out, in]` averaging matrix of adaptive pooling along one dim.
fn adaptive_matrix(lx: &mut Lower, input: i64, out: i64, dt: DType) -> Result<Value> {
    let mut data = vec![0.0; (input * out) as usize];
    for o in 0..out {
        let start = (o * input) / out;
        let end = ((o + 1) * input + out - 1) / out;
        for i in start..end {
            data[(o * input + i) as usize] = 1.0 / (end - start) as f64;
        }
    }
    Ok(lx.b.constant_tensor_f64(dt, &[out, input], &data)?)
}

/// Contracts the last `n` dims of `v` with matrices `m[i]` (`[to, from]` when
/// `forward`, else used transposed), keeping the dim order.
fn contract(lx: &mut Lower, mut v: Value, sizes_from: &[i64], sizes_to: &[i64], n: usize, forward: bool) -> Result<Value> {
    let dt = lx.dtype(v);
    for i in 0..n {
        let rank = lx.shape(v).len();
        let dim = (rank - n + i) as i64;
        let m = adaptive_matrix(lx, sizes_from[i], sizes_to[i], dt)?;
        // forward: contract v[dim] (in) with m[1]; backward: v[dim] (out) with m[0].
        let mc = if forward { 1 } else { 0 };
        let r = lx.b.dot_general(v, m, &[], &[], &[dim], &[mc], None)?;
        // result: v dims without `dim`, then the new dim last; move it back.
        let mut perm: Vec<i64> = (0..dim).collect();
        perm.push(rank as i64 - 1);
        perm.extend(dim..rank as i64 - 1);
        v = lx.b.transpose(r, &perm)?;
    }
    Ok(v)
}

/// _adaptive_avg_pool{2,3}d(self, output_size)
fn adaptive_avg_pool(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    if !t.dtype.is_float() {
        bail!(NotImplemented, "{}: \"adaptive_avg_pool{}d\" not implemented for '{}'", lx.op, n, dtypes::name(t.dtype));
    }
    if t.shape.len() != n + 1 && t.shape.len() != n + 2 {
        bail!(Runtime, "{}: Expected {}D or {}D tensor, got {:?}", lx.op, n + 1, n + 2, t.shape);
    }
    let out = expand(lx, args.ints(1)?, n, &[], "output_size")?;
    let input = t.shape[t.shape.len() - n..].to_vec();
    let a = acc(t.dtype);
    let x = lx.cast(t.value, a)?;
    let y = contract(lx, x, &input, &out, n, true)?;
    Ok(vec![lx.cast(y, t.dtype)?])
}

/// _adaptive_avg_pool{2,3}d_backward(grad_output, self)
fn adaptive_avg_pool_backward(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
    let g = args.tensor(0)?.clone();
    let x = args.tensor(1)?.clone();
    let r = x.shape.len();
    let input = x.shape[r - n..].to_vec();
    let out = g.shape[r - n..].to_vec();
    let a = acc(g.dtype);
    let gv = lx.cast(g.value, a)?;
    let y = contract(lx, gv, &input, &out, n, false)?;
    Ok(vec![lx.cast(y, x.dtype)?])
}

/// Window `[start, end)` of adaptive pooling output `o` along a dim.
fn adaptive_range(o: i64, input: i64, out: i64) -> (i64, i64) {
    ((o * input) / out, ((o + 1) * input + out - 1) / out)
}

/// adaptive_max_pool{2,3}d(self, output_size) -> (values, indices): gathers
/// each output's window (padded to the longest window, extra slots masked
/// to (lowest, i64::MAX)) and reduces it with the max-pool order.
fn adaptive_max_pool(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    if t.dtype == DType::Bool {
        bail!(NotImplemented, "{}: not implemented for 'Bool'", lx.op);
    }
    let rank = t.shape.len();
    if rank != n + 1 && rank != n + 2 {
        bail!(Runtime, "{}: Expected {}D or {}D tensor, got {:?}", lx.op, n + 1, n + 2, t.shape);
    }
    let out = expand(lx, args.ints(1)?, n, &[], "output_size")?;
    let lead = rank - n;
    let input = t.shape[lead..].to_vec();
    if input.contains(&0) || out.iter().any(|&o| o <= 0) {
        bail!(Runtime, "{}: input {:?} and output_size {:?} must be non-empty", lx.op, t.shape, out);
    }
    let planes: i64 = t.shape[..lead].iter().product();
    let lmax: Vec<i64> = (0..n)
        .map(|i| (0..out[i]).map(|o| { let (a, b) = adaptive_range(o, input[i], out[i]); b - a }).max().unwrap_or(1))
        .collect();
    // Index grid [o0, l0, o1, l1, ...]: per-dim coordinates, flat index, validity.
    let mut grid = Vec::new();
    for i in 0..n {
        grid.push(out[i]);
        grid.push(lmax[i]);
    }
    let total: i64 = grid.iter().product();
    let (mut coords, mut flat, mut valid) = (Vec::new(), Vec::new(), Vec::new());
    for e in 0..total {
        let mut rem = e;
        let mut c = vec![0; n];
        let mut ok = true;
        for i in (0..n).rev() {
            let l = rem % lmax[i];
            rem /= lmax[i];
            let o = rem % out[i];
            rem /= out[i];
            let (a, b) = adaptive_range(o, input[i], out[i]);
            ok &= a + l < b;
            c[i] = (a + l).min(input[i] - 1);
        }
        let f = (0..n).fold(0, |acc, i| acc * input[i] + c[i]);
        coords.extend(c);
        flat.push(if ok { f } else { i64::MAX });
        valid.push(ok as i64);
    }
    let mut ishape = grid.clone();
    ishape.push(n as i64);
    let idx = lx.b.constant_tensor_i64(DType::I64, &ishape, &coords)?;
    let mut pshape = vec![planes];
    pshape.extend(&input);
    let x = lx.b.reshape(t.value, &pshape)?;
    let dims = GatherDims {
        offset_dims: vec![0],
        collapsed_slice_dims: (1..=n as i64).collect(),
        start_index_map: (1..=n as i64).collect(),
        index_vector_dim: 2 * n as i64,
        ..Default::default()
    };
    let mut sizes = vec![planes];
    sizes.extend(vec![1; n]);
    let g = lx.b.gather(x, idx, &dims, &sizes, false)?;
    let mut gshape = vec![planes];
    gshape.extend(&grid);
    let gdims: Vec<i64> = (1..=2 * n as i64).collect();
    let fl = lx.b.constant_tensor_i64(DType::I64, &grid, &flat)?;
    let fl = lx.b.broadcast_in_dim(fl, &gshape, &gdims)?;
    let ok = lx.b.constant_tensor_i64(DType::Bool, &grid, &valid)?;
    let ok = lx.b.broadcast_in_dim(ok, &gshape, &gdims)?;
    let lo = lowest(lx, t.dtype);
    let lo_b = lx.b.broadcast_in_dim(lo, &gshape, &[])?;
    let g = lx.b.select(ok, g, lo_b)?;
    let init_i = lx.b.constant_i64(DType::I64, i64::MAX);
    let float = t.dtype.is_float();
    let red: Vec<i64> = (0..n as i64).map(|i| 2 + 2 * i).collect();
    let r = lx.b.reduce(&[g, fl], &[lo, init_i], &red, |b, l, r| argmax_body(b, l, r, float))?;
    let mut oshape = t.shape[..lead].to_vec();
    oshape.extend(&out);
    let v = lx.b.reshape(r[0], &oshape)?;
    let i = lx.b.reshape(r[1], &oshape)?;
    Ok(vec![v, i])
}
