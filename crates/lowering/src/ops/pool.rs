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
//!
//! - `pool/max.rs`: max pooling with indices and its backward;
//! - `pool/unpool.rs`: max_unpool;
//! - `pool/avg.rs`: average pooling and its backward;
//! - `pool/adaptive_avg.rs`: adaptive average pooling and its backward;
//! - `pool/adaptive_max.rs`: adaptive max pooling;
//! - here: the table and the window geometry the files share.
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

mod adaptive_avg;
mod adaptive_max;
mod avg;
mod max;
mod unpool;

pub const OPS: &[OpEntry] = &[
    op!("max_pool2d_with_indices", |lx, a| max::max_pool(lx, a, 2)),
    op!("max_pool3d_with_indices", |lx, a| max::max_pool(lx, a, 3)),
    op!("max_pool2d_with_indices_backward", max::max_pool_backward),
    op!("max_pool3d_with_indices_backward", max::max_pool_backward),
    op!("adaptive_max_pool2d", |lx, a| adaptive_max::adaptive_max_pool(lx, a, 2)),
    op!("adaptive_max_pool3d", |lx, a| adaptive_max::adaptive_max_pool(lx, a, 3)),
    op!("adaptive_max_pool2d_backward", max::max_pool_backward),
    op!("adaptive_max_pool3d_backward", max::max_pool_backward),
    op!("max_unpool2d", |lx, a| unpool::max_unpool(lx, a, 2)),
    op!("max_unpool3d", |lx, a| unpool::max_unpool(lx, a, 3)),
    op!("avg_pool2d", |lx, a| avg::avg_pool(lx, a, 2)),
    op!("avg_pool3d", |lx, a| avg::avg_pool(lx, a, 3)),
    op!("avg_pool2d_backward", |lx, a| avg::avg_pool_backward(lx, a, 2)),
    op!("avg_pool3d_backward", |lx, a| avg::avg_pool_backward(lx, a, 3)),
    op!("_adaptive_avg_pool2d", |lx, a| adaptive_avg::adaptive_avg_pool(lx, a, 2)),
    op!("_adaptive_avg_pool3d", |lx, a| adaptive_avg::adaptive_avg_pool(lx, a, 3)),
    op!("_adaptive_avg_pool2d_backward", |lx, a| adaptive_avg::adaptive_avg_pool_backward(lx, a, 2)),
    op!("_adaptive_avg_pool3d_backward", |lx, a| adaptive_avg::adaptive_avg_pool_backward(lx, a, 3)),
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
