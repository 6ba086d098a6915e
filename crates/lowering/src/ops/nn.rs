//! Neural-network ops and the backward ops autograd calls for them: softmax /
//! log_softmax, nll_loss (1d and 2d), mse_loss, layer and batch norm,
//! embedding's dense backward, dropout.
//!
//! Half-precision inputs compute in float32 and round once at the end.
//!
//! - `nn/softmax.rs`: _softmax, _log_softmax and their backward;
//! - `nn/nll.rs`: nll_loss / nll_loss2d forward and backward;
//! - `nn/mse.rs`: mse_loss and its backward;
//! - `nn/norm.rs`: the math layer, batch and group norm share;
//! - `nn/layer_norm.rs`: native_layer_norm and its backward;
//! - `nn/batch_norm.rs`: native_batch_norm (+ _legit variants) and its backward;
//! - `nn/embedding.rs`: embedding_dense_backward;
//! - `nn/dropout.rs`: native_dropout and its backward;
//! - `nn/rnn_cells.rs`: the fused LSTM and GRU cells and their backward;
//! - `nn/weight_norm.rs`: the fused weight norm and its backward;
//! - here: the table and the small helpers the files share.
use stablehlo::{DType, Value};

use crate::bail;
use crate::ctx::Lower;
use crate::dtypes;
use crate::error::Result;
use crate::op;
use crate::ops::reduce::unreduce;
use crate::table::OpEntry;

mod batch_norm;
mod dropout;
mod embedding;
mod layer_norm;
mod mse;
mod nll;
mod norm;
mod rnn_cells;
mod softmax;
mod weight_norm;

pub(super) use norm::{moments, norm_dx, rsqrt_eps};

pub const OPS: &[OpEntry] = &[
    op!("_softmax", |lx, a| softmax::softmax_impl(lx, a, false)),
    op!("_log_softmax", |lx, a| softmax::softmax_impl(lx, a, true)),
    op!("_softmax_backward_data", |lx, a| softmax::softmax_backward_impl(lx, a, false)),
    op!("_log_softmax_backward_data", |lx, a| softmax::softmax_backward_impl(lx, a, true)),
    op!("nll_loss_forward", nll::nll_loss_forward),
    op!("nll_loss2d_forward", nll::nll_loss_forward),
    op!("nll_loss_backward", nll::nll_loss_backward),
    op!("nll_loss2d_backward", nll::nll_loss_backward),
    op!("mse_loss", mse::mse_loss),
    op!("mse_loss_backward", mse::mse_loss_backward),
    op!("native_layer_norm", layer_norm::native_layer_norm),
    op!("native_layer_norm_backward", layer_norm::native_layer_norm_backward),
    op!("native_batch_norm", batch_norm::native_batch_norm),
    op!("_native_batch_norm_legit", batch_norm::native_batch_norm),
    op!("_native_batch_norm_legit_no_training", batch_norm::native_batch_norm),
    op!("native_batch_norm_backward", batch_norm::native_batch_norm_backward),
    op!("embedding_dense_backward", embedding::embedding_dense_backward),
    op!("embedding_renorm", embedding::embedding_renorm),
    op!("native_dropout", dropout::native_dropout),
    op!("native_dropout_backward", dropout::native_dropout_backward),
    op!("_thnn_fused_lstm_cell", rnn_cells::lstm_cell),
    op!("_thnn_fused_lstm_cell_backward_impl", rnn_cells::lstm_cell_backward),
    op!("_thnn_fused_gru_cell", rnn_cells::gru_cell),
    op!("_thnn_fused_gru_cell_backward", rnn_cells::gru_cell_backward),
    op!("_weight_norm_interface", weight_norm::weight_norm),
    op!("_weight_norm_interface_backward", weight_norm::weight_norm_backward),
];

pub(super) fn float_only(lx: &Lower, d: DType) -> Result<()> {
    if !d.is_float() {
        bail!(NotImplemented, "{}: not implemented for '{}'", lx.op, dtypes::name(d));
    }
    Ok(())
}

/// A constant like `v` holding `x`.
fn k(lx: &mut Lower, v: Value, x: f64) -> Result<Value> {
    lx.full_like(v, x)
}

/// Sum over `dims`, broadcast back to the full shape.
fn sum_back(lx: &mut Lower, v: Value, dims: &[i64]) -> Result<Value> {
    let shape = lx.shape(v);
    let s = lx.b.reduce_sum(v, dims)?;
    unreduce(lx, s, &shape, dims)
}

/// Mean over `dims`, broadcast back to the full shape.
fn mean_back(lx: &mut Lower, v: Value, dims: &[i64]) -> Result<Value> {
    let shape = lx.shape(v);
    let n: i64 = dims.iter().map(|&d| shape[d as usize]).product();
    let s = sum_back(lx, v, dims)?;
    let nv = k(lx, s, n as f64)?;
    Ok(lx.b.div(s, nv)?)
}

/// `v` (one value per element of the dims not in `dims`) broadcast to `shape`.
pub(super) fn along(lx: &mut Lower, v: Value, shape: &[i64], dims: &[i64]) -> Result<Value> {
    let n = lx.shape(v).iter().product::<i64>();
    let kept: Vec<i64> = (0..shape.len() as i64).filter(|d| !dims.contains(d)).collect();
    let kept_shape: Vec<i64> = kept.iter().map(|&d| shape[d as usize]).collect();
    debug_assert_eq!(n, kept_shape.iter().product::<i64>());
    let v = lx.b.reshape(v, &kept_shape)?;
    unreduce(lx, v, shape, dims)
}
