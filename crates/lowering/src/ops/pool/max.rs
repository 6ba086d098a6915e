//! Max pooling with indices (one variadic reduce_window under a total
//! order) and its backward, which scatter-adds grad_output at the saved
//! indices (adaptive max pooling's backward too).
use stablehlo::{Builder, CompareDir, DType, ScatterDims, Value};

use super::{full, window};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::reduce::acc;

/// Combiner of (value, index) pairs under a total order: NaN beats every
/// number (between NaNs the larger index wins, like the CPU's last NaN),
/// else the larger value, ties to the smaller index.
pub(super) fn argmax_body(b: &mut Builder, l: &[Value], r: &[Value], float: bool) -> stablehlo::Result<Vec<Value>> {
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
pub(super) fn lowest(lx: &mut Lower, dt: DType) -> Value {
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
pub(super) fn max_pool(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
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
pub(super) fn max_pool_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
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
    let dims = ScatterDims::points_1d();
    let out = lx.b.scatter(zeros, flat, gv, &dims, |b, l, r| Ok(vec![b.add(l[0], r[0])?]))?;
    let out = lx.b.reshape(out, &x.shape)?;
    Ok(vec![lx.cast(out, x.dtype)?])
}
