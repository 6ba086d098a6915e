//! Reductions: `stablehlo.reduce` with a user-built body, the common
//! sum/max/min/prod/and/or helpers, `stablehlo.reduce_window` and
//! `stablehlo.select_and_scatter`.
//!
//! Region bodies are built on a fresh region [`Builder`] whose arguments are
//! rank-0 tensors; values of the enclosing builder are not visible inside.

use crate::builder::{Builder, Value};
use crate::check::{dims_valid, is_scalar};
use crate::error::{bail, Result};
use crate::literal::{dense, i64_array};
use crate::types::TensorType;
use crate::DType;

/// Which reduction a helper performs; used to pick the identity and the body op.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Monoid {
    Sum,
    Prod,
    Max,
    Min,
    And,
    Or,
}

/// The identity element of `m` for `dtype`, as a rank-0 constant.
fn identity(b: &mut Builder, m: Monoid, dtype: DType) -> Value {
    let float = dtype.is_float();
    match m {
        Monoid::Sum | Monoid::Or => b.constant_i64(dtype, 0),
        Monoid::Prod => b.constant_i64(dtype, 1),
        Monoid::And => b.constant_i64(dtype, -1), // all bits set; `true` for bool
        Monoid::Max if float => b.constant_f64(dtype, f64::NEG_INFINITY),
        Monoid::Min if float => b.constant_f64(dtype, f64::INFINITY),
        Monoid::Max => {
            let (lo, _) = dtype.int_range().expect("integer or bool");
            b.constant_i64(dtype, lo as i64)
        }
        Monoid::Min => {
            let (_, hi) = dtype.int_range().expect("integer or bool");
            // u64::MAX does not fit an i64 but wraps to it.
            b.constant_i64(dtype, hi as u64 as i64)
        }
    }
}

fn combine(b: &mut Builder, m: Monoid, x: Value, y: Value) -> Result<Value> {
    match m {
        Monoid::Sum => b.add(x, y),
        Monoid::Prod => b.mul(x, y),
        Monoid::Max => b.max(x, y),
        Monoid::Min => b.min(x, y),
        Monoid::And => b.and(x, y),
        Monoid::Or => b.or(x, y),
    }
}

/// Window attributes shared by reduce_window and select_and_scatter; checks
/// lengths and returns the result shape of sliding the window over `shape`.
fn window_shape(
    op: &'static str,
    shape: &[i64],
    window: &[i64],
    strides: &[i64],
    base_dilations: &[i64],
    window_dilations: &[i64],
    padding: &[(i64, i64)],
) -> Result<Vec<i64>> {
    let r = shape.len();
    if window.len() != r
        || strides.len() != r
        || base_dilations.len() != r
        || window_dilations.len() != r
        || padding.len() != r
    {
        bail!(op, "window {window:?}, strides {strides:?}, dilations {base_dilations:?}/{window_dilations:?} and padding {padding:?} must each have {r} entries for shape {shape:?}");
    }
    let mut out = Vec::with_capacity(r);
    for i in 0..r {
        if window[i] <= 0 || strides[i] <= 0 || base_dilations[i] <= 0 || window_dilations[i] <= 0 {
            bail!(
                op,
                "window sizes, strides and dilations must be positive (dimension {i})"
            );
        }
        let dilated_base = if shape[i] == 0 {
            0
        } else {
            (shape[i] - 1) * base_dilations[i] + 1
        };
        let padded = padding[i].0 + dilated_base + padding[i].1;
        let dilated_window = (window[i] - 1) * window_dilations[i] + 1;
        out.push(if padded < dilated_window {
            0
        } else {
            (padded - dilated_window) / strides[i] + 1
        });
    }
    Ok(out)
}

fn padding_attr(padding: &[(i64, i64)]) -> String {
    let flat: Vec<String> = padding
        .iter()
        .flat_map(|&(a, b)| [a.to_string(), b.to_string()])
        .collect();
    dense(
        &TensorType::new(DType::I64, [padding.len() as i64, 2]),
        &flat,
    )
}

fn or_default<'a>(v: &'a [i64], default: &'a [i64]) -> &'a [i64] {
    if v.is_empty() {
        default
    } else {
        v
    }
}

impl Builder {
    /// Checks `inputs`/`inits` of a variadic reduction: same shapes, rank-0 inits
    /// of matching dtypes. Returns the input types.
    fn reduction_operands(
        &self,
        op: &'static str,
        inputs: &[Value],
        inits: &[Value],
    ) -> Result<Vec<TensorType>> {
        if inputs.is_empty() || inputs.len() != inits.len() {
            bail!(
                op,
                "needs one init value per input, got {} inputs and {} inits",
                inputs.len(),
                inits.len()
            );
        }
        let mut types = Vec::new();
        for (&x, &i) in inputs.iter().zip(inits) {
            let (t, it) = (self.type_of(op, x)?, self.type_of(op, i)?);
            is_scalar(op, "init value", &it)?;
            if it.dtype != t.dtype {
                bail!(
                    op,
                    "init value {it} must have the element type of input {t}"
                );
            }
            if let Some(t0) = types.first() {
                let t0: &TensorType = t0;
                if t0.shape != t.shape {
                    bail!(op, "inputs must have the same shape, got {t0} and {t}");
                }
            }
            types.push(t);
        }
        Ok(types)
    }

