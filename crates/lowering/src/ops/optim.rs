//! The fused optimizer steps behind `torch.optim.Adam/AdamW(fused=True)` and
//! `SGD(fused=True)`: one op updates every parameter of a group, so a whole
//! optimizer step is one program.
//!
//! The math follows PyTorch's CPU kernels (FusedAdamKernel.cpp,
//! FusedSGDKernel.cpp) step for step: elementwise work in the dtype's compute
//! precision (f32 for 16-bit floats), bias corrections in f64, and values
//! stored to a 16-bit buffer read back rounded where the kernel re-reads them.
//!
//! The hyperparameters (lr, betas, eps, weight decay, momentum, dampening)
//! arrive as runtime numbers (the engine passes these ops' float arguments
//! as it does Python scalars), so a learning-rate schedule reuses one
//! executable. `lr` may also be a one-element tensor (`.tensor_lr`).
//!
//! The ops return nothing; the lowering returns the new value of every
//! written list in schema order (params, grads, then the state lists), and
//! the engine writes them back. Grads change only when `grad_scale` is given
//! (they are unscaled in place). With `found_inf` set to 1, nothing changes.
use stablehlo::{CompareDir, DType, Value};

use super::elementwise::{type_name, wide};
use crate::args::{Arg, Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("_fused_adam_", adam),
    op!("_fused_adamw_", adamw),
    op!("_fused_sgd_", sgd),
];

/// Ops whose `float` arguments are hyperparameters that change between
/// steps: the engine makes them runtime numbers instead of cache-key constants.
pub const RUNTIME_FLOAT_OPS: &[&str] = &["_fused_adam_", "_fused_adamw_", "_fused_sgd_"];

type R = Result<Vec<Value>>;

/// A hyperparameter as a rank-0 f64 value: a runtime number, a constant, or
/// a one-element tensor (`lr` of the `.tensor_lr` overloads).
fn hyper(lx: &mut Lower, args: &Args, i: usize, name: &str) -> Result<Value> {
    let v = match args.get(i) {
        Arg::Scalar(s) => s.value,
        Arg::Float(x) => lx.b.constant_f64(DType::F64, *x),
        Arg::Tensor(t) if t.shape.iter().product::<i64>() == 1 => lx.b.reshape(t.value, &[])?,
        Arg::Tensor(t) => {
            bail!(Runtime, "{}: {name} must be a number or a one-element tensor, got shape {:?}", lx.op, t.shape)
        }
        _ => bail!(Type, "{}: expected a number for {name} (argument {i})", lx.op),
    };
    lx.cast(v, DType::F64)
}

/// An optional one-element tensor (grad_scale, found_inf) as a rank-0 f64.
fn opt_one_element(lx: &mut Lower, args: &Args, i: usize, name: &str) -> Result<Option<Value>> {
    match args.get(i) {
        Arg::None => Ok(None),
        Arg::Tensor(t) if t.shape.iter().product::<i64>() == 1 => {
            let v = lx.b.reshape(t.value, &[])?;
            Ok(Some(lx.cast(v, DType::F64)?))
        }
        Arg::Tensor(t) => bail!(Runtime, "{}: {name} must be a one-element tensor, got shape {:?}", lx.op, t.shape),
        _ => bail!(Type, "{}: expected a tensor or None for {name} (argument {i})", lx.op),
    }
}

