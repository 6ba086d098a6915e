//! Binary and ternary arithmetic: add/sub/mul/div (with alpha and rounding
//! modes), remainder, fmod, pow, maximum/minimum/fmax/fmin, clamp, lerp,
//! addcmul/addcdiv, atan2, hypot, copysign, xlogy.
use stablehlo::{CompareDir, DType, Value};

use super::{cmp, compute, float_of, is_nan, k, nan_max_min, not_for};
use crate::args::{Arg, Args, Operand, PromoClass};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::promote::result_type;

type R = Result<Vec<Value>>;

/// Argument `i` as an operand, or None when it was not given.
pub(crate) fn opt_operand(args: &Args, i: usize) -> Result<Option<Operand>> {
    match args.get(i) {
        Arg::None => Ok(None),
        _ => args.operand(i).map(Some),
    }
}

/// `a + alpha * b` (or `a - alpha * b`).
pub(crate) fn add_ops(lx: &mut Lower, a: &Operand, b: &Operand, alpha: Option<&Operand>, subtract: bool) -> Result<Value> {
    let out = result_type(&[a, b]);
    if subtract && a.dtype == DType::Bool && b.dtype == DType::Bool {
        bail!(Runtime, "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead.");
    }
    if subtract && (a.dtype == DType::Bool || b.dtype == DType::Bool) {
        bail!(Runtime, "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
    }
    if let Some(al) = alpha {
        if !out.is_float() && al.dtype.is_float() {
            bail!(Runtime, "For integral input tensors, argument alpha must not be a floating point number.");
        }
        if out != DType::Bool && al.dtype == DType::Bool {
            bail!(Runtime, "Boolean alpha only supported for Boolean results.");
        }
    }
    compute(lx, &[a, b], out, |lx, v| {
        let mut rhs = v[1];
        if let Some(al) = alpha {
            let c = lx.cast(al.value, lx.dtype(rhs))?;
            let shape = lx.shape(rhs);
            let c = lx.expand(c, &shape)?;
            rhs = lx.b.mul(rhs, c)?;
        }
        Ok(if subtract { lx.b.sub(v[0], rhs)? } else { lx.b.add(v[0], rhs)? })
    })
}

pub(crate) fn mul_ops(lx: &mut Lower, a: &Operand, b: &Operand) -> Result<Value> {
    let out = result_type(&[a, b]);
    compute(lx, &[a, b], out, |lx, v| Ok(lx.b.mul(v[0], v[1])?))
}

/// `a / b`; `mode` is None (true division), "trunc" or "floor".
pub(crate) fn div_ops(lx: &mut Lower, a: &Operand, b: &Operand, mode: Option<&str>) -> Result<Value> {
    let mut out = result_type(&[a, b]);
    match mode {
        None => out = float_of(out),
        Some("trunc") | Some("floor") => {}
        Some(m) => bail!(
            Runtime,
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{m}'"
        ),
    }
    if out == DType::Bool {
        out = DType::I64; // torch divides bools as integers
    }
    compute(lx, &[a, b], out, |lx, v| {
        let (x, y) = (v[0], v[1]);
        let float = lx.dtype(x).is_float();
        if mode.is_some() {
            check_zero_divisor(lx, y)?;
        }
        let q = lx.b.div(x, y)?;
        Ok(match (mode, float) {
            (None, _) | (Some("trunc"), false) => q,
            (Some("trunc"), true) => trunc_vals(lx, q)?,
            (_, true) => floor_div_float(lx, x, y)?,
            (_, false) => {
                // Integer floor division: adjust truncation toward -inf.
                let r = lx.b.rem(x, y)?;
                let zero = k(lx, r, 0.0)?;
                let nz = cmp(lx, r, zero, CompareDir::Ne)?;
                let rneg = cmp(lx, r, zero, CompareDir::Lt)?;
                let bneg = cmp(lx, y, zero, CompareDir::Lt)?;
                let differ = lx.b.xor(rneg, bneg)?;
                let adjust = lx.b.and(nz, differ)?;
                let one = k(lx, q, 1.0)?;
                let qm1 = lx.b.sub(q, one)?;
                lx.b.select(adjust, qm1, q)?
            }
        })
    })
}

/// Integer division by zero raises RuntimeError("ZeroDivisionError") at the
/// next host sync, as the CPU raises it at once (XLA would return garbage).
fn check_zero_divisor(lx: &mut Lower, y: Value) -> Result<()> {
    if lx.dtype(y).is_float() || lx.dtype(y).is_complex() {
        return Ok(());
    }
    let zero = k(lx, y, 0.0)?;
    let is_zero = cmp(lx, y, zero, CompareDir::Eq)?;
    let bad = crate::ops::indexing::any(lx, is_zero)?;
    lx.check_runtime(bad, "ZeroDivisionError".to_string());
    Ok(())
}

/// Rounds toward zero.
pub(crate) fn trunc_vals(lx: &mut Lower, x: Value) -> Result<Value> {
    let f = lx.b.floor(x)?;
    let c = lx.b.ceil(x)?;
    let zero = k(lx, x, 0.0)?;
    let neg = cmp(lx, x, zero, CompareDir::Lt)?;
    Ok(lx.b.select(neg, c, f)?)
}

/// PyTorch's `div_floor_floating`: floor(a / b) computed from fmod so that
/// it is exact where a plain floor of the quotient would round wrongly.
fn floor_div_float(lx: &mut Lower, a: Value, b: Value) -> Result<Value> {
    let zero = k(lx, a, 0.0)?;
    let one = k(lx, a, 1.0)?;
    let half = k(lx, a, 0.5)?;
    let q = lx.b.div(a, b)?;
    let m = lx.b.rem(a, b)?;
    let am = lx.b.sub(a, m)?;
    let d0 = lx.b.div(am, b)?;
    let mnz = cmp(lx, m, zero, CompareDir::Ne)?;
    let bneg = cmp(lx, b, zero, CompareDir::Lt)?;
    let mneg = cmp(lx, m, zero, CompareDir::Lt)?;
    let differ = lx.b.xor(bneg, mneg)?;
    let adjust = lx.b.and(mnz, differ)?;
    let d0m1 = lx.b.sub(d0, one)?;
    let d = lx.b.select(adjust, d0m1, d0)?;
    let fl = lx.b.floor(d)?;
    let frac = lx.b.sub(d, fl)?;
    let up = cmp(lx, frac, half, CompareDir::Gt)?;
    let fl1 = lx.b.add(fl, one)?;
    let fl = lx.b.select(up, fl1, fl)?;
    let dz = cmp(lx, d, zero, CompareDir::Eq)?;
    let signed_zero = lx.b.mul(zero, q)?;
    let r = lx.b.select(dz, signed_zero, fl)?;
    let bz = cmp(lx, b, zero, CompareDir::Eq)?;
    Ok(lx.b.select(bz, q, r)?)
}

/// Python's `%`: the remainder has the sign of the divisor.
pub(crate) fn remainder_ops(lx: &mut Lower, a: &Operand, b: &Operand) -> Result<Value> {
    let out = result_type(&[a, b]);
    if out == DType::Bool {
        return Err(not_for("remainder_cpu", out));
    }
    compute(lx, &[a, b], out, |lx, v| {
        check_zero_divisor(lx, v[1])?;
        let r = lx.b.rem(v[0], v[1])?;
        let zero = k(lx, r, 0.0)?;
        let nz = cmp(lx, r, zero, CompareDir::Ne)?;
        let rneg = cmp(lx, r, zero, CompareDir::Lt)?;
        let bneg = cmp(lx, v[1], zero, CompareDir::Lt)?;
        let differ = lx.b.xor(rneg, bneg)?;
        let adjust = lx.b.and(nz, differ)?;
        let rb = lx.b.add(r, v[1])?;
        Ok(lx.b.select(adjust, rb, r)?)
    })
}

/// `a ** b`; integer powers with negative exponents follow torch (0 unless
/// the base is ±1).
pub(crate) fn pow_ops(lx: &mut Lower, a: &Operand, b: &Operand) -> Result<Value> {
    let out = result_type(&[a, b]);
    if out == DType::Bool {
        return Err(not_for("pow", out));
    }
    compute(lx, &[a, b], out, |lx, v| {
        let (x, e) = (v[0], v[1]);
        if lx.dtype(x).is_float() || lx.dtype(x).is_complex() {
            return Ok(lx.b.pow(x, e)?);
        }
        let zero = k(lx, e, 0.0)?;
        let one = k(lx, e, 1.0)?;
        let m1 = k(lx, e, -1.0)?;
        let two = k(lx, e, 2.0)?;
        let neg = cmp(lx, e, zero, CompareDir::Lt)?;
        let epos = lx.b.select(neg, zero, e)?;
        let p = lx.b.pow(x, epos)?;
        let odd_r = lx.b.rem(e, two)?;
        let odd = cmp(lx, odd_r, zero, CompareDir::Ne)?;
        let is1 = cmp(lx, x, one, CompareDir::Eq)?;
        let ism1 = cmp(lx, x, m1, CompareDir::Eq)?;
        let sm1 = lx.b.select(odd, m1, one)?;
        let r = lx.b.select(ism1, sm1, zero)?;
        let r = lx.b.select(is1, one, r)?;
        Ok(lx.b.select(neg, r, p)?)
    })
}

/// clamp with optional lower and upper bounds (NaN propagates; lo > hi gives hi).
pub(crate) fn clamp_ops(lx: &mut Lower, x: &Operand, lo: Option<&Operand>, hi: Option<&Operand>) -> Result<Value> {
    if lo.is_none() && hi.is_none() {
        bail!(Runtime, "torch.clamp: At least one of 'min' or 'max' must not be None");
    }
    let mut ops = vec![x];
    ops.extend(lo);
    ops.extend(hi);
    let out = result_type(&ops);
    if out == DType::Bool {
        // The CPU clamps bools by one tensor bound only (max is or, min is and).
        let bound = match (lo, hi) {
            (Some(b), None) | (None, Some(b)) => b,
            _ => return Err(not_for("clamp_cpu", out)),
        };
        if bound.class == PromoClass::Wrapped {
            return Err(not_for(if lo.is_some() { "clamp_min_scalar_cpu" } else { "clamp_max_scalar_cpu" }, out));
        }
        return compute(lx, &ops, out, |lx, v| Ok(if lo.is_some() { lx.b.max(v[0], v[1])? } else { lx.b.min(v[0], v[1])? }));
    }
    let lo = lo.map(|b| int_bound(lx, b, out, true)).transpose()?;
    let hi = hi.map(|b| int_bound(lx, b, out, false)).transpose()?;
    let mut ops = vec![x];
    ops.extend(lo.as_ref());
    ops.extend(hi.as_ref());
    compute(lx, &ops, out, |lx, v| {
        let mut r = v[0];
        let mut i = 1;
        if lo.is_some() {
            r = nan_max_min(lx, r, v[i], true)?;
            i += 1;
        }
        if hi.is_some() {
            r = nan_max_min(lx, r, v[i], false)?;
        }
        Ok(r)
    })
}

/// A Python-number bound of an integer clamp, as the CPU treats it: a min
/// above the dtype's range (or a max below it) raises, and a bound beyond
/// the other end clamps nothing, so it saturates there (a plain conversion
/// would wrap: int8's clamp(-200, 200) turned into clamp(56, -56)).
fn int_bound(lx: &mut Lower, b: &Operand, out: DType, is_min: bool) -> Result<Operand> {
    let Some((lo, hi)) = out.int_range() else { return Ok(b.clone()) };
    if b.class != PromoClass::Wrapped || out == DType::Bool || out == DType::I64 || !b.dtype.is_integer() {
        return Ok(b.clone());
    }
    let dt = b.dtype;
    let (lov, hiv) = (lx.b.constant_i64(dt, lo as i64), lx.b.constant_i64(dt, hi as i64));
    let bad = if is_min { cmp(lx, b.value, hiv, CompareDir::Gt)? } else { cmp(lx, b.value, lov, CompareDir::Lt)? };
    lx.check_runtime(bad, format!("{}: Clamp {} value is outside the representable range of {}",
        lx.op, if is_min { "min" } else { "max" }, super::type_name(out)));
    let value = lx.b.clamp(lov, b.value, hiv)?;
    Ok(Operand { value, ..b.clone() })
}

/// `self + weight * (end - self)`, evaluated as PyTorch does for accuracy.
pub(crate) fn lerp_ops(lx: &mut Lower, s: &Operand, e: &Operand, w: &Operand) -> Result<Value> {
    let out = s.dtype;
    if e.dtype != out {
        bail!(Runtime, "{}: expected dtype {} for `end` but got dtype {}", lx.op, torch_dtype(out), torch_dtype(e.dtype));
    }
    // A 0-dim weight may differ (torch.tensor(0.7) with float64 tensors),
    // but not to the point of being complex for real tensors.
    if (w.class == PromoClass::Dimensioned && w.dtype != out) || (w.dtype.is_complex() && !out.is_complex()) {
        bail!(Runtime, "{}: expected dtype {} for `weight` but got dtype {}", lx.op, torch_dtype(out), torch_dtype(w.dtype));
    }
    if !out.is_float() && !out.is_complex() {
        return Err(not_for("lerp_kernel_scalar", out));
    }
    compute(lx, &[s, e, w], out, |lx, v| {
        let (s, e, w) = (v[0], v[1], v[2]);
        let diff = lx.b.sub(e, s)?;
        let wd = lx.b.mul(w, diff)?;
        let low = lx.b.add(s, wd)?;
        let one = k(lx, w, 1.0)?;
        let omw = lx.b.sub(one, w)?;
        let dw = lx.b.mul(diff, omw)?;
        let high = lx.b.sub(e, dw)?;
        let aw = if lx.dtype(w).is_complex() { crate::ops::complex::abs(lx, w)? } else { lx.b.abs(w)? };
        let half = k(lx, aw, 0.5)?;
        let small = cmp(lx, aw, half, CompareDir::Lt)?;
        Ok(lx.b.select(small, low, high)?)
    })
}

/// `self + value * t1 * t2` (or `self + value * t1 / t2`).
pub(crate) fn addc_ops(lx: &mut Lower, s: &Operand, t1: &Operand, t2: &Operand, value: Option<&Operand>, div: bool) -> Result<Value> {
    let out = result_type(&[s, t1, t2]);
    if div && !out.is_float() && !out.is_complex() {
        bail!(
            Runtime,
            "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), for all dtypes."
        );
    }
    compute(lx, &[s, t1, t2], out, |lx, v| {
        let mut a = v[1];
        if let Some(val) = value {
            let c = lx.cast(val.value, lx.dtype(a))?;
            let shape = lx.shape(a);
            let c = lx.expand(c, &shape)?;
            a = lx.b.mul(c, a)?;
        }
        let p = if div { lx.b.div(a, v[2])? } else { lx.b.mul(a, v[2])? };
        Ok(lx.b.add(v[0], p)?)
    })
}

pub(crate) fn torch_dtype(d: DType) -> String {
    crate::dtypes::name(d).trim_start_matches("torch.").to_string()
}

// ---- Args-level lowerings ----

pub(crate) fn add(lx: &mut Lower, args: &Args) -> R {
    let alpha = opt_operand(args, 2)?;
    Ok(vec![add_ops(lx, &args.operand(0)?, &args.operand(1)?, alpha.as_ref(), false)?])
}

pub(crate) fn sub(lx: &mut Lower, args: &Args) -> R {
    let alpha = opt_operand(args, 2)?;
    Ok(vec![add_ops(lx, &args.operand(0)?, &args.operand(1)?, alpha.as_ref(), true)?])
}

/// rsub(self, other, alpha): `other - alpha * self`.
pub(crate) fn rsub(lx: &mut Lower, args: &Args) -> R {
    let alpha = opt_operand(args, 2)?;
    Ok(vec![add_ops(lx, &args.operand(1)?, &args.operand(0)?, alpha.as_ref(), true)?])
}

pub(crate) fn mul(lx: &mut Lower, args: &Args) -> R {
    Ok(vec![mul_ops(lx, &args.operand(0)?, &args.operand(1)?)?])
}

pub(crate) fn div(lx: &mut Lower, args: &Args) -> R {
    let mode = args.opt_str(2).map(str::to_string);
    Ok(vec![div_ops(lx, &args.operand(0)?, &args.operand(1)?, mode.as_deref())?])
}

pub(crate) fn floor_divide(lx: &mut Lower, args: &Args) -> R {
    Ok(vec![div_ops(lx, &args.operand(0)?, &args.operand(1)?, Some("floor"))?])
}

pub(crate) fn remainder(lx: &mut Lower, args: &Args) -> R {
    Ok(vec![remainder_ops(lx, &args.operand(0)?, &args.operand(1)?)?])
}

pub(crate) fn fmod(lx: &mut Lower, args: &Args) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let out = result_type(&[&a, &b]);
    if out == DType::Bool {
        return Err(not_for("fmod_cpu", out));
    }
    Ok(vec![compute(lx, &[&a, &b], out, |lx, v| {
        check_zero_divisor(lx, v[1])?;
        Ok(lx.b.rem(v[0], v[1])?)
    })?])
}