    /// Builds the combiner region `(lhs..., rhs...) -> (results...)` with one
    /// scalar pair per input; checks the body returns the init types.
    fn combiner(
        &mut self,
        op: &'static str,
        inits: &[TensorType],
        body: impl FnOnce(&mut Builder, &[Value], &[Value]) -> Result<Vec<Value>>,
    ) -> Result<String> {
        let scalars: Vec<TensorType> = inits
            .iter()
            .chain(inits)
            .map(|t| TensorType::scalar(t.dtype))
            .collect();
        let n = inits.len();
        let (text, returned) =
            self.region(op, &scalars, |b, args| body(b, &args[..n], &args[n..]))?;
        if returned != scalars[..n] {
            let got: Vec<String> = returned.iter().map(|t| t.to_string()).collect();
            bail!(
                op,
                "body must return {n} rank-0 values of the input element types, got ({})",
                got.join(", ")
            );
        }
        Ok(text)
    }

    /// `stablehlo.reduce` of `inputs` over `dims`. `body(region, lhs, rhs)` gets
    /// the accumulators (`lhs`, one per input) and the next elements (`rhs`) as
    /// rank-0 values and returns the new accumulators.
    pub fn reduce(
        &mut self,
        inputs: &[Value],
        inits: &[Value],
        dims: &[i64],
        body: impl FnOnce(&mut Builder, &[Value], &[Value]) -> Result<Vec<Value>>,
    ) -> Result<Vec<Value>> {
        const OP: &str = "stablehlo.reduce";
        let types = self.reduction_operands(OP, inputs, inits)?;
        dims_valid(OP, "dimensions", dims, types[0].rank())?;
        let init_types: Vec<TensorType> =
            types.iter().map(|t| TensorType::scalar(t.dtype)).collect();
        let region = self.combiner(OP, &init_types, body)?;
        let shape: Vec<i64> = (0..types[0].rank() as i64)
            .filter(|d| !dims.contains(d))
            .map(|d| types[0].shape[d as usize])
            .collect();
        let results = types
            .iter()
            .map(|t| TensorType::new(t.dtype, shape.clone()))
            .collect();
        let operands: Vec<Value> = inputs.iter().chain(inits).copied().collect();
        Ok(self.emit(
            OP,
            &operands,
            &[region],
            &[("dimensions", i64_array(dims))],
            results,
        ))
    }

    fn reduce_monoid(&mut self, m: Monoid, v: Value, dims: &[i64]) -> Result<Value> {
        let t = self.type_of("stablehlo.reduce", v)?;
        let bad = match m {
            Monoid::And | Monoid::Or => t.dtype.is_float(),
            _ => false,
        };
        if bad {
            bail!(
                "stablehlo.reduce",
                "{m:?} reduction needs boolean or integer elements, got {t}"
            );
        }
        let init = identity(self, m, t.dtype);
        Ok(self.reduce(&[v], &[init], dims, |b, l, r| {
            Ok(vec![combine(b, m, l[0], r[0])?])
        })?[0])
    }

    /// Sum over `dims` (init 0).
    pub fn reduce_sum(&mut self, v: Value, dims: &[i64]) -> Result<Value> {
        self.reduce_monoid(Monoid::Sum, v, dims)
    }
    /// Product over `dims` (init 1).
    pub fn reduce_prod(&mut self, v: Value, dims: &[i64]) -> Result<Value> {
        self.reduce_monoid(Monoid::Prod, v, dims)
    }
    /// Maximum over `dims` (init -inf for floats, the type's minimum for integers).
    pub fn reduce_max(&mut self, v: Value, dims: &[i64]) -> Result<Value> {
        self.reduce_monoid(Monoid::Max, v, dims)
    }
    /// Minimum over `dims` (init +inf for floats, the type's maximum for integers).
    pub fn reduce_min(&mut self, v: Value, dims: &[i64]) -> Result<Value> {
        self.reduce_monoid(Monoid::Min, v, dims)
    }
    /// Logical/bitwise and over `dims` (init all ones).
    pub fn reduce_and(&mut self, v: Value, dims: &[i64]) -> Result<Value> {
        self.reduce_monoid(Monoid::And, v, dims)
    }
    /// Logical/bitwise or over `dims` (init 0).
    pub fn reduce_or(&mut self, v: Value, dims: &[i64]) -> Result<Value> {
        self.reduce_monoid(Monoid::Or, v, dims)
    }

