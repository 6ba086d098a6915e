//! Elementwise losses: binary_cross_entropy, huber_loss, smooth_l1_loss and
//! their backward ops, as PyTorch's CPU kernels compute them.
use stablehlo::{CompareDir, DType, Value};

use super::{float_only, mean_norm, reduce_loss, R};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::elementwise::{cmp, k, prepare, wide};
use crate::promote::result_type;

/// Argument `i` (a tensor) broadcast to `shape`, in dtype `d`.
fn expanded(lx: &mut Lower, args: &Args, i: usize, shape: &[i64], d: DType) -> Result<Value> {
    let t = args.tensor(i)?;
    let v = lx.cast(t.value, d)?;
    lx.expand(v, shape)
}

/// binary_cross_entropy(self, target, weight?, reduction=mean):
/// `(t - 1) * max(log1p(-x), -100) - t * max(log(x), -100)`, times weight.
pub(super) fn binary_cross_entropy(lx: &mut Lower, args: &Args) -> R {
    let x = args.tensor(0)?.clone();
    float_only("binary_cross_entropy", x.dtype)?;
    let c = wide(x.dtype);
    let xv = lx.cast(x.value, c)?;
    let t = expanded(lx, args, 1, &x.shape, c)?;
    // Inputs outside [0, 1] (NaN included) are errors.
    let zero = k(lx, xv, 0.0)?;
    let one = k(lx, xv, 1.0)?;
    let ge = cmp(lx, xv, zero, CompareDir::Ge)?;
    let le = cmp(lx, xv, one, CompareDir::Le)?;
    let ok = lx.b.and(ge, le)?;
    let bad = lx.b.not(ok)?;
    let all: Vec<i64> = (0..x.shape.len() as i64).collect();
    let bad = lx.b.reduce_or(bad, &all)?;
    lx.check_runtime(bad, format!("{}: all elements of input should be between 0 and 1", lx.op));
    let floor = k(lx, xv, -100.0)?;
    let nx = lx.b.neg(xv)?;
    let l1 = lx.b.log_plus_one(nx)?;
    let l1 = lx.b.max(l1, floor)?;
    let l2 = lx.b.log(xv)?;
    let l2 = lx.b.max(l2, floor)?;
    let tm1 = lx.b.sub(t, one)?;
    let a = lx.b.mul(tm1, l1)?;
    let b = lx.b.mul(t, l2)?;
    let mut loss = lx.b.sub(a, b)?;
    if args.opt_tensor(2).is_some() {
        let w = expanded(lx, args, 2, &x.shape, c)?;
        loss = lx.b.mul(loss, w)?;
    }
    let r = reduce_loss(lx, loss, args.int_or(3, 1)?)?;
    Ok(vec![lx.cast(r, x.dtype)?])
}

/// binary_cross_entropy_backward(grad_output, self, target, weight?, reduction):
/// `g * (x - t) / max((1 - x) * x, 1e-12)`, times weight, over numel for mean.
pub(super) fn binary_cross_entropy_backward(lx: &mut Lower, args: &Args) -> R {
    let x = args.tensor(1)?.clone();
    float_only("binary_cross_entropy_backward", x.dtype)?;
    let c = wide(x.dtype);
    let g = expanded(lx, args, 0, &x.shape, c)?;
    let xv = lx.cast(x.value, c)?;
    let t = expanded(lx, args, 2, &x.shape, c)?;
    let one = k(lx, xv, 1.0)?;
    let eps = k(lx, xv, 1e-12)?;
    let omx = lx.b.sub(one, xv)?;
    let d = lx.b.mul(omx, xv)?;
    let d = lx.b.max(d, eps)?;
    let xt = lx.b.sub(xv, t)?;
    let n = lx.b.mul(g, xt)?;
    let mut r = lx.b.div(n, d)?;
    if args.opt_tensor(3).is_some() {
        let w = expanded(lx, args, 3, &x.shape, c)?;
        r = lx.b.mul(r, w)?;
    }
    if args.int_or(4, 1)? == 1 {
        let s = k(lx, r, mean_norm(&x.shape, 1))?;
        r = lx.b.mul(r, s)?;
    }
    Ok(vec![lx.cast(r, x.dtype)?])
}

/// (x, target) broadcast in the compute dtype, and the result dtype.
fn pair(lx: &mut Lower, args: &Args, name: &str) -> Result<(Value, Value, DType)> {
    let a = args.operand(0)?;
    let b = args.operand(1)?;
    let dt = result_type(&[&a, &b]);
    float_only(name, dt)?;
    let v = prepare(lx, &[&a, &b], wide(dt))?;
    Ok((v[0], v[1], dt))
}

/// (grad, x, target) broadcast in the compute dtype, the input's dtype and shape.
fn triple(lx: &mut Lower, args: &Args, name: &str) -> Result<(Value, Value, Value, DType, Vec<i64>)> {
    let g = args.operand(0)?;
    let a = args.operand(1)?;
    let b = args.operand(2)?;
    let dt = result_type(&[&g, &a, &b]);
    float_only(name, dt)?;
    let v = prepare(lx, &[&g, &a, &b], wide(dt))?;
    let x = args.tensor(1)?;
    Ok((v[0], v[1], v[2], x.dtype, x.shape.clone()))
}

