//! Ops added from the OpInfo coverage run (tests/test_opinfo.py): inverse
//! hyperbolic functions (complex ones in `complex_inverse.rs`), sinc, logaddexp/logaddexp2 and log_sigmoid.
//!
//! Same conventions as `elementwise.rs`: ints and bool give float32, f16/bf16
//! are computed in f32 and rounded back.
use stablehlo::{CompareDir, Value};

use super::complex_inverse::{self as ci, complex_or};
use super::elementwise::{cmp, compute, float_of, k, not_for, wide};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::promote::result_type;
use crate::table::OpEntry;

type R = Result<Vec<Value>>;

pub const OPS: &[OpEntry] = &[
    op!("asinh", asinh),
    op!("arcsinh", asinh),
    op!("acosh", acosh),
    op!("arccosh", acosh),
    op!("atanh", atanh),
    op!("arctanh", atanh),
    op!("sinc", sinc),
    op!("logaddexp", logaddexp),
    op!("logaddexp2", logaddexp2),
    op!("log_sigmoid_forward", log_sigmoid_forward),
    op!("log_sigmoid_backward", log_sigmoid_backward),
];

/// Applies `f` to tensor argument 0 in float.
fn unary(lx: &mut Lower, args: &Args, f: fn(&mut Lower, Value) -> Result<Value>) -> R {
    let t = args.tensor(0)?;
    let out = float_of(t.dtype);
    let x = lx.cast(t.value, wide(out))?;
    let y = f(lx, x)?;
    Ok(vec![lx.cast(y, out)?])
}

/// Where |x| > 2^28, `log(|x|) + ln 2` (the large-argument form of asinh/acosh).
fn big_log(lx: &mut Lower, x: Value, small: Value) -> Result<Value> {
    let ax = lx.b.abs(x)?;
    let lim = k(lx, x, 268435456.0)?;
    let big = cmp(lx, ax, lim, CompareDir::Gt)?;
    let l = lx.b.log(ax)?;
    let ln2 = k(lx, x, std::f64::consts::LN_2)?;
    let lb = lx.b.add(l, ln2)?;
    Ok(lx.b.select(big, lb, small)?)
}

/// asinh of a real value: sign(x) * log1p(a + a^2 / (1 + sqrt(1 + a^2))), a = |x|,
/// and x itself below 2^-28 (where asinh x rounds to x; keeps -0 signed).
pub(crate) fn asinh_of(lx: &mut Lower, x: Value) -> Result<Value> {
    let a = lx.b.abs(x)?;
    let one = k(lx, x, 1.0)?;
    let a2 = lx.b.mul(a, a)?;
    let s = lx.b.add(one, a2)?;
    let r = lx.b.sqrt(s)?;
    let d = lx.b.add(one, r)?;
    let q = lx.b.div(a2, d)?;
    let t = lx.b.add(a, q)?;
    let l = lx.b.log_plus_one(t)?;
    let l = big_log(lx, x, l)?;
    let zero = k(lx, x, 0.0)?;
    let neg = cmp(lx, x, zero, CompareDir::Lt)?;
    let nl = lx.b.neg(l)?;
    let l = lx.b.select(neg, nl, l)?;
    let tiny = k(lx, x, 1.0 / 268435456.0)?;
    let is_tiny = cmp(lx, a, tiny, CompareDir::Lt)?;
    Ok(lx.b.select(is_tiny, x, l)?)
}

pub(crate) fn asinh(lx: &mut Lower, args: &Args) -> R {
    complex_or(lx, args, |lx, args| unary(lx, args, asinh_of), ci::asinh)
}

pub(crate) fn acosh(lx: &mut Lower, args: &Args) -> R {
    complex_or(lx, args, real_acosh, ci::acosh)
}

fn real_acosh(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, |lx, x| {
        // log1p(t + sqrt(t * (t + 2))), t = x - 1 (NaN for x < 1)
        let one = k(lx, x, 1.0)?;
        let two = k(lx, x, 2.0)?;
        let t = lx.b.sub(x, one)?;
        let t2 = lx.b.add(t, two)?;
        let p = lx.b.mul(t, t2)?;
        let r = lx.b.sqrt(p)?;
        let s = lx.b.add(t, r)?;
        let l = lx.b.log_plus_one(s)?;
        let l = big_log(lx, x, l)?;
        let lt = cmp(lx, x, one, CompareDir::Lt)?;
        let nan = k(lx, x, f64::NAN)?;
        Ok(lx.b.select(lt, nan, l)?)
    })
}

