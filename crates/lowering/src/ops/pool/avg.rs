//! Average pooling: a windowed sum divided by the CPU's divisor, and its
//! backward (grad/divisor dilated by the stride, summed over ones-windows).
use stablehlo::{DType, Value};

use super::{full, window, Win};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::dtypes;
use crate::error::Result;
use crate::ops::reduce::acc;

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
pub(super) fn avg_pool(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
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
pub(super) fn avg_pool_backward(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
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
