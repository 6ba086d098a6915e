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
use crate::ops::reduce::acc;

type R = Result<Vec<Value>>;

/// Chunk `i` of `n` equal chunks of `v` (`[batch, n * hidden]`) along dim 1.
fn chunk(lx: &mut Lower, v: Value, n: i64, i: i64) -> Result<Value> {
    let shape = lx.shape(v);
    let h = shape[1] / n;
    Ok(lx.b.slice(v, &[0, i * h], &[shape[0], (i + 1) * h], &[])?)
}

/// Tensor argument `i` in the compute dtype.
fn wide(lx: &mut Lower, t: &TensorArg) -> Result<Value> {
    lx.cast(t.value, acc(t.dtype))
}

/// `gates + bias` (broadcast over the batch) when the bias is given.
fn with_bias(lx: &mut Lower, gates: Value, bias: Option<&TensorArg>) -> Result<Value> {
    let Some(b) = bias else { return Ok(gates) };
    let bv = wide(lx, b)?;
    let shape = lx.shape(gates);
    let bb = lx.b.broadcast_in_dim(bv, &shape, &[1])?;
    Ok(lx.b.add(gates, bb)?)
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

/// `s * (1 - s)`: the sigmoid's derivative from its output.
fn d_sigmoid(lx: &mut Lower, s: Value) -> Result<Value> {
    let one = k(lx, s, 1.0)?;
    let oms = lx.b.sub(one, s)?;
    Ok(lx.b.mul(s, oms)?)
}

/// `1 - t * t`: tanh's derivative from its output.
fn d_tanh(lx: &mut Lower, t: Value) -> Result<Value> {
    let one = k(lx, t, 1.0)?;
    let t2 = lx.b.mul(t, t)?;
    Ok(lx.b.sub(one, t2)?)
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
    let a = wide(lx, ig)?;
    let a = with_bias(lx, a, args.opt_tensor(3))?;
    let h = wide(lx, hg)?;
    let h = with_bias(lx, h, args.opt_tensor(4))?;
    let gates = lx.b.add(a, h)?;
    let mut act = Vec::with_capacity(4);
    for i in 0..4 {
        let g = chunk(lx, gates, 4, i)?;
        act.push(if i == 2 { lx.b.tanh(g)? } else { lx.b.logistic(g)? });
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
    let act: Vec<Value> = (0..4).map(|i| chunk(lx, w, 4, i)).collect::<Result<_>>()?;
    let (i, f, g, o) = (act[0], act[1], act[2], act[3]);
    let tcy = lx.b.tanh(cyv)?;
    // hy = o * tanh(cy): through o, and into cy next to cy's own gradient.
    let go = lx.b.mul(ghy, tcy)?;
    let dso = d_sigmoid(lx, o)?;
    let go = lx.b.mul(go, dso)?;
    let ghy_o = lx.b.mul(ghy, o)?;
    let dtc = d_tanh(lx, tcy)?;
    let gc = lx.b.mul(ghy_o, dtc)?;
    let gc = lx.b.add(gc, gcy)?;
    // cy = f * cx + i * g
    let gi = lx.b.mul(gc, g)?;
    let dsi = d_sigmoid(lx, i)?;
    let gi = lx.b.mul(gi, dsi)?;
    let gf = lx.b.mul(gc, c)?;
    let dsf = d_sigmoid(lx, f)?;
    let gf = lx.b.mul(gf, dsf)?;
    let gg = lx.b.mul(gc, i)?;
    let dtg = d_tanh(lx, g)?;
    let gg = lx.b.mul(gg, dtg)?;
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
    let a = wide(lx, ig)?;
    let a = with_bias(lx, a, args.opt_tensor(3))?;
    let h = wide(lx, hg)?;
    let h = with_bias(lx, h, args.opt_tensor(4))?;
    let (ar, az, an) = (chunk(lx, a, 3, 0)?, chunk(lx, a, 3, 1)?, chunk(lx, a, 3, 2)?);
    let (hr, hz, hn) = (chunk(lx, h, 3, 0)?, chunk(lx, h, 3, 1)?, chunk(lx, h, 3, 2)?);
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
    let p: Vec<Value> = (0..5).map(|i| chunk(lx, w, 5, i)).collect::<Result<_>>()?;
    let (r, z, n, hn, hx) = (p[0], p[1], p[2], p[3], p[4]);
    let one = k(lx, z, 1.0)?;
    // hy = n + z * (hx - n) = (1 - z) * n + z * hx
    let d = lx.b.sub(hx, n)?;
    let gz = lx.b.mul(ghy, d)?;
    let dsz = d_sigmoid(lx, z)?;
    let gz = lx.b.mul(gz, dsz)?;
    let ghx = lx.b.mul(ghy, z)?;
    let omz = lx.b.sub(one, z)?;
    let gn = lx.b.mul(ghy, omz)?;
    let dtn = d_tanh(lx, n)?;
    let gn = lx.b.mul(gn, dtn)?;
    // n = tanh(a_n + r * hn)
    let ghn = lx.b.mul(gn, r)?;
    let gr = lx.b.mul(gn, hn)?;
    let dsr = d_sigmoid(lx, r)?;
    let gr = lx.b.mul(gr, dsr)?;
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