pub(crate) fn pow(lx: &mut Lower, args: &Args) -> R {
    let (base, exp) = (args.operand(0)?, args.operand(1)?);
    // The exponent's value is part of the cache key (the row is `static`),
    // so the common literal exponents become plain multiplies and roots, as
    // in torch's CPU kernel; a general pow is several times slower.
    if let (Some(s), Ok(t)) = (args.opt_scalar(1), args.tensor(0)) {
        if (t.dtype.is_float() || t.dtype.is_complex()) && !s.from_tensor && !s.dtype.is_complex() {
            // 16-bit floats compute in f32 and round once, as torch's CPU does.
            let x = if t.dtype.size_bytes() == 2 { lx.cast(t.value, DType::F32)? } else { t.value };
            let special = match s.literal {
                1.0 => Some(x),
                2.0 => Some(lx.b.mul(x, x)?),
                3.0 => {
                    let sq = lx.b.mul(x, x)?;
                    Some(lx.b.mul(sq, x)?)
                }
                0.5 => Some(lx.b.sqrt(x)?),
                -0.5 => Some(lx.b.rsqrt(x)?),
                -1.0 => {
                    let one = k(lx, x, 1.0)?;
                    Some(lx.b.div(one, x)?)
                }
                _ => None,
            };
            if let Some(v) = special {
                return Ok(vec![lx.cast(v, t.dtype)?]);
            }
        }
    }
    Ok(vec![pow_ops(lx, &base, &exp)?])
}

