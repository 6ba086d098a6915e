//! Shared validation helpers used by shape/dtype inference of every op family.

use crate::error::{bail, Result};
use crate::types::TensorType;
use crate::DType;

/// Which element types an op accepts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Accepts {
    /// Every element type.
    Any,
    /// Integers and floats (not bool).
    Numeric,
    /// Integers, floats and complex numbers (not bool).
    Arithmetic,
    Float,
    /// Floats and complex numbers.
    FloatOrComplex,
    /// Bool and integers.
    IntOrBool,
    Int,
    /// Signed integers and floats.
    SignedOrFloat,
}

impl Accepts {
    pub(crate) fn allows(self, d: DType) -> bool {
        match self {
            Accepts::Any => true,
            Accepts::Numeric => d.is_integer() || d.is_float(),
            Accepts::Arithmetic => d.is_integer() || d.is_float() || d.is_complex(),
            Accepts::Float => d.is_float(),
            Accepts::FloatOrComplex => d.is_float() || d.is_complex(),
            Accepts::IntOrBool => d.is_integer() || d.is_bool(),
            Accepts::Int => d.is_integer(),
            Accepts::SignedOrFloat => d.is_signed(),
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Accepts::Any => "any element type",
            Accepts::Numeric => "integer or floating-point elements",
            Accepts::Arithmetic => "integer, floating-point or complex elements",
            Accepts::Float => "floating-point elements",
            Accepts::FloatOrComplex => "floating-point or complex elements",
            Accepts::IntOrBool => "boolean or integer elements",
            Accepts::Int => "integer elements",
            Accepts::SignedOrFloat => "signed integer or floating-point elements",
        }
    }
}

pub(crate) fn dtype_allowed(op: &'static str, accepts: Accepts, ty: &TensorType) -> Result<()> {
    if !accepts.allows(ty.dtype) {
        bail!(op, "expects {}, got {ty}", accepts.describe());
    }
    Ok(())
}

/// Every dimension of a requested shape must be >= 0.
pub(crate) fn shape_valid(op: &'static str, shape: &[i64]) -> Result<()> {
    if shape.iter().any(|&d| d < 0) {
        bail!(op, "shape {shape:?} has a negative dimension");
    }
    Ok(())
}

/// `dims` must be unique and each in `[0, rank)`.
pub(crate) fn dims_valid(op: &'static str, what: &str, dims: &[i64], rank: usize) -> Result<()> {
    for (i, &d) in dims.iter().enumerate() {
        if d < 0 || d as usize >= rank {
            bail!(
                op,
                "{what} {dims:?}: dimension {d} out of range for rank {rank}"
            );
        }
        if dims[..i].contains(&d) {
            bail!(op, "{what} {dims:?}: dimension {d} appears twice");
        }
    }
    Ok(())
}

/// `dims` must be sorted strictly increasing.
pub(crate) fn dims_sorted(op: &'static str, what: &str, dims: &[i64]) -> Result<()> {
    if dims.windows(2).any(|w| w[0] >= w[1]) {
        bail!(op, "{what} {dims:?} must be sorted in increasing order");
    }
    Ok(())
}

pub(crate) fn same_type(op: &'static str, a: &TensorType, b: &TensorType) -> Result<()> {
    if a != b {
        bail!(op, "operands must have the same type, got {a} and {b}");
    }
    Ok(())
}

pub(crate) fn is_scalar(op: &'static str, what: &str, ty: &TensorType) -> Result<()> {
    if ty.rank() != 0 {
        bail!(op, "{what} must be a rank-0 tensor, got {ty}");
    }
    Ok(())
}
