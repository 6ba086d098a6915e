//! native_group_norm and its backward. The input [N, C, *] is viewed as
//! [N, G, C/G, HxW]: statistics are per (sample, group), the affine weight
//! and bias per channel. Mean and rstd are returned as [N, G], as on CPU.
use stablehlo::Value;

use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::ops::nn::{float_only, moments, norm_dx, rsqrt_eps};
use crate::ops::reduce::acc;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("native_group_norm", native_group_norm),
    op!("native_group_norm_backward", native_group_norm_backward),
];

/// [N, G, C/G, HxW] for an input of `shape` with `groups` groups.
fn grouped(lx: &Lower, shape: &[i64], groups: i64) -> Result<[i64; 4]> {
    let (n, c) = (shape.first().copied().unwrap_or(1), shape.get(1).copied().unwrap_or(1));
    if groups <= 0 || c % groups != 0 {
        bail!(Runtime, "{}: Expected number of channels in input to be divisible by num_groups, but got input of shape {:?} and num_groups={groups}", lx.op, shape);
    }
    let hw: i64 = shape.iter().skip(2).product();
    Ok([n, groups, c / groups, hw])
}

/// A per-channel parameter [C] broadcast over [N, G, C/G, HxW].
fn per_channel(lx: &mut Lower, v: Value, g4: &[i64; 4]) -> Result<Value> {
    let v = lx.b.reshape(v, &[g4[1], g4[2]])?;
    Ok(lx.b.broadcast_in_dim(v, g4, &[1, 2])?)
}

/// A per-(sample, group) statistic [N, G] broadcast over [N, G, C/G, HxW].
fn per_group(lx: &mut Lower, v: Value, g4: &[i64; 4]) -> Result<Value> {
    let v = lx.b.reshape(v, &[g4[0], g4[1]])?;
    Ok(lx.b.broadcast_in_dim(v, g4, &[0, 1])?)
}

/// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd)
fn native_group_norm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    float_only(lx, t.dtype)?;
    let g4 = grouped(lx, &t.shape, args.int(6)?)?;
    let a = acc(t.dtype);
    let x = lx.cast(t.value, a)?;
    let x = lx.b.reshape(x, &g4)?;
    let (mean, var) = moments(lx, x, &[2, 3])?;
    let rstd = rsqrt_eps(lx, var, args.float(7)?)?;
    let xc = lx.b.sub(x, mean)?;
    let mut y = lx.b.mul(xc, rstd)?;
    if let Some(w) = args.opt_tensor(1) {
        let w = lx.cast(w.value, a)?;
        let w = per_channel(lx, w, &g4)?;
        y = lx.b.mul(y, w)?;
    }
    if let Some(b) = args.opt_tensor(2) {
        let b = lx.cast(b.value, a)?;
        let b = per_channel(lx, b, &g4)?;
        y = lx.b.add(y, b)?;
    }
    let y = lx.b.reshape(y, &t.shape)?;
    let stat = |lx: &mut Lower, v: Value| -> Result<Value> {
        let s = lx.b.slice(v, &[0, 0, 0, 0], &[g4[0], g4[1], 1, 1], &[1, 1, 1, 1])?;
        let s = lx.b.reshape(s, &[g4[0], g4[1]])?;
        lx.cast(s, t.dtype)
    };
    let (m, r) = (stat(lx, mean)?, stat(lx, rstd)?);
    Ok(vec![lx.cast(y, t.dtype)?, m, r])
}

/// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask)
/// -> (grad_input, grad_weight, grad_bias)
fn native_group_norm_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    lx.honor_output_mask(args, 9);
    let t = args.tensor(1)?.clone();
    float_only(lx, t.dtype)?;
    let g4 = grouped(lx, &t.shape, args.int(8)?)?;
    let a = acc(t.dtype);
    let x = lx.cast(t.value, a)?;
    let x = lx.b.reshape(x, &g4)?;
    let g = lx.cast(args.tensor(0)?.value, a)?;
    let g = lx.b.reshape(g, &g4)?;
    let mean = lx.cast(args.tensor(2)?.value, a)?;
    let mean = per_group(lx, mean, &g4)?;
    let rstd = lx.cast(args.tensor(3)?.value, a)?;
    let rstd = per_group(lx, rstd, &g4)?;
    let xc = lx.b.sub(x, mean)?;
    let xhat = lx.b.mul(xc, rstd)?;
    let weight = args.opt_tensor(4).cloned();
    let gw = match &weight {
        Some(w) => {
            let w = lx.cast(w.value, a)?;
            let w = per_channel(lx, w, &g4)?;
            lx.b.mul(g, w)?
        }
        None => g,
    };
    let dx = norm_dx(lx, gw, xhat, rstd, &[2, 3])?;
    let dx = lx.b.reshape(dx, &t.shape)?;
    let c = [g4[1] * g4[2]];
    let gx = lx.b.mul(g, xhat)?;
    let dw = lx.b.reduce_sum(gx, &[0, 3])?;
    let dw = lx.b.reshape(dw, &c)?;
    let db = lx.b.reduce_sum(g, &[0, 3])?;
    let db = lx.b.reshape(db, &c)?;
    let pdt = weight.map(|w| w.dtype).unwrap_or(t.dtype);
    Ok(vec![lx.cast(dx, t.dtype)?, lx.cast(dw, pdt)?, lx.cast(db, pdt)?])
}
