//! Activation functions and the backward ops autograd calls for them
//! (threshold_backward is relu's). Formulas follow PyTorch's CPU kernels;
//! f16/bf16 are computed in f32 and rounded back, like their opmath.
use stablehlo::{CompareDir, DType, Value};

use super::elementwise::{cmp, k, not_for, prepare, wide};
use crate::args::{Arg, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::promote::promote_types;
use crate::table::OpEntry;

type R = Result<Vec<Value>>;

pub const OPS: &[OpEntry] = &[
    op!("relu", relu),
    op!("threshold", threshold),
    op!("threshold_backward", threshold_backward),
    op!("leaky_relu", leaky_relu),
    op!("leaky_relu_backward", leaky_relu_backward),
    op!("elu", elu),
    op!("elu_backward", elu_backward),
    op!("gelu", gelu),
    op!("gelu_backward", gelu_backward),
    op!("silu", silu),
    op!("silu_backward", silu_backward),
    op!("mish", mish),
    op!("mish_backward", mish_backward),
    op!("softplus", softplus),
    op!("softplus_backward", softplus_backward),
    op!("hardtanh", hardtanh),
    op!("hardtanh_backward", hardtanh_backward),
    op!("hardsigmoid", hardsigmoid),
    op!("hardsigmoid_backward", hardsigmoid_backward),
    op!("hardswish", hardswish),
    op!("hardswish_backward", hardswish_backward),
    op!("sigmoid_backward", sigmoid_backward),
    op!("tanh_backward", tanh_backward),
];

/// Tensor argument `i` in its compute dtype, with the result dtype. Integer
/// inputs are rejected (as "<name>" not implemented) unless `ints_ok`.
fn input(lx: &mut Lower, args: &Args, i: usize, name: &str, ints_ok: bool) -> Result<(Value, DType)> {
    let t = args.tensor(i)?;
    if t.dtype == DType::Bool {
        bail!(NotImplemented, "{name}: Boolean inputs not supported for {name}");
    }
    if !t.dtype.is_float() && !ints_ok {
        return Err(not_for(name, t.dtype));
    }
    Ok((lx.cast(t.value, wide(t.dtype))?, t.dtype))
}

/// (grad, x) of a backward op in their common compute dtype, and the result
/// dtype. They broadcast, as in ATen's kernels: torch.func's batching rules
/// pass a batched gradient with an unbatched input (jacrev, hessian).
fn grad_input(lx: &mut Lower, args: &Args, gi: usize, xi: usize) -> Result<(Value, Value, DType)> {
    let (g, x) = (args.operand(gi)?, args.operand(xi)?);
    let out = promote_types(g.dtype, x.dtype);
    let v = prepare(lx, &[&g, &x], wide(out))?;
    Ok((v[0], v[1], out))
}

/// Scalar argument `i` (or `default` when absent) broadcast like `like`.
fn scalar(lx: &mut Lower, args: &Args, i: usize, like: Value, default: f64) -> Result<Value> {
    match args.get(i) {
        Arg::None => k(lx, like, default),
        _ => {
            let s = args.operand(i)?;
            let v = lx.cast(s.value, lx.dtype(like))?;
            let shape = lx.shape(like);
            lx.expand(v, &shape)
        }
    }
}

fn done(lx: &mut Lower, v: Value, out: DType) -> R {
    Ok(vec![lx.cast(v, out)?])
}

fn select_cmp(lx: &mut Lower, a: Value, b: Value, dir: CompareDir, t: Value, f: Value) -> Result<Value> {
    let c = cmp(lx, a, b, dir)?;
    Ok(lx.b.select(c, t, f)?)
}

fn relu(lx: &mut Lower, args: &Args) -> R {
    let (x, out) = input(lx, args, 0, "relu", true)?;
    let zero = k(lx, x, 0.0)?;
    let r = select_cmp(lx, x, zero, CompareDir::Lt, zero, x)?;
    done(lx, r, out)
}

/// threshold(self, threshold, value): `x <= threshold ? value : x`.
fn threshold(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if t.dtype == DType::Bool {
        return Err(not_for("threshold_cpu", t.dtype));
    }
    // The bounds are cast to self's dtype first, as the CPU kernel does.
    let x = t.value;
    let th = scalar(lx, args, 1, x, 0.0)?;
    let v = scalar(lx, args, 2, x, 0.0)?;
    Ok(vec![select_cmp(lx, x, th, CompareDir::Le, v, x)?])
}

/// threshold_backward(grad_output, self, threshold): 0 where self <= threshold.
fn threshold_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, x) = (args.operand(0)?, args.operand(1)?);
    let out = promote_types(g.dtype, x.dtype);
    let v = prepare(lx, &[&g, &x], out)?;
    let (gv, xv) = (v[0], v[1]);
    let th = scalar(lx, args, 2, xv, 0.0)?;
    let zero = k(lx, gv, 0.0)?;
    Ok(vec![select_cmp(lx, xv, th, CompareDir::Le, zero, gv)?])
}