/// huber_loss(self, target, reduction=mean, delta=1.0)
pub(super) fn huber_loss(lx: &mut Lower, args: &Args) -> R {
    let delta = args.float_or(3, 1.0)?;
    if delta <= 0.0 {
        crate::bail!(Runtime, "{}: huber_loss does not support non-positive values for delta.", lx.op);
    }
    let (x, t, dt) = pair(lx, args, "huber_cpu")?;
    let d = lx.b.sub(x, t)?;
    let z = lx.b.abs(d)?;
    let dl = k(lx, z, delta)?;
    let half = k(lx, z, 0.5)?;
    let zz = lx.b.mul(z, z)?;
    let quad = lx.b.mul(half, zz)?;
    let hd = k(lx, z, 0.5 * delta)?;
    let zm = lx.b.sub(z, hd)?;
    let lin = lx.b.mul(dl, zm)?;
    let small = cmp(lx, z, dl, CompareDir::Lt)?;
    let loss = lx.b.select(small, quad, lin)?;
    let r = reduce_loss(lx, loss, args.int_or(2, 1)?)?;
    Ok(vec![lx.cast(r, dt)?])
}

/// Selects `x <= -lim ? lo : x >= lim ? hi : mid`.
fn three_way(lx: &mut Lower, x: Value, lim: f64, lo: Value, hi: Value, mid: Value) -> Result<Value> {
    let nl = k(lx, x, -lim)?;
    let pl = k(lx, x, lim)?;
    let below = cmp(lx, x, nl, CompareDir::Le)?;
    let above = cmp(lx, x, pl, CompareDir::Ge)?;
    let r = lx.b.select(above, hi, mid)?;
    Ok(lx.b.select(below, lo, r)?)
}

/// huber_loss_backward(grad_output, self, target, reduction, delta)
pub(super) fn huber_loss_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, x, t, out, shape) = triple(lx, args, "huber_backward_cpu_out")?;
    let delta = args.float(4)?;
    let norm = mean_norm(&shape, args.int(3)?);
    let d = lx.b.sub(x, t)?;
    let nd = k(lx, g, norm * delta)?;
    let hi = lx.b.mul(nd, g)?;
    let lo = lx.b.neg(hi)?;
    let nv = k(lx, g, norm)?;
    let ng = lx.b.mul(nv, d)?;
    let mid = lx.b.mul(ng, g)?;
    let r = three_way(lx, d, delta, lo, hi, mid)?;
    let r = lx.cast(r, out)?;
    Ok(vec![lx.expand(r, &shape)?])
}

/// smooth_l1_loss(self, target, reduction=mean, beta=1.0); beta 0 is l1_loss.
pub(super) fn smooth_l1_loss(lx: &mut Lower, args: &Args) -> R {
    let beta = args.float_or(3, 1.0)?;
    if beta < 0.0 {
        crate::bail!(Runtime, "{}: smooth_l1_loss does not support negative values for beta.", lx.op);
    }
    let (x, t, dt) = pair(lx, args, "smooth_l1_cpu")?;
    let d = lx.b.sub(x, t)?;
    let z = lx.b.abs(d)?;
    let loss = if beta == 0.0 {
        z
    } else {
        let b = k(lx, z, beta)?;
        let half = k(lx, z, 0.5)?;
        let zz = lx.b.mul(z, z)?;
        let hz = lx.b.mul(half, zz)?;
        let quad = lx.b.div(hz, b)?;
        let hb = k(lx, z, 0.5 * beta)?;
        let lin = lx.b.sub(z, hb)?;
        let small = cmp(lx, z, b, CompareDir::Lt)?;
        lx.b.select(small, quad, lin)?
    };
    let r = reduce_loss(lx, loss, args.int_or(2, 1)?)?;
    Ok(vec![lx.cast(r, dt)?])
}

/// smooth_l1_loss_backward(grad_output, self, target, reduction, beta)
pub(super) fn smooth_l1_loss_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, x, t, out, shape) = triple(lx, args, "smooth_l1_backward_cpu_out")?;
    let beta = args.float(4)?;
    let norm = mean_norm(&shape, args.int(3)?);
    let d = lx.b.sub(x, t)?;
    let nv = k(lx, g, norm)?;
    let hi = lx.b.mul(nv, g)?;
    let lo = lx.b.neg(hi)?;
    let nd = lx.b.mul(nv, d)?;
    let ndg = lx.b.mul(nd, g)?;
    let b = k(lx, g, beta)?;
    let mid = lx.b.div(ndg, b)?;
    let r = three_way(lx, d, beta, lo, hi, mid)?;
    let r = lx.cast(r, out)?;
    Ok(vec![lx.expand(r, &shape)?])
}
