//! Comparisons (→ bool), logical and bitwise ops, where and masked_fill.
use stablehlo::{CompareDir, DType, Value};

use super::{broadcast_shape, not_for, prepare, type_name};
use crate::args::{Args, Operand};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::promote::result_type;

type R = Result<Vec<Value>>;

/// Compares the operands in their common dtype.
fn compare(lx: &mut Lower, args: &Args, dir: CompareDir) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let dtype = result_type(&[&a, &b]);
    let v = prepare(lx, &[&a, &b], dtype)?;
    Ok(vec![lx.b.compare(v[0], v[1], dir)?])
}

pub(super) fn eq(lx: &mut Lower, args: &Args) -> R {
    compare(lx, args, CompareDir::Eq)
}
pub(super) fn ne(lx: &mut Lower, args: &Args) -> R {
    compare(lx, args, CompareDir::Ne)
}
pub(super) fn lt(lx: &mut Lower, args: &Args) -> R {
    compare(lx, args, CompareDir::Lt)
}
pub(super) fn le(lx: &mut Lower, args: &Args) -> R {
    compare(lx, args, CompareDir::Le)
}
pub(super) fn gt(lx: &mut Lower, args: &Args) -> R {
    compare(lx, args, CompareDir::Gt)
}
pub(super) fn ge(lx: &mut Lower, args: &Args) -> R {
    compare(lx, args, CompareDir::Ge)
}

/// Both operands as bools (nonzero is true), broadcast.
fn logical(lx: &mut Lower, args: &Args, f: fn(&mut Lower, Value, Value) -> Result<Value>) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let v = prepare(lx, &[&a, &b], DType::Bool)?;
    Ok(vec![f(lx, v[0], v[1])?])
}

pub(super) fn logical_and(lx: &mut Lower, args: &Args) -> R {
    logical(lx, args, |lx, a, b| Ok(lx.b.and(a, b)?))
}
pub(super) fn logical_or(lx: &mut Lower, args: &Args) -> R {
    logical(lx, args, |lx, a, b| Ok(lx.b.or(a, b)?))
}
pub(super) fn logical_xor(lx: &mut Lower, args: &Args) -> R {
    logical(lx, args, |lx, a, b| Ok(lx.b.xor(a, b)?))
}
pub(super) fn logical_not(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    let v = lx.cast(t.value, DType::Bool)?;
    Ok(vec![lx.b.not(v)?])
}

/// A bitwise op on integer or bool operands in their common dtype.
fn bitwise(lx: &mut Lower, args: &Args, name: &str, f: fn(&mut Lower, Value, Value) -> Result<Value>) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let dtype = result_type(&[&a, &b]);
    if dtype.is_float() {
        return Err(not_for(name, dtype));
    }
    let v = prepare(lx, &[&a, &b], dtype)?;
    Ok(vec![f(lx, v[0], v[1])?])
}

pub(super) fn bitwise_and(lx: &mut Lower, args: &Args) -> R {
    bitwise(lx, args, "bitwise_and_cpu", |lx, a, b| Ok(lx.b.and(a, b)?))
}
pub(super) fn bitwise_or(lx: &mut Lower, args: &Args) -> R {
    bitwise(lx, args, "bitwise_or_cpu", |lx, a, b| Ok(lx.b.or(a, b)?))
}
pub(super) fn bitwise_xor(lx: &mut Lower, args: &Args) -> R {
    bitwise(lx, args, "bitwise_xor_cpu", |lx, a, b| Ok(lx.b.xor(a, b)?))
}
/// `a << b` as on the CPU: a shift by a negative amount or by the bit width
/// or more gives 0. StableHLO's shift_left already does that, since it reads
/// the amount as unsigned.
pub(super) fn bitwise_left_shift(lx: &mut Lower, args: &Args) -> R {
    bitwise(lx, args, "lshift_cpu", |lx, a, b| Ok(lx.b.shift_left(a, b)?))
}
/// `a >> b` as on the CPU: arithmetic for signed integers, logical for
/// uint8; a negative or too-large amount fills with the sign bit (0 for
/// uint8), which is StableHLO's rule for amounts read as unsigned.
pub(super) fn bitwise_right_shift(lx: &mut Lower, args: &Args) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    if result_type(&[&a, &b]) == DType::U8 {
        bitwise(lx, args, "rshift_cpu", |lx, a, b| Ok(lx.b.shift_right_logical(a, b)?))
    } else {
        bitwise(lx, args, "rshift_cpu", |lx, a, b| Ok(lx.b.shift_right_arithmetic(a, b)?))
    }
}
pub(super) fn bitwise_not(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if t.dtype.is_float() {
        return Err(not_for("bitwise_not_cpu", t.dtype));
    }
    Ok(vec![lx.b.not(t.value)?])
}

/// The condition of where/masked_fill as i1 of `shape`.
fn condition(lx: &mut Lower, c: &Operand, shape: &[i64]) -> Result<Value> {
    let v = lx.cast(c.value, DType::Bool)?;
    lx.expand(v, shape)
}

/// where(condition, self, other): self and other promote together.
pub(super) fn where_(lx: &mut Lower, args: &Args) -> R {
    let c = args.operand(0)?;
    if c.dtype != DType::Bool && c.dtype != DType::U8 {
        bail!(Runtime, "where expected condition to be a boolean tensor, but got a tensor with dtype {}", type_name(c.dtype));
    }
    let (a, b) = (args.operand(1)?, args.operand(2)?);
    let dtype = result_type(&[&a, &b]);
    let shape = broadcast_shape(lx, &[&c, &a, &b])?;
    let cv = condition(lx, &c, &shape)?;
    let av = lx.cast(a.value, dtype)?;
    let av = lx.expand(av, &shape)?;
    let bv = lx.cast(b.value, dtype)?;
    let bv = lx.expand(bv, &shape)?;
    Ok(vec![lx.b.select(cv, av, bv)?])
}

/// masked_fill(self, mask, value): value (a number or 0-dim tensor) where
/// mask is true; keeps self's dtype.
pub(super) fn masked_fill(lx: &mut Lower, args: &Args) -> R {
    let s = args.operand(0)?;
    let m = args.operand(1)?;
    let v = args.operand(2)?;
    if m.dtype != DType::Bool {
        bail!(
            Runtime,
            "masked_fill_ only supports boolean masks, but got mask with dtype {}",
            super::arith::torch_dtype(m.dtype)
        );
    }
    if !v.shape.is_empty() {
        bail!(
            Runtime,
            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).",
            v.shape.len()
        );
    }
    let fill = super::checked_fill_value(lx, &v, s.dtype)?;
    let shape = broadcast_shape(lx, &[&s, &m])?;
    let cv = condition(lx, &m, &shape)?;
    let sv = lx.expand(s.value, &shape)?;
    let fill = lx.expand(fill, &shape)?;
    Ok(vec![lx.b.select(cv, fill, sv)?])
}