fn leaky_relu(lx: &mut Lower, args: &Args) -> R {
    let (x, out) = input(lx, args, 0, "leaky_relu_cpu", false)?;
    let slope = scalar(lx, args, 1, x, 0.01)?;
    let zero = k(lx, x, 0.0)?;
    let xs = lx.b.mul(x, slope)?;
    let r = select_cmp(lx, x, zero, CompareDir::Gt, x, xs)?;
    done(lx, r, out)
}

/// leaky_relu_backward(grad_output, self, negative_slope, self_is_result)
fn leaky_relu_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, x, out) = grad_input(lx, args, 0, 1)?;
    let slope = scalar(lx, args, 2, x, 0.01)?;
    let zero = k(lx, x, 0.0)?;
    let gs = lx.b.mul(g, slope)?;
    let r = select_cmp(lx, x, zero, CompareDir::Gt, g, gs)?;
    done(lx, r, out)
}

/// elu(self, alpha, scale, input_scale)
fn elu(lx: &mut Lower, args: &Args) -> R {
    let (x, out) = input(lx, args, 0, "elu_cpu", false)?;
    let alpha = scalar(lx, args, 1, x, 1.0)?;
    let scale = scalar(lx, args, 2, x, 1.0)?;
    let in_scale = scalar(lx, args, 3, x, 1.0)?;
    let negcoef = lx.b.mul(alpha, scale)?;
    let xi = lx.b.mul(x, in_scale)?;
    let em = lx.b.exponential_minus_one(xi)?;
    let neg = lx.b.mul(em, negcoef)?;
    let pos = lx.b.mul(x, scale)?;
    let zero = k(lx, x, 0.0)?;
    let r = select_cmp(lx, x, zero, CompareDir::Le, neg, pos)?;
    done(lx, r, out)
}

/// elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)
fn elu_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, x, out) = grad_input(lx, args, 0, 5)?;
    let is_result = args.bool_or(4, false)?;
    let alpha = scalar(lx, args, 1, x, 1.0)?;
    let scale = scalar(lx, args, 2, x, 1.0)?;
    let in_scale = scalar(lx, args, 3, x, 1.0)?;
    let negcoef = lx.b.mul(alpha, scale)?;
    let g_in = lx.b.mul(g, in_scale)?;
    let neg = if is_result {
        let s = lx.b.add(x, negcoef)?;
        lx.b.mul(g_in, s)?
    } else {
        let xi = lx.b.mul(x, in_scale)?;
        let e = lx.b.exp(xi)?;
        let gn = lx.b.mul(g_in, negcoef)?;
        lx.b.mul(gn, e)?
    };
    let pos = lx.b.mul(g, scale)?;
    let zero = k(lx, x, 0.0)?;
    let r = select_cmp(lx, x, zero, CompareDir::Le, neg, pos)?;
    done(lx, r, out)
}

const SQRT1_2: f64 = std::f64::consts::FRAC_1_SQRT_2;
/// sqrt(2 / pi), the tanh approximation's kBeta.
const K_BETA: f64 = 0.7978845608028654;
const K_KAPPA: f64 = 0.044715;

fn approximate(lx: &Lower, args: &Args, i: usize) -> Result<bool> {
    match args.opt_str(i).unwrap_or("none") {
        "none" => Ok(false),
        "tanh" => Ok(true),
        other => bail!(Runtime, "{}: approximate argument must be either none or tanh (got '{other}')", lx.op),
    }
}

