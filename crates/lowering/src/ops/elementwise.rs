//! Elementwise ops with PyTorch's broadcasting and type promotion.
//!
//! The rows live here; the lowerings are split by kind:
//! `elementwise/arith.rs` (binary and ternary arithmetic, min/max, clamp,
//! lerp, addcmul), `elementwise/unary.rs` (math functions, rounding, sign,
//! NaN tests) and `elementwise/logic.rs` (comparisons, logical and bitwise
//! ops, where, masked_fill).
//!
//! Conventions shared by all of them: operands are promoted with
//! `result_type`, broadcast, and computed in the *compute dtype* (f32 for
//! f16/bf16, as PyTorch's CPU kernels do with their "opmath" type), then
//! rounded to the result dtype. Functions named `*_ops` take `Operand`s so
//! the `_foreach_*` lowerings can reuse them.
use stablehlo::{CompareDir, DType, Value};

use crate::args::Operand;
use crate::ctx::Lower;
use crate::error::{ErrorKind, LowerError, Result};
use crate::op;
use crate::table::OpEntry;

pub(crate) mod arith;
mod logic;
pub(crate) mod unary;

use arith as a;
use logic as l;
use unary as u;

pub const OPS: &[OpEntry] = &[
    // arithmetic
    op!("add", a::add),
    op!("sub", a::sub),
    op!("rsub", a::rsub),
    op!("mul", a::mul),
    op!("div", a::div),
    op!("true_divide", a::div),
    op!("floor_divide", a::floor_divide),
    op!("remainder", a::remainder),
    op!("fmod", a::fmod),
    op!("pow", a::pow, static),
    op!("float_power", a::float_power),
    op!("maximum", a::maximum),
    op!("minimum", a::minimum),
    op!("fmax", a::fmax),
    op!("fmin", a::fmin),
    op!("clamp", a::clamp),
    op!("clip", a::clamp),
    op!("clamp_min", a::clamp_min),
    op!("clamp_max", a::clamp_max),
    op!("lerp", a::lerp),
    op!("addcmul", a::addcmul),
    op!("addcdiv", a::addcdiv),
    op!("atan2", a::atan2),
    op!("arctan2", a::atan2),
    op!("hypot", a::hypot),
    op!("copysign", a::copysign),
    op!("xlogy", a::xlogy),
    // unary math
    op!("neg", u::neg),
    op!("negative", u::neg),
    op!("abs", u::abs),
    op!("absolute", u::abs),
    op!("sign", u::sign),
    op!("sgn", u::sign),
    op!("square", u::square),
    op!("exp", u::exp),
    op!("exp2", u::exp2),
    op!("expm1", u::expm1),
    op!("log", u::log),
    op!("log2", u::log2),
    op!("log10", u::log10),
    op!("log1p", u::log1p),
    op!("sqrt", u::sqrt),
    op!("rsqrt", u::rsqrt),
    op!("reciprocal", u::reciprocal),
    op!("sin", u::sin),
    op!("cos", u::cos),
    op!("tan", u::tan),
    op!("asin", u::asin),
    op!("acos", u::acos),
    op!("atan", u::atan),
    op!("sinh", u::sinh),
    op!("cosh", u::cosh),
    op!("tanh", u::tanh),
    op!("erf", u::erf),
    op!("erfc", u::erfc),
    op!("erfinv", u::erfinv),
    op!("sigmoid", u::sigmoid),
    op!("floor", u::floor),
    op!("ceil", u::ceil),
    op!("round", u::round),
    op!("trunc", u::trunc),
    op!("fix", u::trunc),
    op!("frac", u::frac),
    op!("isnan", u::isnan),
    op!("isinf", u::isinf),
    op!("isposinf", u::isposinf),
    op!("isneginf", u::isneginf),
    op!("isfinite", u::isfinite),
    op!("nan_to_num", u::nan_to_num),
    // comparisons, logic, selection
    op!("eq", l::eq),
    op!("ne", l::ne),
    op!("lt", l::lt),
    op!("le", l::le),
    op!("gt", l::gt),
    op!("ge", l::ge),
    op!("logical_and", l::logical_and),
    op!("logical_or", l::logical_or),
    op!("logical_xor", l::logical_xor),
    op!("logical_not", l::logical_not),
    op!("bitwise_and", l::bitwise_and),
    op!("bitwise_or", l::bitwise_or),
    op!("bitwise_xor", l::bitwise_xor),
    op!("bitwise_not", l::bitwise_not),
    op!("bitwise_left_shift", l::bitwise_left_shift),
    op!("bitwise_right_shift", l::bitwise_right_shift),
    op!("__lshift__", l::bitwise_left_shift),
    op!("__rshift__", l::bitwise_right_shift),
    op!("where", l::where_),
    op!("masked_fill", l::masked_fill),
];