/// float_power: pow computed and returned in float64.
pub(crate) fn float_power(lx: &mut Lower, args: &Args) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    Ok(vec![compute(lx, &[&a, &b], DType::F64, |lx, v| Ok(lx.b.pow(v[0], v[1])?))?])
}

fn min_max(lx: &mut Lower, args: &Args, max: bool, ignore_nan: bool) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let out = result_type(&[&a, &b]);
    Ok(vec![compute(lx, &[&a, &b], out, |lx, v| {
        if !ignore_nan {
            return nan_max_min(lx, v[0], v[1], max);
        }
        let r = if max { lx.b.max(v[0], v[1])? } else { lx.b.min(v[0], v[1])? };
        if !lx.dtype(r).is_float() {
            return Ok(r);
        }
        let na = is_nan(lx, v[0])?;
        let r = lx.b.select(na, v[1], r)?;
        let nb = is_nan(lx, v[1])?;
        Ok(lx.b.select(nb, v[0], r)?)
    })?])
}

pub(crate) fn maximum(lx: &mut Lower, args: &Args) -> R {
    min_max(lx, args, true, false)
}
pub(crate) fn minimum(lx: &mut Lower, args: &Args) -> R {
    min_max(lx, args, false, false)
}
pub(crate) fn fmax(lx: &mut Lower, args: &Args) -> R {
    min_max(lx, args, true, true)
}
pub(crate) fn fmin(lx: &mut Lower, args: &Args) -> R {
    min_max(lx, args, false, true)
}