/// The tensor lists at `lists` (by argument position, with names for
/// errors), checked against the params list: same length, shapes and
/// float dtype. An empty list stays empty (no momentum, no amsgrad).
fn lists(lx: &Lower, args: &Args, lists: &[(usize, &str)]) -> Result<Vec<Vec<TensorArg>>> {
    let mut out: Vec<Vec<TensorArg>> = Vec::with_capacity(lists.len());
    for &(i, name) in lists {
        let ts = args.tensors(i)?;
        if let Some(params) = out.first() {
            if !ts.is_empty() && ts.len() != params.len() {
                bail!(
                    Runtime,
                    "{}: {name} has {} tensors but there are {} params; the lists must have the same length",
                    lx.op,
                    ts.len(),
                    params.len()
                );
            }
            for (k, (t, p)) in ts.iter().zip(params).enumerate() {
                if t.shape != p.shape || t.dtype != p.dtype {
                    bail!(
                        Runtime,
                        "{}: {name}[{k}] has shape {:?} and dtype {}, but params[{k}] has shape {:?} and dtype {}",
                        lx.op,
                        t.shape,
                        type_name(t.dtype),
                        p.shape,
                        type_name(p.dtype)
                    );
                }
            }
        } else {
            for (k, t) in ts.iter().enumerate() {
                if !t.dtype.is_float() {
                    bail!(Runtime, "{}: params[{k}] must be floating point, got {}", lx.op, type_name(t.dtype));
                }
            }
        }
        out.push(ts);
    }
    Ok(out)
}

/// Scalar arithmetic and broadcasting for one parameter, in `dtype`.
struct Elem<'l, 'a> {
    lx: &'l mut Lower<'a>,
    shape: Vec<i64>,
    dtype: DType,
}

impl Elem<'_, '_> {
    /// A rank-0 value (any float dtype) cast to the compute dtype and broadcast.
    fn splat(&mut self, s: Value) -> Result<Value> {
        let s = self.lx.cast(s, self.dtype)?;
        self.lx.expand(s, &self.shape)
    }
    /// A tensor read in the compute dtype.
    fn load(&mut self, t: &TensorArg) -> Result<Value> {
        self.lx.cast(t.value, self.dtype)
    }
    /// `v` rounded to the storage dtype `to` (what a store then a load gives).
    fn round_to(&mut self, v: Value, to: DType) -> Result<Value> {
        let stored = self.lx.cast(v, to)?;
        self.lx.cast(stored, self.dtype)
    }
}

/// f64 scalar helpers.
fn c64(lx: &mut Lower, x: f64) -> Value {
    lx.b.constant_f64(DType::F64, x)
}

/// `new` where `skip` (found_inf == 1) is false, `old` otherwise.
fn unless_skipped(lx: &mut Lower, skip: Option<Value>, new: Value, old: Value) -> Result<Value> {
    match skip {
        None => Ok(new),
        Some(skip) => {
            let shape = lx.shape(new);
            let pred = lx.b.broadcast_in_dim(skip, &shape, &[])?;
            Ok(lx.b.select(pred, old, new)?)
        }
    }
}

/// `found_inf == 1` as a rank-0 predicate.
fn skip_flag(lx: &mut Lower, found_inf: Option<Value>) -> Result<Option<Value>> {
    match found_inf {
        None => Ok(None),
        Some(f) => {
            let one = c64(lx, 1.0);
            Ok(Some(lx.b.compare(f, one, CompareDir::Eq)?))
        }
    }
}

/// The gradient as the kernels use it: unscaled by `grad_scale` (which is
/// also what gets stored back), negated under `maximize`.
fn effective_grad(e: &mut Elem, g: &TensorArg, grad_scale: Option<Value>, maximize: bool) -> Result<(Value, Value)> {
    let mut grad = e.load(g)?;
    let mut stored = g.value;
    if let Some(scale) = grad_scale {
        let s = e.splat(scale)?;
        grad = e.lx.b.div(grad, s)?;
        stored = e.lx.cast(grad, g.dtype)?;
    }
    if maximize {
        grad = e.lx.b.neg(grad)?;
    }
    Ok((grad, stored))
}