/// The dtype a result of `out` is computed in: f32 for the 16-bit floats.
pub(crate) fn wide(out: DType) -> DType {
    match out {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// The result dtype of ops that always give floats (ints and bool → f32).
pub(crate) fn float_of(d: DType) -> DType {
    if d.is_float() || d.is_complex() {
        d
    } else {
        DType::F32
    }
}

/// The broadcast shape of `ops`, with PyTorch's message on mismatch.
pub(crate) fn broadcast_shape(lx: &Lower, ops: &[&Operand]) -> Result<Vec<i64>> {
    let mut shape: Vec<i64> = vec![];
    for o in ops {
        shape = lx.b.broadcast_shapes(&shape, &o.shape).map_err(|_| {
            // The last mismatching dimension: PyTorch checks from the right.
            let rank = shape.len().max(o.shape.len());
            let dim_of = |s: &[i64], i: usize| if i < rank - s.len() { 1 } else { s[i - (rank - s.len())] };
            let bad = (0..rank)
                .rfind(|&i| {
                    let (x, y) = (dim_of(&shape, i), dim_of(&o.shape, i));
                    x != y && x != 1 && y != 1
                })
                .unwrap_or(0);
            LowerError::new(
                ErrorKind::Runtime,
                format!(
                    "{}: The size of tensor a ({}) must match the size of tensor b ({}) at non-singleton dimension {}",
                    lx.op,
                    dim_of(&shape, bad),
                    dim_of(&o.shape, bad),
                    bad
                ),
            )
        })?;
    }
    Ok(shape)
}

/// Broadcasts and converts operands to a common shape and `dtype`.
pub(crate) fn prepare(lx: &mut Lower, ops: &[&Operand], dtype: DType) -> Result<Vec<Value>> {
    let shape = broadcast_shape(lx, ops)?;
    let mut out = Vec::with_capacity(ops.len());
    for o in ops {
        let v = lx.cast(o.value, dtype)?;
        out.push(lx.expand(v, &shape)?);
    }
    Ok(out)
}

/// Broadcasts `ops` and computes `f` on them in the compute dtype of `out`,
/// rounding the result to `out`.
pub(crate) fn compute(
    lx: &mut Lower,
    ops: &[&Operand],
    out: DType,
    f: impl FnOnce(&mut Lower, &[Value]) -> Result<Value>,
) -> Result<Value> {
    let v = prepare(lx, ops, wide(out))?;
    let r = f(lx, &v)?;
    lx.cast(r, out)
}

/// A constant with the type of `like`.
pub(crate) fn k(lx: &mut Lower, like: Value, x: f64) -> Result<Value> {
    lx.full_like(like, x)
}

pub(crate) fn cmp(lx: &mut Lower, a: Value, b: Value, dir: CompareDir) -> Result<Value> {
    Ok(lx.b.compare(a, b, dir)?)
}

/// `x != x`: true where x is NaN (false for non-floats).
pub(crate) fn is_nan(lx: &mut Lower, x: Value) -> Result<Value> {
    if lx.dtype(x).is_float() || lx.dtype(x).is_complex() {
        cmp(lx, x, x, CompareDir::Ne)
    } else {
        let shape = lx.shape(x);
        lx.full(DType::Bool, 0.0, &shape)
    }
}

/// Maximum or minimum that propagates NaN from either side (torch.maximum).
pub(crate) fn nan_max_min(lx: &mut Lower, a: Value, b: Value, max: bool) -> Result<Value> {
    let r = if max { lx.b.max(a, b)? } else { lx.b.min(a, b)? };
    if !lx.dtype(a).is_float() {
        return Ok(r);
    }
    let na = is_nan(lx, a)?;
    let r = lx.b.select(na, a, r)?;
    let nb = is_nan(lx, b)?;
    Ok(lx.b.select(nb, b, r)?)
}

/// The short ScalarType name torch prints in messages ("Float", "Long", ...).
pub(crate) fn type_name(d: DType) -> &'static str {
    match d {
        DType::F32 => "Float",
        DType::F64 => "Double",
        DType::F16 => "Half",
        DType::BF16 => "BFloat16",
        DType::I64 => "Long",
        DType::I32 => "Int",
        DType::I16 => "Short",
        DType::I8 => "Char",
        DType::U8 => "Byte",
        DType::Bool => "Bool",
        DType::U32 => "UInt32",
        DType::U64 => "UInt64",
        DType::C64 => "ComplexFloat",
        DType::C128 => "ComplexDouble",
    }
}

/// A complex fill value for a real tensor: PyTorch refuses it rather than
/// drop the imaginary part.
pub(crate) fn check_fill_value(op: &str, value: DType, target: DType) -> Result<()> {
    if value.is_complex() && !target.is_complex() {
        return Err(LowerError::new(
            ErrorKind::Runtime,
            format!(
                "{op}: value cannot be converted to type {} without overflow",
                crate::dtypes::name(target).trim_start_matches("torch.")
            ),
        ));
    }
    Ok(())
}

/// A fill value (`fill_`, `full`, `masked_fill`, `index_fill`) converted
/// to the tensor's dtype, with the CPU's overflow check (c10's
/// `checked_convert`): a value outside the target's range raises "value
/// cannot be converted to type uint8_t without overflow" instead of
/// wrapping (300 into uint8 was 44) or writing INT64_MIN for NaN. Unsigned
/// targets accept down to -max, which wraps (-1 is 255); float targets
/// accept infinities and NaN.
pub(crate) fn checked_fill_value(lx: &mut Lower, v: &crate::args::Operand, target: DType) -> Result<Value> {
    check_fill_value(lx.op, v.dtype, target)?;
    let limits: Option<(f64, f64)> = match target {
        DType::U8 => Some((-255.0, 255.0)),
        DType::I8 => Some((i8::MIN as f64, i8::MAX as f64)),
        DType::I16 => Some((i16::MIN as f64, i16::MAX as f64)),
        DType::I32 => Some((i32::MIN as f64, i32::MAX as f64)),
        // 2^63 itself does not fit: the largest double below it is the bound.
        DType::I64 => Some((i64::MIN as f64, 9223372036854774784.0)),
        DType::F16 => Some((-65504.0, 65504.0)),
        DType::BF16 => Some((-3.3895313892515355e38, 3.3895313892515355e38)),
        DType::F32 => Some((f32::MIN as f64, f32::MAX as f64)),
        _ => None,
    };
    let wider = match (v.dtype, target) {
        (s, t) if s == t => false,
        (DType::F64 | DType::I64, _) => true,
        (DType::F32, DType::F16 | DType::BF16) => true,
        (s, t) if s.is_float() && t.is_integer() => true,
        (DType::I32, DType::I8 | DType::I16 | DType::U8 | DType::F16 | DType::BF16) => true,
        (DType::I16, DType::I8 | DType::U8) => true,
        _ => false,
    };
    if let (Some((lo, hi)), true) = (limits, wider) {
        let x = lx.cast(v.value, DType::F64)?;
        let lov = lx.full_like(x, lo)?;
        let hiv = lx.full_like(x, hi)?;
        let below = lx.b.compare(x, lov, CompareDir::Lt)?;
        let above = lx.b.compare(x, hiv, CompareDir::Gt)?;
        let mut bad = lx.b.or(below, above)?;
        if target.is_float() {
            let fin = lx.b.is_finite(x)?;
            bad = lx.b.and(bad, fin)?;
        } else {
            // NaN compares false with both limits, and has no integer value.
            let nan = lx.b.compare(x, x, CompareDir::Ne)?;
            bad = lx.b.or(bad, nan)?;
        }
        let bad = crate::ops::indexing::any(lx, bad)?;
        let name = match target {
            DType::U8 => "uint8_t",
            DType::I8 => "int8_t",
            DType::I16 => "int16_t",
            DType::I32 => "int",
            DType::I64 => "int64_t",
            DType::F16 => "c10::Half",
            DType::BF16 => "c10::BFloat16",
            _ => "float",
        };
        lx.check_runtime(bad, format!("{}: value cannot be converted to type {name} without overflow", lx.op));
    }
    lx.cast(v.value, target)
}

/// PyTorch's "not implemented for 'Bool'"-style dtype error.
pub(crate) fn not_for(name: &str, d: DType) -> LowerError {
    LowerError::new(ErrorKind::NotImplemented, format!("\"{name}\" not implemented for '{}'", type_name(d)))
}