/// clamp(self, min=None, max=None), Scalar or Tensor bounds.
pub(crate) fn clamp(lx: &mut Lower, args: &Args) -> R {
    let (lo, hi) = (opt_operand(args, 1)?, opt_operand(args, 2)?);
    Ok(vec![clamp_ops(lx, &args.operand(0)?, lo.as_ref(), hi.as_ref())?])
}
pub(crate) fn clamp_min(lx: &mut Lower, args: &Args) -> R {
    Ok(vec![clamp_ops(lx, &args.operand(0)?, Some(&args.operand(1)?), None)?])
}
pub(crate) fn clamp_max(lx: &mut Lower, args: &Args) -> R {
    Ok(vec![clamp_ops(lx, &args.operand(0)?, None, Some(&args.operand(1)?))?])
}

pub(crate) fn lerp(lx: &mut Lower, args: &Args) -> R {
    Ok(vec![lerp_ops(lx, &args.operand(0)?, &args.operand(1)?, &args.operand(2)?)?])
}

pub(crate) fn addcmul(lx: &mut Lower, args: &Args) -> R {
    let value = opt_operand(args, 3)?;
    Ok(vec![addc_ops(lx, &args.operand(0)?, &args.operand(1)?, &args.operand(2)?, value.as_ref(), false)?])
}