/// `x + y * k` where the runtime number `k` is nonzero, `x` otherwise (the
/// kernels skip weight decay at 0, so an inf parameter gives no NaN).
fn add_scaled_unless_zero(e: &mut Elem, x: Value, y: Value, k: Value) -> Result<Value> {
    let ks = e.splat(k)?;
    let yk = e.lx.b.mul(y, ks)?;
    let sum = e.lx.b.add(x, yk)?;
    let zero = c64(e.lx, 0.0);
    let nonzero = e.lx.b.compare(k, zero, CompareDir::Ne)?;
    let pred = e.lx.b.broadcast_in_dim(nonzero, &e.shape.clone(), &[])?;
    Ok(e.lx.b.select(pred, sum, x)?)
}

#[derive(Clone, Copy, PartialEq)]
enum AdamMode {
    Adam,
    AdamW,
}

fn adam(lx: &mut Lower, args: &Args) -> R {
    adam_step(lx, args, AdamMode::Adam)
}

fn adamw(lx: &mut Lower, args: &Args) -> R {
    adam_step(lx, args, AdamMode::AdamW)
}

/// `_fused_adam(w)_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
/// state_steps, *, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize,
/// grad_scale=None, found_inf=None)`. The steps were already incremented.
fn adam_step(lx: &mut Lower, args: &Args, mode: AdamMode) -> R {
    let l = lists(
        lx,
        args,
        &[(0, "params"), (1, "grads"), (2, "exp_avgs"), (3, "exp_avg_sqs"), (4, "max_exp_avg_sqs")],
    )?;
    let (params, grads, exp_avgs, exp_avg_sqs, max_sqs) = (&l[0], &l[1], &l[2], &l[3], &l[4]);
    let steps = args.tensors(5)?;
    let amsgrad = matches!(args.get(11), Arg::Bool(true));
    let maximize = matches!(args.get(12), Arg::Bool(true));
    let n = params.len();
    if grads.len() != n || exp_avgs.len() != n || exp_avg_sqs.len() != n || steps.len() != n {
        bail!(Runtime, "{}: params, grads, exp_avgs, exp_avg_sqs and state_steps must have the same length", lx.op);
    }
    if amsgrad && max_sqs.len() != n {
        bail!(Runtime, "{}: amsgrad needs one max_exp_avg_sq per param, got {} for {n} params", lx.op, max_sqs.len());
    }
    let lr = hyper(lx, args, 6, "lr")?;
    let beta1 = hyper(lx, args, 7, "beta1")?;
    let beta2 = hyper(lx, args, 8, "beta2")?;
    let weight_decay = hyper(lx, args, 9, "weight_decay")?;
    let eps = hyper(lx, args, 10, "eps")?;
    let grad_scale = opt_one_element(lx, args, 13, "grad_scale")?;
    let found_inf = opt_one_element(lx, args, 14, "found_inf")?;
    let skip = skip_flag(lx, found_inf)?;

    // Shared f64 scalars: 1 - beta1 (the lerp weight), 1 - beta2, 1 - lr * wd.
    let one = c64(lx, 1.0);
    let lerp_w = lx.b.sub(one, beta1)?;
    let one_minus_beta2 = lx.b.sub(one, beta2)?;
    let lr_wd = lx.b.mul(lr, weight_decay)?;
    let decay = lx.b.sub(one, lr_wd)?;
    let half = c64(lx, 0.5);
    let lerp_w_abs = lx.b.abs(lerp_w)?;
    let small_lerp = lx.b.compare(lerp_w_abs, half, CompareDir::Lt)?;

    let mut new_params = Vec::with_capacity(n);
    let mut new_grads = Vec::with_capacity(n);
    let mut new_avgs = Vec::with_capacity(n);
    let mut new_sqs = Vec::with_capacity(n);
    let mut new_maxes = Vec::with_capacity(max_sqs.len());
    for i in 0..n {
        let (p, g) = (&params[i], &grads[i]);
        if steps[i].shape.iter().product::<i64>() != 1 {
            bail!(Runtime, "{}: state_steps[{i}] must be a one-element tensor, got shape {:?}", lx.op, steps[i].shape);
        }
        // Bias corrections in f64, from this param's step.
        let step = lx.b.reshape(steps[i].value, &[])?;
        let step = lx.cast(step, DType::F64)?;
        let b1t = lx.b.pow(beta1, step)?;
        let bc1 = lx.b.sub(one, b1t)?;
        let step_size = lx.b.div(lr, bc1)?;
        let b2t = lx.b.pow(beta2, step)?;
        let bc2 = lx.b.sub(one, b2t)?;
        let bc2_sqrt = lx.b.sqrt(bc2)?;

        let mut e = Elem { lx: &mut *lx, shape: p.shape.clone(), dtype: wide(p.dtype) };
        let param0 = e.load(p)?;
        let (mut grad, stored_grad) = effective_grad(&mut e, g, grad_scale, maximize)?;
        let mut param = param0;
        match mode {
            AdamMode::Adam => grad = add_scaled_unless_zero(&mut e, grad, param0, weight_decay)?,
            AdamMode::AdamW => {
                let d = e.splat(decay)?;
                param = e.lx.b.mul(param0, d)?;
            }
        }
        // exp_avg.lerp_(grad, 1 - beta1), in the form the kernel picks.
        let avg0 = e.load(&exp_avgs[i])?;
        let w = e.splat(lerp_w)?;
        let diff = e.lx.b.sub(grad, avg0)?;
        let wd = e.lx.b.mul(w, diff)?;
        let near_avg = e.lx.b.add(avg0, wd)?;
        let one_e = e.splat(one)?;
        let one_minus_w = e.lx.b.sub(one_e, w)?;
        let scaled = e.lx.b.mul(diff, one_minus_w)?;
        let near_grad = e.lx.b.sub(grad, scaled)?;
        let small = e.lx.b.broadcast_in_dim(small_lerp, &p.shape, &[])?;
        let avg = e.lx.b.select(small, near_avg, near_grad)?;
        // exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * grad * grad.
        let sq0 = e.load(&exp_avg_sqs[i])?;
        let b2 = e.splat(beta2)?;
        let sq_decayed = e.lx.b.mul(sq0, b2)?;
        let omb2 = e.splat(one_minus_beta2)?;
        let g2 = e.lx.b.mul(omb2, grad)?;
        let g2 = e.lx.b.mul(g2, grad)?;
        let sq = e.lx.b.add(sq_decayed, g2)?;
        let mut denom_src = sq;
        let mut new_max = None;
        if amsgrad {
            let max0 = e.load(&max_sqs[i])?;
            denom_src = e.lx.b.max(max0, sq)?;
            new_max = Some(e.lx.cast(denom_src, max_sqs[i].dtype)?);
        }
        let root = e.lx.b.sqrt(denom_src)?;
        let bc2s = e.splat(bc2_sqrt)?;
        let denom = e.lx.b.div(root, bc2s)?;
        let eps_e = e.splat(eps)?;
        let denom = e.lx.b.add(denom, eps_e)?;
        let ss = e.splat(step_size)?;
        let upd = e.lx.b.mul(ss, avg)?;
        let upd = e.lx.b.div(upd, denom)?;
        let param = e.lx.b.sub(param, upd)?;

        let pv = e.lx.cast(param, p.dtype)?;
        let av = e.lx.cast(avg, exp_avgs[i].dtype)?;
        let sv = e.lx.cast(sq, exp_avg_sqs[i].dtype)?;
        new_params.push(unless_skipped(lx, skip, pv, p.value)?);
        new_grads.push(unless_skipped(lx, skip, stored_grad, g.value)?);
        new_avgs.push(unless_skipped(lx, skip, av, exp_avgs[i].value)?);
        new_sqs.push(unless_skipped(lx, skip, sv, exp_avg_sqs[i].value)?);
        if let Some(mv) = new_max {
            new_maxes.push(unless_skipped(lx, skip, mv, max_sqs[i].value)?);
        }
    }
    // The engine takes one value per tensor of each written list, in order:
    // a max_exp_avg_sqs list passed with amsgrad off gets its tensors back.
    if !amsgrad {
        new_maxes = max_sqs.iter().map(|t| t.value).collect();
    }
    Ok([new_params, new_grads, new_avgs, new_sqs, new_maxes].concat())
}