    /// `stablehlo.reduce_window`. Empty `strides`/dilations mean all 1 and empty
    /// `padding` means no padding. `body` is as for [`Builder::reduce`].
    #[allow(clippy::too_many_arguments)]
    pub fn reduce_window(
        &mut self,
        inputs: &[Value],
        inits: &[Value],
        window_dims: &[i64],
        strides: &[i64],
        base_dilations: &[i64],
        window_dilations: &[i64],
        padding: &[(i64, i64)],
        body: impl FnOnce(&mut Builder, &[Value], &[Value]) -> Result<Vec<Value>>,
    ) -> Result<Vec<Value>> {
        const OP: &str = "stablehlo.reduce_window";
        let types = self.reduction_operands(OP, inputs, inits)?;
        let r = types[0].rank();
        let (ones, zeros) = (vec![1; r], vec![(0, 0); r]);
        let strides = or_default(strides, &ones);
        let base_dilations = or_default(base_dilations, &ones);
        let window_dilations = or_default(window_dilations, &ones);
        let padding = if padding.is_empty() {
            &zeros[..]
        } else {
            padding
        };
        let shape = window_shape(
            OP,
            &types[0].shape,
            window_dims,
            strides,
            base_dilations,
            window_dilations,
            padding,
        )?;
        let init_types: Vec<TensorType> =
            types.iter().map(|t| TensorType::scalar(t.dtype)).collect();
        let region = self.combiner(OP, &init_types, body)?;
        let attrs = [
            ("window_dimensions", i64_array(window_dims)),
            ("window_strides", i64_array(strides)),
            ("base_dilations", i64_array(base_dilations)),
            ("window_dilations", i64_array(window_dilations)),
            ("padding", padding_attr(padding)),
        ];
        let results = types
            .iter()
            .map(|t| TensorType::new(t.dtype, shape.clone()))
            .collect();
        let operands: Vec<Value> = inputs.iter().chain(inits).copied().collect();
        Ok(self.emit(OP, &operands, &[region], &attrs, results))
    }

    /// `stablehlo.select_and_scatter` (the gradient of max-pooling): for each
    /// window of `operand`, `select(a, b) -> i1` picks an element, and the
    /// matching `source` element is combined into the result with
    /// `scatter(acc, x)`, starting from `init`. `source` must have the shape of
    /// the windowed operand. Empty `strides`/`padding` mean 1 / none.
    #[allow(clippy::too_many_arguments)]
    pub fn select_and_scatter(
        &mut self,
        operand: Value,
        source: Value,
        init: Value,
        window_dims: &[i64],
        strides: &[i64],
        padding: &[(i64, i64)],
        select: impl FnOnce(&mut Builder, Value, Value) -> Result<Value>,
        scatter: impl FnOnce(&mut Builder, Value, Value) -> Result<Value>,
    ) -> Result<Value> {
        const OP: &str = "stablehlo.select_and_scatter";
        let (t, s, it) = (
            self.type_of(OP, operand)?,
            self.type_of(OP, source)?,
            self.type_of(OP, init)?,
        );
        is_scalar(OP, "init value", &it)?;
        if s.dtype != t.dtype || it.dtype != t.dtype {
            bail!(
                OP,
                "operand {t}, source {s} and init {it} must share an element type"
            );
        }
        let r = t.rank();
        let (ones, zeros) = (vec![1; r], vec![(0, 0); r]);
        let strides = or_default(strides, &ones);
        let padding = if padding.is_empty() {
            &zeros[..]
        } else {
            padding
        };
        let shape = window_shape(OP, &t.shape, window_dims, strides, &ones, &ones, padding)?;
        if shape != s.shape {
            bail!(
                OP,
                "source {s} must have the windowed shape {shape:?} of operand {t}"
            );
        }
        let scalar = TensorType::scalar(t.dtype);
        let pair = [scalar.clone(), scalar.clone()];
        let (select_text, sel_ret) =
            self.region(OP, &pair, |b, a| Ok(vec![select(b, a[0], a[1])?]))?;
        if sel_ret != [TensorType::scalar(DType::Bool)] {
            bail!(OP, "select body must return one tensor<i1>");
        }
        let (scatter_text, sc_ret) =
            self.region(OP, &pair, |b, a| Ok(vec![scatter(b, a[0], a[1])?]))?;
        if sc_ret != [scalar] {
            bail!(OP, "scatter body must return one rank-0 {}", t.dtype);
        }
        let attrs = [
            ("window_dimensions", i64_array(window_dims)),
            ("window_strides", i64_array(strides)),
            ("padding", padding_attr(padding)),
        ];
        Ok(self.emit(
            OP,
            &[operand, source, init],
            &[select_text, scatter_text],
            &attrs,
            vec![t],
        )[0])
    }
}