pub(crate) fn addcdiv(lx: &mut Lower, args: &Args) -> R {
    let value = opt_operand(args, 3)?;
    Ok(vec![addc_ops(lx, &args.operand(0)?, &args.operand(1)?, &args.operand(2)?, value.as_ref(), true)?])
}

/// A float binary op: ints and bool promote to float32.
fn float_binary(lx: &mut Lower, args: &Args, f: fn(&mut Lower, Value, Value) -> Result<Value>) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let out = float_of(result_type(&[&a, &b]));
    Ok(vec![compute(lx, &[&a, &b], out, |lx, v| f(lx, v[0], v[1]))?])
}

pub(crate) fn atan2(lx: &mut Lower, args: &Args) -> R {
    float_binary(lx, args, |lx, a, b| Ok(lx.b.atan2(a, b)?))
}

pub(crate) fn hypot(lx: &mut Lower, args: &Args) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let out = result_type(&[&a, &b]);
    if !out.is_float() {
        return Err(not_for("hypot_cpu", out));
    }
    float_binary(lx, args, |lx, a, b| {
        let a2 = lx.b.mul(a, a)?;
        let b2 = lx.b.mul(b, b)?;
        let s = lx.b.add(a2, b2)?;
        let naive = lx.b.sqrt(s)?;
        if !matches!(lx.dtype(a), DType::F32 | DType::F64) {
            return Ok(naive);
        }
        // Where a^2 + b^2 would overflow or underflow: m sqrt(1 + (n/m)^2)
        // with m = max(|a|, |b|), n = min; inf wins over NaN, as in C.
        let (aa, ab) = (lx.b.abs(a)?, lx.b.abs(b)?);
        let m = lx.b.max(aa, ab)?;
        let n = lx.b.min(aa, ab)?;
        let zero = k(lx, m, 0.0)?;
        let one = k(lx, m, 1.0)?;
        let is_zero = cmp(lx, m, zero, CompareDir::Eq)?;
        let safe = lx.b.select(is_zero, one, m)?;
        let r = lx.b.div(n, safe)?;
        let r2 = lx.b.mul(r, r)?;
        let r2 = lx.b.add(one, r2)?;
        let r2 = lx.b.sqrt(r2)?;
        let scaled = lx.b.mul(m, r2)?;
        let (lo, hi) = if lx.dtype(a) == DType::F64 { (1e-150, 1e150) } else { (1e-18, 1e18) };
        let (lo, hi) = (k(lx, m, lo)?, k(lx, m, hi)?);
        let small = cmp(lx, m, lo, CompareDir::Lt)?;
        let big = cmp(lx, m, hi, CompareDir::Gt)?;
        let extreme = lx.b.or(small, big)?;
        let h = lx.b.select(extreme, scaled, naive)?;
        let h = lx.b.select(is_zero, zero, h)?;
        let inf = k(lx, m, f64::INFINITY)?;
        let a_inf = cmp(lx, aa, inf, CompareDir::Eq)?;
        let b_inf = cmp(lx, ab, inf, CompareDir::Eq)?;
        let any_inf = lx.b.or(a_inf, b_inf)?;
        Ok(lx.b.select(any_inf, inf, h)?)
    })
}

