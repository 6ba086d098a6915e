//! Losses, small activations and misc nn ops, with the backward ops autograd
//! calls for them. Formulas follow PyTorch's CPU kernels; f16/bf16 compute in
//! f32 and round once at the end.
//!
//! - `losses/regress.rs`: binary_cross_entropy, huber_loss, smooth_l1_loss;
//! - `losses/pointwise.rs`: glu, hardshrink/softshrink, _prelu_kernel, renorm;
//! - `losses/margin.rs`: multi_margin_loss, multilabel_margin_loss;
//! - `losses/hist.rs`: bincount, histogram, histogramdd's helper ops;
//! - `losses/ctc.rs`: _ctc_loss and its backward;
//! - here: _batch_norm_with_update and batch_norm_backward, which reuse the
//!   native_batch_norm lowerings through the table.
use stablehlo::{DType, Value};

use crate::args::{Arg, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::ops::elementwise::{k, not_for};
use crate::table::OpEntry;

mod ctc;
mod hist;
mod margin;
mod pointwise;
mod regress;

type R = Result<Vec<Value>>;

pub const OPS: &[OpEntry] = &[
    op!("binary_cross_entropy", regress::binary_cross_entropy),
    op!("binary_cross_entropy_backward", regress::binary_cross_entropy_backward),
    op!("huber_loss", regress::huber_loss),
    op!("huber_loss_backward", regress::huber_loss_backward),
    op!("smooth_l1_loss", regress::smooth_l1_loss),
    op!("smooth_l1_loss_backward", regress::smooth_l1_loss_backward),
    op!("glu", pointwise::glu),
    op!("glu_backward", pointwise::glu_backward),
    op!("glu_jvp", pointwise::glu_jvp),
    op!("hardshrink", pointwise::hardshrink),
    op!("hardshrink_backward", pointwise::shrink_backward),
    op!("softshrink", pointwise::softshrink, static),
    op!("softshrink_backward", pointwise::shrink_backward),
    op!("_prelu_kernel", pointwise::prelu),
    op!("_prelu_kernel_backward", pointwise::prelu_backward),
    op!("renorm", pointwise::renorm, static),
    op!("multi_margin_loss", margin::multi_margin_loss, static),
    op!("multi_margin_loss_backward", margin::multi_margin_loss_backward, static),
    op!("multilabel_margin_loss_forward", margin::multilabel_margin_loss_forward),
    op!("multilabel_margin_loss_backward", margin::multilabel_margin_loss_backward),
    op!("bincount", hist::bincount, size = hist::bincount_size),
    op!("histogram", hist::histogram),
    op!("_histogramdd_bin_edges", hist::histogramdd_bin_edges),
    op!("_histogramdd_from_bin_cts", hist::histogramdd_from_bin_cts),
    op!("_histogramdd_from_bin_tensors", hist::histogramdd_from_bin_tensors),
    op!("_ctc_loss", ctc::ctc_loss),
    op!("_ctc_loss_backward", ctc::ctc_loss_backward),
    op!("_batch_norm_with_update", batch_norm_with_update),
    op!("_batch_norm_with_update_functional", batch_norm_with_update),
    op!("_batch_norm_no_update", batch_norm_no_update),
    op!("batch_norm_backward", batch_norm_backward),
];

/// Fails like PyTorch's dispatch macros for a non-float dtype.
pub(super) fn float_only(name: &str, d: DType) -> Result<()> {
    if !d.is_float() {
        return Err(not_for(name, d));
    }
    Ok(())
}

/// Applies a loss reduction (0 none, 1 mean, 2 sum) to the elementwise loss.
pub(super) fn reduce_loss(lx: &mut Lower, v: Value, reduction: i64) -> Result<Value> {
    let shape = lx.shape(v);
    let all: Vec<i64> = (0..shape.len() as i64).collect();
    Ok(match reduction {
        0 => v,
        1 => {
            let n: i64 = shape.iter().product();
            let s = lx.b.reduce_sum(v, &all)?;
            let nv = k(lx, s, n as f64)?;
            lx.b.div(s, nv)?
        }
        2 => lx.b.reduce_sum(v, &all)?,
        r => bail!(Value, "{}: {r} is not a valid value for reduction", lx.op),
    })
}

/// `1 / numel` for a mean reduction, else 1 (the backward ops' `norm`).
pub(super) fn mean_norm(shape: &[i64], reduction: i64) -> f64 {
    if reduction == 1 {
        1.0 / shape.iter().product::<i64>().max(1) as f64
    } else {
        1.0
    }
}

/// _batch_norm_with_update(input, weight?, bias?, running_mean, running_var,
/// momentum, eps) -> (out, save_mean, save_invstd, reserve), then the new
/// running statistics (declared mutated, or returned by the _functional
/// variant): native_batch_norm in training mode plus an empty reserve.
fn batch_norm_with_update(lx: &mut Lower, args: &Args) -> R {
    let mut items: Vec<Arg> = (0..5).map(|i| args.get(i).clone()).collect();
    items.push(Arg::Bool(true));
    items.push(Arg::Float(args.float(5)?));
    items.push(Arg::Float(args.float(6)?));
    let mut out = lx.call("aten::native_batch_norm", items)?;
    let reserve = lx.full(DType::U8, 0.0, &[0])?;
    out.insert(3, reserve);
    Ok(out)
}

/// _batch_norm_no_update(input, weight?, bias?, running_mean?, running_var?,
/// momentum, eps) -> (out, save_mean, save_invstd, reserve): evaluation mode.
fn batch_norm_no_update(lx: &mut Lower, args: &Args) -> R {
    let mut items: Vec<Arg> = (0..5).map(|i| args.get(i).clone()).collect();
    items.push(Arg::Bool(false));
    items.push(Arg::Float(args.float(5)?));
    items.push(Arg::Float(args.float(6)?));
    // In evaluation mode native_batch_norm appends the running stats
    // unchanged; keep the first three values.
    let mut out = lx.call("aten::native_batch_norm", items)?;
    out.truncate(3);
    let reserve = lx.full(DType::U8, 0.0, &[0])?;
    out.push(reserve);
    Ok(out)
}

/// batch_norm_backward(grad_out, input, weight, running_mean?, running_var?,
/// save_mean?, save_var?, update, eps, output_mask, reserve): on CPU it is
/// native_batch_norm_backward with save_var holding the inverse std.
fn batch_norm_backward(lx: &mut Lower, args: &Args) -> R {
    let items: Vec<Arg> = (0..10).map(|i| args.get(i).clone()).collect();
    lx.call("aten::native_batch_norm_backward", items)
}