/// The tanh approximation's inner value `kBeta * (x + kKappa * x^3)`.
fn gelu_inner(lx: &mut Lower, x: Value) -> Result<Value> {
    let x2 = lx.b.mul(x, x)?;
    let x3 = lx.b.mul(x2, x)?;
    let kk = k(lx, x, K_KAPPA)?;
    let t = lx.b.mul(kk, x3)?;
    let s = lx.b.add(x, t)?;
    let kb = k(lx, x, K_BETA)?;
    Ok(lx.b.mul(kb, s)?)
}

/// gelu(self, *, approximate='none')
fn gelu(lx: &mut Lower, args: &Args) -> R {
    let tanh = approximate(lx, args, 1)?;
    let (x, out) = input(lx, args, 0, "GeluKernelImpl", false)?;
    let half = k(lx, x, 0.5)?;
    let one = k(lx, x, 1.0)?;
    let r = if tanh {
        let inner = gelu_inner(lx, x)?;
        let t = lx.b.tanh(inner)?;
        let s = lx.b.add(one, t)?;
        let hx = lx.b.mul(half, x)?;
        lx.b.mul(hx, s)?
    } else {
        let c = k(lx, x, SQRT1_2)?;
        let xc = lx.b.mul(x, c)?;
        let e = crate::ops::special_fns::erf_precise(lx, xc)?;
        let s = lx.b.add(one, e)?;
        let xh = lx.b.mul(x, half)?;
        lx.b.mul(xh, s)?
    };
    done(lx, r, out)
}

/// gelu_backward(grad_output, self, *, approximate='none')
fn gelu_backward(lx: &mut Lower, args: &Args) -> R {
    let tanh = approximate(lx, args, 2)?;
    let (g, x, out) = grad_input(lx, args, 0, 1)?;
    let half = k(lx, x, 0.5)?;
    let one = k(lx, x, 1.0)?;
    let d = if tanh {
        let x2 = lx.b.mul(x, x)?;
        let inner = gelu_inner(lx, x)?;
        let t = lx.b.tanh(inner)?;
        let left = lx.b.mul(half, x)?;
        let right = lx.b.add(one, t)?;
        let left_d = lx.b.mul(half, right)?;
        let t2 = lx.b.mul(t, t)?;
        let sech2 = lx.b.sub(one, t2)?;
        let kk3 = k(lx, x, 3.0 * K_KAPPA)?;
        let p = lx.b.mul(kk3, x2)?;
        let p1 = lx.b.add(one, p)?;
        let kb = k(lx, x, K_BETA)?;
        let inner_d = lx.b.mul(kb, p1)?;
        let r = lx.b.mul(left, sech2)?;
        let right_d = lx.b.mul(r, inner_d)?;
        lx.b.add(left_d, right_d)?
    } else {
        let c = k(lx, x, SQRT1_2)?;
        let xc = lx.b.mul(x, c)?;
        let e = crate::ops::special_fns::erf_precise(lx, xc)?;
        let s = lx.b.add(one, e)?;
        let cdf = lx.b.mul(half, s)?;
        let x2 = lx.b.mul(x, x)?;
        let mh = k(lx, x, -0.5)?;
        let ex = lx.b.mul(mh, x2)?;
        let ee = lx.b.exp(ex)?;
        let ka = k(lx, x, 0.3989422804014327)?; // 1 / sqrt(2 pi)
        let pdf = lx.b.mul(ka, ee)?;
        let xp = lx.b.mul(x, pdf)?;
        lx.b.add(cdf, xp)?
    };
    let r = lx.b.mul(g, d)?;
    done(lx, r, out)
}

/// `1 / (1 + exp(-x))`, as PyTorch writes silu's sigmoid.
fn sigmoid_of(lx: &mut Lower, x: Value) -> Result<Value> {
    let one = k(lx, x, 1.0)?;
    let nx = lx.b.neg(x)?;
    let e = lx.b.exp(nx)?;
    let d = lx.b.add(one, e)?;
    Ok(lx.b.div(one, d)?)
}

fn silu(lx: &mut Lower, args: &Args) -> R {
    let (x, out) = input(lx, args, 0, "silu_cpu", false)?;
    let one = k(lx, x, 1.0)?;
    let nx = lx.b.neg(x)?;
    let e = lx.b.exp(nx)?;
    let d = lx.b.add(one, e)?;
    let r = lx.b.div(x, d)?;
    done(lx, r, out)
}

