//! Elementwise ops: binary arithmetic/logic, unary math, compare, select,
//! clamp, convert and bitcast_convert.
//!
//! Binary ops require operands of identical type (no implicit broadcasting; use
//! [`Builder::broadcast_to`] first).

use crate::builder::{Builder, Value};
use crate::check::{dtype_allowed, same_type, Accepts};
use crate::error::{bail, Result};
use crate::types::TensorType;
use crate::DType;

/// Direction of a `stablehlo.compare`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum CompareDir {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareDir {
    pub fn mlir(self) -> &'static str {
        match self {
            CompareDir::Eq => "EQ",
            CompareDir::Ne => "NE",
            CompareDir::Lt => "LT",
            CompareDir::Le => "LE",
            CompareDir::Gt => "GT",
            CompareDir::Ge => "GE",
        }
    }
}

macro_rules! binary_ops {
    ($($(#[$doc:meta])* $name:ident => $op:literal, $accepts:expr;)*) => {
        impl Builder {
            $(
                $(#[$doc])*
                pub fn $name(&mut self, lhs: Value, rhs: Value) -> Result<Value> {
                    self.binary($op, $accepts, lhs, rhs)
                }
            )*
        }
    };
}

macro_rules! unary_ops {
    ($($(#[$doc:meta])* $name:ident => $op:literal, $accepts:expr;)*) => {
        impl Builder {
            $(
                $(#[$doc])*
                pub fn $name(&mut self, operand: Value) -> Result<Value> {
                    self.unary($op, $accepts, operand)
                }
            )*
        }
    };
}

binary_ops! {
    /// Addition (logical or for bool).
    add => "stablehlo.add", Accepts::Any;
    sub => "stablehlo.subtract", Accepts::Arithmetic;
    /// Multiplication (logical and for bool).
    mul => "stablehlo.multiply", Accepts::Any;
    div => "stablehlo.divide", Accepts::Arithmetic;
    /// Remainder with the sign of the dividend (C `fmod` / truncated division).
    rem => "stablehlo.remainder", Accepts::Numeric;
    max => "stablehlo.maximum", Accepts::Any;
    min => "stablehlo.minimum", Accepts::Any;
    pow => "stablehlo.power", Accepts::Arithmetic;
    atan2 => "stablehlo.atan2", Accepts::Float;
    and => "stablehlo.and", Accepts::IntOrBool;
    or => "stablehlo.or", Accepts::IntOrBool;
    xor => "stablehlo.xor", Accepts::IntOrBool;
    shift_left => "stablehlo.shift_left", Accepts::Int;
    shift_right_arithmetic => "stablehlo.shift_right_arithmetic", Accepts::Int;
    shift_right_logical => "stablehlo.shift_right_logical", Accepts::Int;
}

unary_ops! {
    neg => "stablehlo.negate", Accepts::Arithmetic;
    abs => "stablehlo.abs", Accepts::SignedOrFloat;
    exp => "stablehlo.exponential", Accepts::FloatOrComplex;
    exponential_minus_one => "stablehlo.exponential_minus_one", Accepts::FloatOrComplex;
    log => "stablehlo.log", Accepts::FloatOrComplex;
    log_plus_one => "stablehlo.log_plus_one", Accepts::FloatOrComplex;
    sqrt => "stablehlo.sqrt", Accepts::FloatOrComplex;
    rsqrt => "stablehlo.rsqrt", Accepts::FloatOrComplex;
    cbrt => "stablehlo.cbrt", Accepts::Float;
    tanh => "stablehlo.tanh", Accepts::FloatOrComplex;
    /// `1 / (1 + exp(-x))`.
    logistic => "stablehlo.logistic", Accepts::Float;
    sine => "stablehlo.sine", Accepts::FloatOrComplex;
    cosine => "stablehlo.cosine", Accepts::FloatOrComplex;
    tan => "stablehlo.tan", Accepts::FloatOrComplex;
    floor => "stablehlo.floor", Accepts::Float;
    ceil => "stablehlo.ceil", Accepts::Float;
    round_nearest_even => "stablehlo.round_nearest_even", Accepts::Float;
    /// Round half away from zero.
    round_nearest_afz => "stablehlo.round_nearest_afz", Accepts::Float;
    sign => "stablehlo.sign", Accepts::SignedOrFloat;
    /// Logical not for bool, bitwise not for integers.
    not => "stablehlo.not", Accepts::IntOrBool;
    popcnt => "stablehlo.popcnt", Accepts::Int;
}

impl Builder {
    fn binary(
        &mut self,
        op: &'static str,
        accepts: Accepts,
        lhs: Value,
        rhs: Value,
    ) -> Result<Value> {
        let (a, b) = (self.type_of(op, lhs)?, self.type_of(op, rhs)?);
        same_type(op, &a, &b)?;
        dtype_allowed(op, accepts, &a)?;
        Ok(self.emit1(op, &[lhs, rhs], &[], a))
    }

    fn unary(&mut self, op: &'static str, accepts: Accepts, operand: Value) -> Result<Value> {
        let t = self.type_of(op, operand)?;
        dtype_allowed(op, accepts, &t)?;
        Ok(self.emit1(op, &[operand], &[], t))
    }

    /// `x` is finite (not inf, not NaN); result is `i1` of the same shape.
    pub fn is_finite(&mut self, x: Value) -> Result<Value> {
        const OP: &str = "stablehlo.is_finite";
        let t = self.type_of(OP, x)?;
        dtype_allowed(OP, Accepts::Float, &t)?;
        Ok(self.emit1(OP, &[x], &[], TensorType::new(DType::Bool, t.shape)))
    }

    /// Elementwise comparison → `i1`. The compare type is FLOAT for floats,
    /// SIGNED for signed integers and UNSIGNED for unsigned integers and bool.
    pub fn compare(&mut self, lhs: Value, rhs: Value, dir: CompareDir) -> Result<Value> {
        const OP: &str = "stablehlo.compare";
        let (a, b) = (self.type_of(OP, lhs)?, self.type_of(OP, rhs)?);
        same_type(OP, &a, &b)?;
        if a.dtype.is_complex() && !matches!(dir, CompareDir::Eq | CompareDir::Ne) {
            bail!(OP, "complex numbers are only compared for equality, got {}", dir.mlir());
        }
        let kind = if a.dtype.is_float() || a.dtype.is_complex() {
            "FLOAT"
        } else if a.dtype.is_signed() {
            "SIGNED"
        } else {
            "UNSIGNED"
        };
        let attrs = [
            (
                "comparison_direction",
                format!("#stablehlo<comparison_direction {}>", dir.mlir()),
            ),
            (
                "compare_type",
                format!("#stablehlo<comparison_type {kind}>"),
            ),
        ];
        Ok(self.emit1(
            OP,
            &[lhs, rhs],
            &attrs,
            TensorType::new(DType::Bool, a.shape),
        ))
    }

    /// `pred ? on_true : on_false`; `pred` is `i1`, rank 0 or the operands' shape.
    pub fn select(&mut self, pred: Value, on_true: Value, on_false: Value) -> Result<Value> {
        const OP: &str = "stablehlo.select";
        let p = self.type_of(OP, pred)?;
        let (a, b) = (self.type_of(OP, on_true)?, self.type_of(OP, on_false)?);
        same_type(OP, &a, &b)?;
        if p.dtype != DType::Bool {
            bail!(OP, "predicate must have i1 elements, got {p}");
        }
        if p.rank() != 0 && p.shape != a.shape {
            bail!(OP, "predicate {p} must be rank 0 or match the operands {a}");
        }
        Ok(self.emit1(OP, &[pred, on_true, on_false], &[], a))
    }

    /// `min(max(x, lo), hi)`; `lo`/`hi` are rank 0 or the shape of `x`.
    pub fn clamp(&mut self, lo: Value, x: Value, hi: Value) -> Result<Value> {
        const OP: &str = "stablehlo.clamp";
        let t = self.type_of(OP, x)?;
        for bound in [lo, hi] {
            let bt = self.type_of(OP, bound)?;
            if bt.dtype != t.dtype || (bt.rank() != 0 && bt.shape != t.shape) {
                bail!(
                    OP,
                    "bound {bt} must have the element type of {t} and be rank 0 or the same shape"
                );
            }
        }
        Ok(self.emit1(OP, &[lo, x, hi], &[], t))
    }

    /// A complex tensor from its real and imaginary parts (both f32 or both f64).
    pub fn complex(&mut self, re: Value, im: Value) -> Result<Value> {
        const OP: &str = "stablehlo.complex";
        let (a, b) = (self.type_of(OP, re)?, self.type_of(OP, im)?);
        same_type(OP, &a, &b)?;
        if !matches!(a.dtype, DType::F32 | DType::F64) {
            bail!(OP, "expects f32 or f64 parts, got {a}");
        }
        Ok(self.emit1(OP, &[re, im], &[], TensorType::new(a.dtype.complex_of(), a.shape)))
    }

    /// The real part of a complex tensor.
    pub fn real(&mut self, v: Value) -> Result<Value> {
        self.complex_part("stablehlo.real", v)
    }

    /// The imaginary part of a complex tensor.
    pub fn imag(&mut self, v: Value) -> Result<Value> {
        self.complex_part("stablehlo.imag", v)
    }

    /// The complex conjugate of a complex tensor (StableHLO has no op for
    /// it: the parts, with the imaginary one negated).
    pub fn conj(&mut self, v: Value) -> Result<Value> {
        let (re, im) = (self.real(v)?, self.imag(v)?);
        let im = self.neg(im)?;
        self.complex(re, im)
    }

    fn complex_part(&mut self, op: &'static str, v: Value) -> Result<Value> {
        let t = self.type_of(op, v)?;
        let Some(part) = t.dtype.complex_part() else {
            bail!(op, "expects complex elements, got {t}");
        };
        Ok(self.emit1(op, &[v], &[], TensorType::new(part, t.shape)))
    }

    /// Elementwise value conversion to `dtype` (returns `v` itself if already `dtype`).
    pub fn convert(&mut self, v: Value, dtype: DType) -> Result<Value> {
        const OP: &str = "stablehlo.convert";
        let t = self.type_of(OP, v)?;
        if t.dtype == dtype {
            return Ok(v);
        }
        Ok(self.emit1(OP, &[v], &[], TensorType::new(dtype, t.shape)))
    }

    /// Rounds floats to the precision and range of a narrower format, keeping
    /// the type (f16: 5 exponent and 10 mantissa bits; bf16: 8 and 7). Unlike
    /// a convert round trip, compilers cannot drop it or contract the
    /// product before it into a fused multiply-add.
    pub fn reduce_precision(&mut self, x: Value, exponent_bits: u32, mantissa_bits: u32) -> Result<Value> {
        const OP: &str = "stablehlo.reduce_precision";
        let t = self.type_of(OP, x)?;
        dtype_allowed(OP, Accepts::Float, &t)?;
        let attrs = [
            ("exponent_bits", format!("{exponent_bits} : i32")),
            ("mantissa_bits", format!("{mantissa_bits} : i32")),
        ];
        Ok(self.emit1(OP, &[x], &attrs, t))
    }

    /// Reinterprets the bits as `dtype`. Same width keeps the shape; converting to
    /// a type `k` times narrower appends a dimension of size `k`; converting to a
    /// type `k` times wider requires the last dimension to be `k` and drops it.
    pub fn bitcast_convert(&mut self, v: Value, dtype: DType) -> Result<Value> {
        const OP: &str = "stablehlo.bitcast_convert";
        let t = self.type_of(OP, v)?;
        if t.dtype == DType::Bool || dtype == DType::Bool {
            bail!(
                OP,
                "cannot bitcast {t} to {dtype}: i1 has no byte representation"
            );
        }
        let (from, to) = (t.dtype.bit_width(), dtype.bit_width());
        let mut shape = t.shape.clone();
        if from > to {
            shape.push((from / to) as i64);
        } else if from < to {
            let ratio = (to / from) as i64;
            if shape.last() != Some(&ratio) {
                bail!(
                    OP,
                    "cannot bitcast {t} to {dtype}: the last dimension must be {ratio}"
                );
            }
            shape.pop();
        }
        Ok(self.emit1(OP, &[v], &[], TensorType::new(dtype, shape)))
    }
}