pub(crate) fn atanh(lx: &mut Lower, args: &Args) -> R {
    complex_or(lx, args, real_atanh, ci::atanh)
}

fn real_atanh(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, |lx, x| {
        // 0.5 * log1p(2x / (1 - x))
        let one = k(lx, x, 1.0)?;
        let d = lx.b.sub(one, x)?;
        let x2 = lx.b.add(x, x)?;
        let q = lx.b.div(x2, d)?;
        let l = lx.b.log_plus_one(q)?;
        let half = k(lx, x, 0.5)?;
        Ok(lx.b.mul(l, half)?)
    })
}

pub(crate) fn sinc(lx: &mut Lower, args: &Args) -> R {
    unary(lx, args, |lx, x| {
        let pi = k(lx, x, std::f64::consts::PI)?;
        let px = lx.b.mul(x, pi)?;
        let s = lx.b.sine(px)?;
        let q = lx.b.div(s, px)?;
        let zero = k(lx, x, 0.0)?;
        let one = k(lx, x, 1.0)?;
        let z = cmp(lx, x, zero, CompareDir::Eq)?;
        Ok(lx.b.select(z, one, q)?)
    })
}

/// max(a, b) + log1p(base^-|a - b|) / ln(base); a where a == b is infinite.
fn logaddexp_base(lx: &mut Lower, args: &Args, name: &str, base2: bool) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let out = result_type(&[&a, &b]);
    if out.is_complex() && !base2 {
        return Ok(vec![compute(lx, &[&a, &b], out, |lx, v| crate::ops::complex::logaddexp(lx, v[0], v[1]))?]);
    }
    if !out.is_float() {
        return Err(not_for(name, out));
    }
    let r = compute(lx, &[&a, &b], out, |lx, v| {
        let (x, y) = (v[0], v[1]);
        let m = lx.b.max(x, y)?;
        let d = lx.b.sub(x, y)?;
        let ad = lx.b.abs(d)?;
        let nd = lx.b.neg(ad)?;
        let e = if base2 {
            let two = k(lx, x, 2.0)?;
            lx.b.pow(two, nd)?
        } else {
            lx.b.exp(nd)?
        };
        let mut l = lx.b.log_plus_one(e)?;
        if base2 {
            let ln2 = k(lx, x, std::f64::consts::LN_2)?;
            l = lx.b.div(l, ln2)?;
        }
        let s = lx.b.add(m, l)?;
        let eq = cmp(lx, x, y, CompareDir::Eq)?;
        let inf = k(lx, x, f64::INFINITY)?;
        let ax = lx.b.abs(x)?;
        let isinf = cmp(lx, ax, inf, CompareDir::Eq)?;
        let both = lx.b.and(eq, isinf)?;
        Ok(lx.b.select(both, x, s)?)
    })?;
    Ok(vec![r])
}

pub(crate) fn logaddexp(lx: &mut Lower, args: &Args) -> R {
    logaddexp_base(lx, args, "logaddexp_cpu", false)
}

pub(crate) fn logaddexp2(lx: &mut Lower, args: &Args) -> R {
    logaddexp_base(lx, args, "logaddexp2_cpu", true)
}

/// (min(x, 0) - log1p(exp(-|x|)), buffer): the CPU kernel's buffer is empty.
pub(crate) fn log_sigmoid_forward(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    let dt = t.dtype;
    let out = unary(lx, args, |lx, x| {
        let zero = k(lx, x, 0.0)?;
        let m = lx.b.min(x, zero)?;
        let a = lx.b.abs(x)?;
        let na = lx.b.neg(a)?;
        let e = lx.b.exp(na)?;
        let l = lx.b.log_plus_one(e)?;
        Ok(lx.b.sub(m, l)?)
    })?;
    let buffer = lx.full(float_of(dt), 0.0, &[0])?;
    Ok(vec![out[0], buffer])
}

/// grad_output * sigmoid(-x).
pub(crate) fn log_sigmoid_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, x) = (args.operand(0)?, args.operand(1)?);
    let out = float_of(result_type(&[&g, &x]));
    let r = compute(lx, &[&g, &x], out, |lx, v| {
        let nx = lx.b.neg(v[1])?;
        let s = lx.b.logistic(nx)?;
        Ok(lx.b.mul(v[0], s)?)
    })?;
    Ok(vec![r])
}