fn silu_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, x, out) = grad_input(lx, args, 0, 1)?;
    let s = sigmoid_of(lx, x)?;
    let one = k(lx, x, 1.0)?;
    let oms = lx.b.sub(one, s)?;
    let xo = lx.b.mul(x, oms)?;
    let p = lx.b.add(one, xo)?;
    let gs = lx.b.mul(g, s)?;
    let r = lx.b.mul(gs, p)?;
    done(lx, r, out)
}

/// `tanh(log1p(exp(x)))`
fn tanh_softplus(lx: &mut Lower, x: Value) -> Result<Value> {
    let e = lx.b.exp(x)?;
    let l = lx.b.log_plus_one(e)?;
    Ok(lx.b.tanh(l)?)
}

fn mish(lx: &mut Lower, args: &Args) -> R {
    let (x, out) = input(lx, args, 0, "mish_cpu", false)?;
    let t = tanh_softplus(lx, x)?;
    let r = lx.b.mul(x, t)?;
    done(lx, r, out)
}

fn mish_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, x, out) = grad_input(lx, args, 0, 1)?;
    let s = sigmoid_of(lx, x)?;
    let t = tanh_softplus(lx, x)?;
    let one = k(lx, x, 1.0)?;
    let t2 = lx.b.mul(t, t)?;
    let sech2 = lx.b.sub(one, t2)?;
    let xs = lx.b.mul(x, s)?;
    let p = lx.b.mul(xs, sech2)?;
    let d = lx.b.add(t, p)?;
    let r = lx.b.mul(g, d)?;
    done(lx, r, out)
}

/// softplus(self, beta=1, threshold=20)
fn softplus(lx: &mut Lower, args: &Args) -> R {
    let (x, out) = input(lx, args, 0, "softplus_cpu", false)?;
    let beta = scalar(lx, args, 1, x, 1.0)?;
    let th = scalar(lx, args, 2, x, 20.0)?;
    let xb = lx.b.mul(x, beta)?;
    let e = lx.b.exp(xb)?;
    let l = lx.b.log_plus_one(e)?;
    let soft = lx.b.div(l, beta)?;
    let r = select_cmp(lx, xb, th, CompareDir::Gt, x, soft)?;
    done(lx, r, out)
}

/// softplus_backward(grad_output, self, beta, threshold)
fn softplus_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, x, out) = grad_input(lx, args, 0, 1)?;
    let beta = scalar(lx, args, 2, x, 1.0)?;
    let th = scalar(lx, args, 3, x, 20.0)?;
    let xb = lx.b.mul(x, beta)?;
    let z = lx.b.exp(xb)?;
    let one = k(lx, x, 1.0)?;
    let z1 = lx.b.add(z, one)?;
    let gz = lx.b.mul(g, z)?;
    let d = lx.b.div(gz, z1)?;
    let r = select_cmp(lx, xb, th, CompareDir::Gt, g, d)?;
    done(lx, r, out)
}

/// Clamps to [lo, hi], keeping NaN.
fn clamp_keep_nan(lx: &mut Lower, x: Value, lo: Value, hi: Value) -> Result<Value> {
    let r = select_cmp(lx, x, lo, CompareDir::Lt, lo, x)?;
    select_cmp(lx, r, hi, CompareDir::Gt, hi, r)
}

/// hardtanh(self, min_val=-1, max_val=1)
fn hardtanh(lx: &mut Lower, args: &Args) -> R {
    let (x, out) = input(lx, args, 0, "hardtanh", true)?;
    let lo = scalar(lx, args, 1, x, -1.0)?;
    let hi = scalar(lx, args, 2, x, 1.0)?;
    let r = clamp_keep_nan(lx, x, lo, hi)?;
    done(lx, r, out)
}

/// hardtanh_backward(grad_output, self, min_val, max_val)
fn hardtanh_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, x, out) = grad_input(lx, args, 0, 1)?;
    let lo = scalar(lx, args, 2, x, -1.0)?;
    let hi = scalar(lx, args, 3, x, 1.0)?;
    let below = cmp(lx, x, lo, CompareDir::Le)?;
    let above = cmp(lx, x, hi, CompareDir::Ge)?;
    let outside = lx.b.or(below, above)?;
    let zero = k(lx, g, 0.0)?;
    let r = lx.b.select(outside, zero, g)?;
    done(lx, r, out)
}

