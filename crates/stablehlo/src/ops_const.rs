//! Constants: scalars, splats and small dense tensors (`stablehlo.constant`).
//!
//! Values are given as f64 or i64 and converted to the element type when printed:
//! floats round to nearest, f64 → integer truncates and saturates, i64 → integer
//! wraps to the type's width, bool is `v != 0`.

use crate::builder::{Builder, Value};
use crate::check::shape_valid;
use crate::error::{bail, Result};
use crate::literal::{dense, element_from_f64, element_from_i64};
use crate::types::TensorType;
use crate::DType;

const OP: &str = "stablehlo.constant";

impl Builder {
    fn constant_literal(&mut self, ty: TensorType, elements: &[String]) -> Value {
        let attr = dense(&ty, elements);
        self.emit1(OP, &[], &[("value", attr)], ty)
    }

    /// Rank-0 constant of any dtype from an f64.
    pub fn constant_f64(&mut self, dtype: DType, v: f64) -> Value {
        self.constant_literal(TensorType::scalar(dtype), &[element_from_f64(dtype, v)])
    }

    /// Rank-0 constant of any dtype from an i64.
    pub fn constant_i64(&mut self, dtype: DType, v: i64) -> Value {
        self.constant_literal(TensorType::scalar(dtype), &[element_from_i64(dtype, v)])
    }

    /// A tensor of `shape` filled with `v`: a scalar constant broadcast with
    /// `stablehlo.broadcast_in_dim` (never a large dense literal).
    pub fn splat(&mut self, dtype: DType, v: f64, shape: &[i64]) -> Result<Value> {
        shape_valid(OP, shape)?;
        let s = self.constant_f64(dtype, v);
        if shape.is_empty() {
            return Ok(s);
        }
        self.broadcast_in_dim(s, shape, &[])
    }

    /// A tensor with the type of `like`, filled with `v`.
    pub fn splat_like(&mut self, like: Value, v: f64) -> Result<Value> {
        let t = self.type_of(OP, like)?;
        self.splat(t.dtype, v, &t.shape)
    }

    /// Integer splat (exact for all i64 values).
    pub fn splat_i64(&mut self, dtype: DType, v: i64, shape: &[i64]) -> Result<Value> {
        shape_valid(OP, shape)?;
        let s = self.constant_i64(dtype, v);
        if shape.is_empty() {
            return Ok(s);
        }
        self.broadcast_in_dim(s, shape, &[])
    }

    /// A dense constant from row-major i64 data (`data.len()` must equal the
    /// element count of `shape`).
    pub fn constant_tensor_i64(
        &mut self,
        dtype: DType,
        shape: &[i64],
        data: &[i64],
    ) -> Result<Value> {
        let ty = checked_type(dtype, shape, data.len())?;
        let elements: Vec<String> = data.iter().map(|&v| element_from_i64(dtype, v)).collect();
        Ok(self.constant_literal(ty, &elements))
    }

    /// A dense constant from row-major f64 data.
    pub fn constant_tensor_f64(
        &mut self,
        dtype: DType,
        shape: &[i64],
        data: &[f64],
    ) -> Result<Value> {
        let ty = checked_type(dtype, shape, data.len())?;
        let elements: Vec<String> = data.iter().map(|&v| element_from_f64(dtype, v)).collect();
        Ok(self.constant_literal(ty, &elements))
    }
}

fn checked_type(dtype: DType, shape: &[i64], len: usize) -> Result<TensorType> {
    shape_valid(OP, shape)?;
    let ty = TensorType::new(dtype, shape);
    if ty.numel() != len as i64 {
        bail!(OP, "{ty} needs {} elements, got {len}", ty.numel());
    }
    Ok(ty)
}