/// `_fused_sgd_(params, grads, momentum_buffer_list, *, weight_decay,
/// momentum, lr, dampening, nesterov, maximize, is_first_step,
/// grad_scale=None, found_inf=None)`. An empty buffer list means no momentum.
fn sgd(lx: &mut Lower, args: &Args) -> R {
    let l = lists(lx, args, &[(0, "params"), (1, "grads"), (2, "momentum_buffer_list")])?;
    let (params, grads, bufs) = (&l[0], &l[1], &l[2]);
    let n = params.len();
    if grads.len() != n {
        bail!(Runtime, "{}: params and grads must have the same length, got {n} and {}", lx.op, grads.len());
    }
    let has_momentum = !bufs.is_empty();
    let weight_decay = hyper(lx, args, 3, "weight_decay")?;
    let momentum = hyper(lx, args, 4, "momentum")?;
    let lr = hyper(lx, args, 5, "lr")?;
    let dampening = hyper(lx, args, 6, "dampening")?;
    let nesterov = matches!(args.get(7), Arg::Bool(true));
    let maximize = matches!(args.get(8), Arg::Bool(true));
    let is_first_step = matches!(args.get(9), Arg::Bool(true));
    let grad_scale = opt_one_element(lx, args, 10, "grad_scale")?;
    let found_inf = opt_one_element(lx, args, 11, "found_inf")?;
    let skip = skip_flag(lx, found_inf)?;
    let one = c64(lx, 1.0);
    let one_minus_damp = lx.b.sub(one, dampening)?;

    let mut new_params = Vec::with_capacity(n);
    let mut new_grads = Vec::with_capacity(n);
    let mut new_bufs = Vec::with_capacity(bufs.len());
    for i in 0..n {
        let (p, g) = (&params[i], &grads[i]);
        let mut e = Elem { lx: &mut *lx, shape: p.shape.clone(), dtype: wide(p.dtype) };
        let param0 = e.load(p)?;
        let (mut grad, stored_grad) = effective_grad(&mut e, g, grad_scale, maximize)?;
        grad = add_scaled_unless_zero(&mut e, grad, param0, weight_decay)?;
        let mut new_buf = None;
        if has_momentum {
            let buf = if is_first_step {
                grad
            } else {
                let b0 = e.load(&bufs[i])?;
                let m = e.splat(momentum)?;
                let kept = e.lx.b.mul(b0, m)?;
                let d = e.splat(one_minus_damp)?;
                let fresh = e.lx.b.mul(grad, d)?;
                e.lx.b.add(kept, fresh)?
            };
            // The kernel stores the buffer, then reads it back.
            let buf = e.round_to(buf, bufs[i].dtype)?;
            grad = if nesterov {
                let m = e.splat(momentum)?;
                let bm = e.lx.b.mul(buf, m)?;
                e.lx.b.add(grad, bm)?
            } else {
                buf
            };
            new_buf = Some(e.lx.cast(buf, bufs[i].dtype)?);
        }
        let lr_e = e.splat(lr)?;
        let step = e.lx.b.mul(grad, lr_e)?;
        let param = e.lx.b.sub(param0, step)?;
        let pv = e.lx.cast(param, p.dtype)?;
        new_params.push(unless_skipped(lx, skip, pv, p.value)?);
        new_grads.push(unless_skipped(lx, skip, stored_grad, g.value)?);
        if let Some(bv) = new_buf {
            new_bufs.push(unless_skipped(lx, skip, bv, bufs[i].value)?);
        }
    }
    Ok([new_params, new_grads, new_bufs].concat())
}