/// `min(max(x + 3, 0), 6)`
fn relu6_shift(lx: &mut Lower, x: Value) -> Result<Value> {
    let three = k(lx, x, 3.0)?;
    let zero = k(lx, x, 0.0)?;
    let six = k(lx, x, 6.0)?;
    let s = lx.b.add(x, three)?;
    clamp_keep_nan(lx, s, zero, six)
}

fn hardsigmoid(lx: &mut Lower, args: &Args) -> R {
    let (x, out) = input(lx, args, 0, "hardsigmoid_cpu", false)?;
    let c = relu6_shift(lx, x)?;
    let six = k(lx, x, 6.0)?;
    let r = lx.b.div(c, six)?;
    done(lx, r, out)
}

fn hardsigmoid_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, x, out) = grad_input(lx, args, 0, 1)?;
    let m3 = k(lx, x, -3.0)?;
    let p3 = k(lx, x, 3.0)?;
    let a = cmp(lx, x, m3, CompareDir::Gt)?;
    let b = cmp(lx, x, p3, CompareDir::Lt)?;
    let inside = lx.b.and(a, b)?;
    let six = k(lx, g, 6.0)?;
    let g6 = lx.b.div(g, six)?;
    let zero = k(lx, g, 0.0)?;
    let r = lx.b.select(inside, g6, zero)?;
    done(lx, r, out)
}

fn hardswish(lx: &mut Lower, args: &Args) -> R {
    let (x, out) = input(lx, args, 0, "hardswish_cpu", false)?;
    let c = relu6_shift(lx, x)?;
    let xc = lx.b.mul(x, c)?;
    let six = k(lx, x, 6.0)?;
    let r = lx.b.div(xc, six)?;
    done(lx, r, out)
}

fn hardswish_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, x, out) = grad_input(lx, args, 0, 1)?;
    let m3 = k(lx, x, -3.0)?;
    let p3 = k(lx, x, 3.0)?;
    let half = k(lx, x, 0.5)?;
    let zero = k(lx, g, 0.0)?;
    let x3 = lx.b.div(x, p3)?;
    let d = lx.b.add(x3, half)?;
    let mid = lx.b.mul(g, d)?;
    // PyTorch's boundaries: 0 for x <= -3, the slope for -3 < x < 3.
    let r = select_cmp(lx, x, p3, CompareDir::Lt, mid, g)?;
    let r = select_cmp(lx, x, m3, CompareDir::Le, zero, r)?;
    done(lx, r, out)
}

/// sigmoid_backward(grad_output, output): `g * (1 - y) * y`.
fn sigmoid_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, y, out) = grad_input(lx, args, 0, 1)?;
    let r = sigmoid_grad(lx, g, y)?;
    done(lx, r, out)
}

/// tanh_backward(grad_output, output): `g * (1 - y^2)`.
fn tanh_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, y, out) = grad_input(lx, args, 0, 1)?;
    let r = tanh_grad(lx, g, y)?;
    done(lx, r, out)
}

/// `g * (1 - y) * y`: a gradient through a sigmoid, from its output `y`.
pub(crate) fn sigmoid_grad(lx: &mut Lower, g: Value, y: Value) -> Result<Value> {
    let one = k(lx, y, 1.0)?;
    let omy = lx.b.sub(one, y)?;
    if !lx.dtype(y).is_complex() {
        let a = lx.b.mul(g, omy)?;
        return Ok(lx.b.mul(a, y)?);
    }
    let d = lx.b.mul(omy, y)?;
    let d = lx.b.conj(d)?;
    Ok(lx.b.mul(g, d)?)
}

/// PyTorch's complex gradients multiply by the conjugate derivative.
fn conj_if_complex(lx: &mut Lower, d: Value) -> Result<Value> {
    if lx.dtype(d).is_complex() {
        Ok(lx.b.conj(d)?)
    } else {
        Ok(d)
    }
}

/// `g * (1 - y^2)`: a gradient through tanh, from its output `y`.
pub(crate) fn tanh_grad(lx: &mut Lower, g: Value, y: Value) -> Result<Value> {
    let one = k(lx, y, 1.0)?;
    let y2 = lx.b.mul(y, y)?;
    let d = lx.b.sub(one, y2)?;
    let d = conj_if_complex(lx, d)?;
    Ok(lx.b.mul(g, d)?)
}
