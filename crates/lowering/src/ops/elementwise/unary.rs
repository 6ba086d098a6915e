//! Unary elementwise ops: math functions (ints and bool give float32),
//! neg/abs/sign/square, rounding, and the NaN/inf tests.
use stablehlo::{CompareDir, DType, Value};

use super::arith::trunc_vals;
use crate::ops::complex_inverse as ci;
use super::{cmp, float_of, is_nan, k, not_for, wide};
use crate::args::{Arg, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

type R = Result<Vec<Value>>;

/// Applies `f` to tensor argument 0 in float: ints and bool give float32,
/// f16/bf16 are computed in f32 and rounded back.
fn unary_float(lx: &mut Lower, args: &Args, f: fn(&mut Lower, Value) -> Result<Value>) -> R {
    let t = args.tensor(0)?;
    let out = float_of(t.dtype);
    let x = lx.cast(t.value, wide(out))?;
    let y = f(lx, x)?;
    Ok(vec![lx.cast(y, out)?])
}

/// asin, acos and atan: complex arguments go to `complex_inverse.rs`.
pub(crate) fn asin(lx: &mut Lower, args: &Args) -> R {
    ci::complex_or(lx, args, real_asin, ci::asin)
}

pub(crate) fn acos(lx: &mut Lower, args: &Args) -> R {
    ci::complex_or(lx, args, real_acos, ci::acos)
}

pub(crate) fn atan(lx: &mut Lower, args: &Args) -> R {
    ci::complex_or(lx, args, real_atan, ci::atan)
}

macro_rules! float_unary {
    ($($name:ident($lx:ident, $x:ident) $body:block)*) => {
        $(
            pub(crate) fn $name(lx: &mut Lower, args: &Args) -> R {
                unary_float(lx, args, |$lx, $x| $body)
            }
        )*
    };
}

/// `sqrt((1 - x) * (1 + x))`, accurate near ±1.
fn sqrt_one_minus_sq(lx: &mut Lower, x: Value) -> Result<Value> {
    let one = k(lx, x, 1.0)?;
    let a = lx.b.sub(one, x)?;
    let b = lx.b.add(one, x)?;
    let p = lx.b.mul(a, b)?;
    Ok(lx.b.sqrt(p)?)
}

float_unary! {
    exp(lx, x) { Ok(lx.b.exp(x)?) }
    exp2(lx, x) {
        let two = k(lx, x, 2.0)?;
        Ok(lx.b.pow(two, x)?)
    }
    expm1(lx, x) { Ok(lx.b.exponential_minus_one(x)?) }
    log(lx, x) { Ok(lx.b.log(x)?) }
    log2(lx, x) {
        let l = lx.b.log(x)?;
        let c = k(lx, x, std::f64::consts::LN_2)?;
        Ok(lx.b.div(l, c)?)
    }
    log10(lx, x) {
        let l = lx.b.log(x)?;
        let c = k(lx, x, std::f64::consts::LN_10)?;
        Ok(lx.b.div(l, c)?)
    }
    log1p(lx, x) { Ok(lx.b.log_plus_one(x)?) }
    sqrt(lx, x) { Ok(lx.b.sqrt(x)?) }
    rsqrt(lx, x) { Ok(lx.b.rsqrt(x)?) }
    reciprocal(lx, x) {
        let one = k(lx, x, 1.0)?;
        Ok(lx.b.div(one, x)?)
    }
    sin(lx, x) { Ok(lx.b.sine(x)?) }
    cos(lx, x) { Ok(lx.b.cosine(x)?) }
    tan(lx, x) { Ok(lx.b.tan(x)?) }
    real_asin(lx, x) {
        let c = sqrt_one_minus_sq(lx, x)?;
        Ok(lx.b.atan2(x, c)?)
    }
    real_acos(lx, x) {
        let s = sqrt_one_minus_sq(lx, x)?;
        Ok(lx.b.atan2(s, x)?)
    }
    real_atan(lx, x) {
        // 2 * atan2(x, 1 + hypot(1, x)): a plain atan2(x, 1) miscomputes on
        // XLA CPU for bf16 inputs of 32+ elements (see the helper report).
        let one = k(lx, x, 1.0)?;
        let ax = lx.b.abs(x)?;
        let big = cmp(lx, ax, one, CompareDir::Gt)?;
        let inv = lx.b.div(one, x)?;
        let inv2 = lx.b.mul(inv, inv)?;
        let s1 = lx.b.add(one, inv2)?;
        let r1 = lx.b.sqrt(s1)?;
        let h_big = lx.b.mul(ax, r1)?;
        let x2 = lx.b.mul(x, x)?;
        let s2 = lx.b.add(one, x2)?;
        let h_small = lx.b.sqrt(s2)?;
        let h = lx.b.select(big, h_big, h_small)?;
        let den = lx.b.add(one, h)?;
        let half_angle = lx.b.atan2(x, den)?;
        Ok(lx.b.add(half_angle, half_angle)?)
    }
    sinh(lx, x) {
        // (expm1(x) - expm1(-x)) / 2: no cancellation near 0.
        let a = lx.b.exponential_minus_one(x)?;
        let nx = lx.b.neg(x)?;
        let b = lx.b.exponential_minus_one(nx)?;
        let d = lx.b.sub(a, b)?;
        let half = k(lx, x, 0.5)?;
        Ok(lx.b.mul(d, half)?)
    }
    cosh(lx, x) {
        let a = lx.b.exp(x)?;
        let nx = lx.b.neg(x)?;
        let b = lx.b.exp(nx)?;
        let s = lx.b.add(a, b)?;
        let half = k(lx, x, 0.5)?;
        Ok(lx.b.mul(s, half)?)
    }
    tanh(lx, x) { Ok(lx.b.tanh(x)?) }
    erf(lx, x) { crate::ops::special_fns::erf_precise(lx, x) }
    erfc(lx, x) { crate::ops::special_fns::erfc(lx, x) }
    erfinv(lx, x) { crate::ops::special_fns::erfinv_precise(lx, x) }
    sigmoid(lx, x) {
        if !lx.dtype(x).is_complex() {
            return Ok(lx.b.logistic(x)?);
        }
        // StableHLO's logistic is real-only: 1 / (1 + exp(-z)).
        let one = k(lx, x, 1.0)?;
        let nx = lx.b.neg(x)?;
        let e = lx.b.exp(nx)?;
        let den = lx.b.add(one, e)?;
        Ok(lx.b.div(one, den)?)
    }
}

pub(crate) fn neg(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if t.dtype == DType::Bool {
        bail!(
            NotImplemented,
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead."
        );
    }
    Ok(vec![lx.b.neg(t.value)?])
}

pub(crate) fn abs(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    match t.dtype {
        DType::Bool => Err(not_for("abs_cpu", t.dtype)),
        d if d.is_unsigned_integer() => Ok(vec![t.value]),
        d if d.is_complex() => Ok(vec![crate::ops::complex::abs(lx, t.value)?]),
        _ => Ok(vec![lx.b.abs(t.value)?]),
    }
}

/// sign/sgn: `(x > 0) - (x < 0)` (0 for NaN, as torch).
pub(crate) fn sign(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if t.dtype == DType::Bool {
        return Ok(vec![t.value]);
    }
    if t.dtype.is_complex() {
        return Ok(vec![crate::ops::complex::sgn(lx, t.value)?]);
    }
    let zero = k(lx, t.value, 0.0)?;
    let pos = cmp(lx, t.value, zero, CompareDir::Gt)?;
    let pos = lx.cast(pos, t.dtype)?;
    if t.dtype.is_unsigned_integer() {
        return Ok(vec![pos]);
    }
    let negative = cmp(lx, t.value, zero, CompareDir::Lt)?;
    let negative = lx.cast(negative, t.dtype)?;
    Ok(vec![lx.b.sub(pos, negative)?])
}

/// square: x * x (bool gives int64, as torch's pow(x, 2)).
pub(crate) fn square(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    let out = if t.dtype == DType::Bool { DType::I64 } else { t.dtype };
    let x = lx.cast(t.value, wide(out))?;
    let y = lx.b.mul(x, x)?;
    Ok(vec![lx.cast(y, out)?])
}

/// A rounding op: identity on integers, an error on bool.
fn rounding(lx: &mut Lower, args: &Args, name: &str, f: fn(&mut Lower, Value) -> Result<Value>) -> R {
    let t = args.tensor(0)?;
    if t.dtype == DType::Bool {
        return Err(not_for(name, t.dtype));
    }
    if !t.dtype.is_float() {
        return Ok(vec![t.value]);
    }
    Ok(vec![f(lx, t.value)?])
}

pub(crate) fn floor(lx: &mut Lower, args: &Args) -> R {
    rounding(lx, args, "floor_vml_cpu", |lx, x| Ok(lx.b.floor(x)?))
}

pub(crate) fn ceil(lx: &mut Lower, args: &Args) -> R {
    rounding(lx, args, "ceil_vml_cpu", |lx, x| Ok(lx.b.ceil(x)?))
}

pub(crate) fn trunc(lx: &mut Lower, args: &Args) -> R {
    rounding(lx, args, "trunc_vml_cpu", trunc_vals)
}

/// round(self) and round.decimals(self, *, decimals): half to even.
pub(crate) fn round(lx: &mut Lower, args: &Args) -> R {
    let decimals = args.int_or(1, 0)?;
    let t = args.tensor(0)?;
    if t.dtype == DType::Bool {
        return Err(not_for("round_vml_cpu", t.dtype));
    }
    if !t.dtype.is_float() {
        if decimals != 0 {
            bail!(Runtime, "round_cpu not implemented for '{}' with decimals != 0", super::type_name(t.dtype));
        }
        return Ok(vec![t.value]);
    }
    if decimals == 0 {
        return Ok(vec![lx.b.round_nearest_even(t.value)?]);
    }
    let x = lx.cast(t.value, wide(t.dtype))?;
    let ten = k(lx, x, 10f64.powi(decimals.unsigned_abs() as i32))?;
    let r = if decimals > 0 {
        let m = lx.b.mul(x, ten)?;
        let r = lx.b.round_nearest_even(m)?;
        lx.b.div(r, ten)?
    } else {
        let d = lx.b.div(x, ten)?;
        let r = lx.b.round_nearest_even(d)?;
        lx.b.mul(r, ten)?
    };
    Ok(vec![lx.cast(r, t.dtype)?])
}

pub(crate) fn frac(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if !t.dtype.is_float() {
        return Err(not_for("frac_cpu", t.dtype));
    }
    let tr = trunc_vals(lx, t.value)?;
    Ok(vec![lx.b.sub(t.value, tr)?])
}

fn bool_test(lx: &mut Lower, args: &Args, non_float: bool, f: fn(&mut Lower, Value) -> Result<Value>) -> R {
    let t = args.tensor(0)?;
    if !t.dtype.is_float() && !t.dtype.is_complex() {
        return Ok(vec![lx.full(DType::Bool, non_float as i32 as f64, &t.shape)?]);
    }
    Ok(vec![f(lx, t.value)?])
}

pub(crate) fn isnan(lx: &mut Lower, args: &Args) -> R {
    bool_test(lx, args, false, is_nan)
}

pub(crate) fn isinf(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if t.dtype.is_complex() {
        // Either part infinite (|z| would overflow for large finite parts).
        let z = t.value;
        let (re, im) = (lx.b.real(z)?, lx.b.imag(z)?);
        let (re, im) = (lx.b.abs(re)?, lx.b.abs(im)?);
        let inf = k(lx, re, f64::INFINITY)?;
        let (a, b) = (cmp(lx, re, inf, CompareDir::Eq)?, cmp(lx, im, inf, CompareDir::Eq)?);
        return Ok(vec![lx.b.or(a, b)?]);
    }
    bool_test(lx, args, false, |lx, x| {
        let a = lx.b.abs(x)?;
        let inf = k(lx, x, f64::INFINITY)?;
        cmp(lx, a, inf, CompareDir::Eq)
    })
}

pub(crate) fn isposinf(lx: &mut Lower, args: &Args) -> R {
    bool_test(lx, args, false, |lx, x| {
        let inf = k(lx, x, f64::INFINITY)?;
        cmp(lx, x, inf, CompareDir::Eq)
    })
}

pub(crate) fn isneginf(lx: &mut Lower, args: &Args) -> R {
    bool_test(lx, args, false, |lx, x| {
        let inf = k(lx, x, f64::NEG_INFINITY)?;
        cmp(lx, x, inf, CompareDir::Eq)
    })
}

pub(crate) fn isfinite(lx: &mut Lower, args: &Args) -> R {
    bool_test(lx, args, true, |lx, x| Ok(lx.b.is_finite(x)?))
}

/// The largest finite value of a float dtype.
fn finite_max(d: DType) -> f64 {
    match d {
        DType::F16 => 65504.0,
        DType::BF16 => 3.3895313892515355e38,
        DType::F32 => f32::MAX as f64,
        _ => f64::MAX,
    }
}

/// nan_to_num(self, nan=None, posinf=None, neginf=None).
pub(crate) fn nan_to_num(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if !t.dtype.is_float() && !t.dtype.is_complex() {
        return Ok(vec![t.value]);
    }
    let opt = |i: usize| -> Result<Option<f64>> {
        match args.get(i) {
            Arg::None => Ok(None),
            _ => args.float(i).map(Some),
        }
    };
    // A complex tensor's parts are replaced separately, as on the CPU.
    let part = t.dtype.complex_part().unwrap_or(t.dtype);
    let nan = opt(1)?.unwrap_or(0.0);
    let posinf = opt(2)?.unwrap_or(finite_max(part));
    let neginf = opt(3)?.unwrap_or(-finite_max(part));
    let replace = |lx: &mut Lower, x: Value| -> Result<Value> {
        let isn = is_nan(lx, x)?;
        let nv = k(lx, x, nan)?;
        let r = lx.b.select(isn, nv, x)?;
        let pinf = k(lx, x, f64::INFINITY)?;
        let isp = cmp(lx, x, pinf, CompareDir::Eq)?;
        let pv = k(lx, x, posinf)?;
        let r = lx.b.select(isp, pv, r)?;
        let ninf = k(lx, x, f64::NEG_INFINITY)?;
        let isneg = cmp(lx, x, ninf, CompareDir::Eq)?;
        let nvv = k(lx, x, neginf)?;
        Ok(lx.b.select(isneg, nvv, r)?)
    };
    if t.dtype.is_complex() {
        let (re, im) = (lx.b.real(t.value)?, lx.b.imag(t.value)?);
        let (re, im) = (replace(lx, re)?, replace(lx, im)?);
        return Ok(vec![lx.b.complex(re, im)?]);
    }
    Ok(vec![replace(lx, t.value)?])
}