/// The magnitude of a with the sign bit of b.
pub(crate) fn copysign(lx: &mut Lower, args: &Args) -> R {
    float_binary(lx, args, |lx, a, b| {
        let d = lx.dtype(a);
        let (it, min) = match d {
            DType::F64 => (DType::I64, i64::MIN),
            DType::F32 => (DType::I32, i32::MIN as i64),
            _ => (DType::I16, i16::MIN as i64),
        };
        let shape = lx.shape(a);
        let ai = lx.b.bitcast_convert(a, it)?;
        let bi = lx.b.bitcast_convert(b, it)?;
        let sign = lx.b.splat_i64(it, min, &shape)?;
        let mag = lx.b.splat_i64(it, !min, &shape)?;
        let am = lx.b.and(ai, mag)?;
        let bs = lx.b.and(bi, sign)?;
        let r = lx.b.or(am, bs)?;
        Ok(lx.b.bitcast_convert(r, d)?)
    })
}

/// `x * log(y)`, 0 where x == 0 (unless y is NaN).
pub(crate) fn xlogy(lx: &mut Lower, args: &Args) -> R {
    float_binary(lx, args, |lx, x, y| {
        let lg = lx.b.log(y)?;
        let p = lx.b.mul(x, lg)?;
        let zero = k(lx, x, 0.0)?;
        let xz = cmp(lx, x, zero, CompareDir::Eq)?;
        let r = lx.b.select(xz, zero, p)?;
        let yn = is_nan(lx, y)?;
        Ok(lx.b.select(yn, y, r)?)
    })
}
