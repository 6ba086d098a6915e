//! The fused LSTM and GRU cells PyTorch's `nn.LSTM` / `nn.GRU` (and the
//! cell modules) call on accelerators, and their backward ops.
//!
//! Gates come in as `[batch, k * hidden]` (the input and hidden projections,
//! not yet added). The `workspace` output is ours to define, since only our
//! own backward reads it; it holds what that backward needs, laid out as
//! CUDA does:
//! - LSTM: the activated gates `[i, f, g, o]` (`[batch, 4 * hidden]`);
//! - GRU: `[r, z, n, hidden_gates_n + bias, hx]` (`[batch, 5 * hidden]`).
//!
//! Half-precision inputs compute in float32 and round once at the end.
use stablehlo::{DType, Value};

use super::{float_only, k};
use crate::args::{Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::activation::{sigmoid_grad, tanh_grad};
use crate::ops::reduce::acc;

type R = Result<Vec<Value>>;

/// The `n` equal chunks of `v` (`[batch, n * hidden]`) along dim 1.
fn chunks(lx: &mut Lower, v: Value, n: i64) -> Result<Vec<Value>> {
    let shape = lx.shape(v);
    let h = shape[1] / n;
    (0..n).map(|i| Ok(lx.b.slice(v, &[0, i * h], &[shape[0], (i + 1) * h], &[])?)).collect()
}

/// Tensor argument `i` in the compute dtype.
fn wide(lx: &mut Lower, t: &TensorArg) -> Result<Value> {
    lx.cast(t.value, acc(t.dtype))
}

/// The input and hidden gates of a cell (arguments 0 and 1) in the compute
/// dtype, each plus its bias (arguments 3 and 4) when given.
fn biased_gates(lx: &mut Lower, args: &Args) -> Result<(Value, Value)> {
    let mut biased = |gi: usize, bi: usize| -> Result<Value> {
        let gates = wide(lx, args.tensor(gi)?)?;
        let Some(b) = args.opt_tensor(bi) else { return Ok(gates) };
        let bv = wide(lx, b)?;
        let shape = lx.shape(gates);
        let bb = lx.b.broadcast_in_dim(bv, &shape, &[1])?;
        Ok(lx.b.add(gates, bb)?)
    };
    Ok((biased(0, 3)?, biased(1, 4)?))
}

/// Checks the cell's gate shapes: `[batch, k * hidden]` each, state `[batch, hidden]`.
fn check_shapes(lx: &Lower, gates: &[&TensorArg], state: &TensorArg, k: i64) -> Result<()> {
    let s = &state.shape;
    for g in gates {
        if g.shape.len() != 2 || s.len() != 2 || g.shape != gates[0].shape || g.shape[0] != s[0] || g.shape[1] != k * s[1] {
            bail!(
                Runtime,
                "{}: expected gates of shape [batch, {k} * hidden] and a state of shape [batch, hidden], got gates {:?} and state {s:?}",
                lx.op,
                g.shape
            );
        }
    }
    Ok(())
}

fn out_dtype(lx: &Lower, t: &TensorArg) -> Result<DType> {
    float_only(lx, t.dtype)?;
    Ok(t.dtype)
}

/// `_thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?,
/// hidden_bias?) -> (hy, cy, workspace)`
pub(super) fn lstm_cell(lx: &mut Lower, args: &Args) -> R {
    let (ig, hg, cx) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    let dt = out_dtype(lx, ig)?;
    check_shapes(lx, &[ig, hg], cx, 4)?;
    let (a, h) = biased_gates(lx, args)?;
    let gates = lx.b.add(a, h)?;
    let mut act = chunks(lx, gates, 4)?;
    for (i, g) in act.iter_mut().enumerate() {
        *g = if i == 2 { lx.b.tanh(*g)? } else { lx.b.logistic(*g)? };
    }
    let c = wide(lx, cx)?;
    let fc = lx.b.mul(act[1], c)?;
    let ig_g = lx.b.mul(act[0], act[2])?;
    let cy = lx.b.add(fc, ig_g)?;
    let tcy = lx.b.tanh(cy)?;
    let hy = lx.b.mul(act[3], tcy)?;
    let workspace = lx.b.concatenate(&act, 1)?;
    Ok(vec![lx.cast(hy, dt)?, lx.cast(cy, dt)?, lx.cast(workspace, dt)?])
}

/// A gradient that may be absent (`None`): zeros like `like` then.
fn grad_or_zeros(lx: &mut Lower, g: Option<&TensorArg>, like: Value) -> Result<Value> {
    match g {
        Some(g) => wide(lx, g),
        None => k(lx, like, 0.0),
    }
}

/// `_thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy,
/// workspace, has_bias) -> (grad_gates, grad_cx, grad_bias)`
pub(super) fn lstm_cell_backward(lx: &mut Lower, args: &Args) -> R {
    let (cx, cy, ws) = (args.tensor(2)?, args.tensor(3)?, args.tensor(4)?);
    let dt = out_dtype(lx, ws)?;
    check_shapes(lx, &[ws], cx, 4)?;
    let c = wide(lx, cx)?;
    let cyv = wide(lx, cy)?;
    let w = wide(lx, ws)?;
    let ghy = grad_or_zeros(lx, args.opt_tensor(0), cyv)?;
    let gcy = grad_or_zeros(lx, args.opt_tensor(1), cyv)?;
    let act = chunks(lx, w, 4)?;
    let (i, f, g, o) = (act[0], act[1], act[2], act[3]);
    let tcy = lx.b.tanh(cyv)?;
    // hy = o * tanh(cy): through o, and into cy next to cy's own gradient.
    let go = lx.b.mul(ghy, tcy)?;
    let go = sigmoid_grad(lx, go, o)?;
    let ghy_o = lx.b.mul(ghy, o)?;
    let gc = tanh_grad(lx, ghy_o, tcy)?;
    let gc = lx.b.add(gc, gcy)?;
    // cy = f * cx + i * g
    let gi = lx.b.mul(gc, g)?;
    let gi = sigmoid_grad(lx, gi, i)?;
    let gf = lx.b.mul(gc, c)?;
    let gf = sigmoid_grad(lx, gf, f)?;
    let gg = lx.b.mul(gc, i)?;
    let gg = tanh_grad(lx, gg, g)?;
    let gcx = lx.b.mul(gc, f)?;
    let grad_gates = lx.b.concatenate(&[gi, gf, gg, go], 1)?;
    let grad_bias = lx.b.reduce_sum(grad_gates, &[0])?;
    Ok(vec![lx.cast(grad_gates, dt)?, lx.cast(gcx, dt)?, lx.cast(grad_bias, dt)?])
}

/// `_thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?,
/// hidden_bias?) -> (hy, workspace)`
pub(super) fn gru_cell(lx: &mut Lower, args: &Args) -> R {
    let (ig, hg, hx) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    let dt = out_dtype(lx, ig)?;
    check_shapes(lx, &[ig, hg], hx, 3)?;
    let (a, h) = biased_gates(lx, args)?;
    let (a, h) = (chunks(lx, a, 3)?, chunks(lx, h, 3)?);
    let ((ar, az, an), (hr, hz, hn)) = ((a[0], a[1], a[2]), (h[0], h[1], h[2]));
    let r = lx.b.add(ar, hr)?;
    let r = lx.b.logistic(r)?;
    let z = lx.b.add(az, hz)?;
    let z = lx.b.logistic(z)?;
    let rn = lx.b.mul(r, hn)?;
    let n = lx.b.add(an, rn)?;
    let n = lx.b.tanh(n)?;
    // hy = n + z * (hx - n)
    let x = wide(lx, hx)?;
    let d = lx.b.sub(x, n)?;
    let zd = lx.b.mul(z, d)?;
    let hy = lx.b.add(n, zd)?;
    let workspace = lx.b.concatenate(&[r, z, n, hn, x], 1)?;
    Ok(vec![lx.cast(hy, dt)?, lx.cast(workspace, dt)?])
}

/// `_thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias) ->
/// (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias,
/// grad_hidden_bias)`
pub(super) fn gru_cell_backward(lx: &mut Lower, args: &Args) -> R {
    let (ghy_t, ws) = (args.tensor(0)?, args.tensor(1)?);
    let dt = out_dtype(lx, ws)?;
    check_shapes(lx, &[ws], ghy_t, 5)?;
    let ghy = wide(lx, ghy_t)?;
    let w = wide(lx, ws)?;
    let p = chunks(lx, w, 5)?;
    let (r, z, n, hn, hx) = (p[0], p[1], p[2], p[3], p[4]);
    let one = k(lx, z, 1.0)?;
    // hy = n + z * (hx - n) = (1 - z) * n + z * hx
    let d = lx.b.sub(hx, n)?;
    let gz = lx.b.mul(ghy, d)?;
    let gz = sigmoid_grad(lx, gz, z)?;
    let ghx = lx.b.mul(ghy, z)?;
    let omz = lx.b.sub(one, z)?;
    let gn = lx.b.mul(ghy, omz)?;
    let gn = tanh_grad(lx, gn, n)?;
    // n = tanh(a_n + r * hn)
    let ghn = lx.b.mul(gn, r)?;
    let gr = lx.b.mul(gn, hn)?;
    let gr = sigmoid_grad(lx, gr, r)?;
    let g_in = lx.b.concatenate(&[gr, gz, gn], 1)?;
    let g_h = lx.b.concatenate(&[gr, gz, ghn], 1)?;
    let gb_in = lx.b.reduce_sum(g_in, &[0])?;
    let gb_h = lx.b.reduce_sum(g_h, &[0])?;
    Ok(vec![
        lx.cast(g_in, dt)?,
        lx.cast(g_h, dt)?,
        lx.cast(ghx, dt)?,
        lx.cast(gb_in, dt)?,
        lx.cast(gb_h, dt)?,
    ])
}
