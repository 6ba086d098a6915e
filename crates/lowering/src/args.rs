//! The arguments a lowering receives: tensors already read into values,
//! runtime scalars as rank-0 values, and static attributes as plain Rust data.
use stablehlo::{DType, Value};

use crate::bail;
use crate::dtypes;
use crate::error::Result;

/// A tensor argument, read from its storage view into a dense value.
#[derive(Clone, Debug)]
pub struct TensorArg {
    pub value: Value,
    pub dtype: DType,
    pub shape: Vec<i64>,
    /// A 0-dim CPU tensor or a wrapped Python number: weakest in promotion.
    pub wrapped_number: bool,
    /// Whether the tensor's strides are row-major contiguous: ATen picks
    /// between equivalent formulas by it (det factors A^T when A is), and
    /// the backward formulas assume that choice.
    pub contiguous: bool,
}

/// A Python number (or 0-dim CPU tensor) passed as a runtime value, so that
/// `x * 2.0` and `x * 3.0` share one executable.
#[derive(Clone, Debug)]
pub struct ScalarArg {
    /// Rank-0 value of `dtype` (f64 for floats, i64 for ints, i1 for bools,
    /// or the CPU tensor's own dtype).
    pub value: Value,
    pub dtype: DType,
    /// True for a 0-dim CPU tensor, which promotes like a 0-dim tensor.
    pub from_tensor: bool,
    /// The value itself (a complex number's real part); lowerings may only
    /// read it when their table entry sets `static_scalars`, because only
    /// then is it part of the cache key.
    pub literal: f64,
}

#[derive(Clone, Debug)]
pub enum Arg {
    None,
    Tensor(TensorArg),
    /// Entries are None for missing optional tensors (e.g. `index.Tensor`).
    TensorList(Vec<Option<TensorArg>>),
    Scalar(ScalarArg),
    /// A `Scalar[]`: runtime values, like Scalar.
    ScalarList(Vec<ScalarArg>),
    Int(i64),
    Float(f64),
    Bool(bool),
    IntList(Vec<i64>),
    FloatList(Vec<f64>),
    BoolList(Vec<bool>),
    Str(String),
    Generator,
    Device(i64),
    Other(String),
}

impl Arg {
    /// A tensor argument built inside a lowering (for `Lower::call`).
    pub fn tensor(value: Value, dtype: DType, shape: &[i64]) -> Arg {
        Arg::Tensor(TensorArg { value, dtype, shape: shape.to_vec(), wrapped_number: false, contiguous: true })
    }
}

/// An operand of an elementwise op: a tensor or a scalar, with what type
/// promotion needs to know about it.
#[derive(Clone, Debug)]
pub struct Operand {
    pub value: Value,
    pub dtype: DType,
    pub shape: Vec<i64>,
    pub class: PromoClass,
}

/// Priority classes of type promotion, strongest first.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PromoClass {
    Dimensioned,
    ZeroDim,
    Wrapped,
}

/// Positional arguments of one op call, in schema order (keyword-only
/// arguments included), with typed accessors that fail with clear errors.
#[derive(Clone, Debug, Default)]
pub struct Args {
    pub op: String,
    pub items: Vec<Arg>,
}

impl Args {
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn get(&self, i: usize) -> &Arg {
        self.items.get(i).unwrap_or(&Arg::None)
    }
    fn wrong(&self, i: usize, want: &str) -> crate::error::LowerError {
        crate::error::LowerError::new(
            crate::error::ErrorKind::Type,
            format!("{}: argument {} should be {}, got {:?}", self.op, i, want, self.get(i)),
        )
    }
    pub fn tensor(&self, i: usize) -> Result<&TensorArg> {
        match self.get(i) {
            Arg::Tensor(t) => Ok(t),
            _ => Err(self.wrong(i, "a tensor")),
        }
    }
    pub fn opt_tensor(&self, i: usize) -> Option<&TensorArg> {
        match self.get(i) {
            Arg::Tensor(t) => Some(t),
            _ => None,
        }
    }
    pub fn tensors(&self, i: usize) -> Result<Vec<TensorArg>> {
        match self.get(i) {
            Arg::TensorList(ts) => ts
                .iter()
                .map(|t| t.clone().ok_or_else(|| self.wrong(i, "a list of tensors without None")))
                .collect(),
            _ => Err(self.wrong(i, "a list of tensors")),
        }
    }
    pub fn opt_tensors(&self, i: usize) -> Result<Vec<Option<TensorArg>>> {
        match self.get(i) {
            Arg::TensorList(ts) => Ok(ts.clone()),
            _ => Err(self.wrong(i, "a list of tensors")),
        }
    }
    pub fn scalar(&self, i: usize) -> Result<&ScalarArg> {
        match self.get(i) {
            Arg::Scalar(s) => Ok(s),
            _ => Err(self.wrong(i, "a number")),
        }
    }
    pub fn opt_scalar(&self, i: usize) -> Option<&ScalarArg> {
        match self.get(i) {
            Arg::Scalar(s) => Some(s),
            _ => None,
        }
    }
    /// A tensor or a scalar, for elementwise ops.
    /// Tensor argument `i`, also when it arrived as a 0-dim CPU tensor (the
    /// engine passes those as scalars): ATen moves such a value to the
    /// device where an op takes a tensor (`x[mask] = torch.tensor(-1.)`).
    pub fn tensor_or_cpu_scalar(&self, i: usize) -> Result<TensorArg> {
        match self.get(i) {
            Arg::Scalar(s) if s.from_tensor => Ok(TensorArg {
                value: s.value,
                dtype: s.dtype,
                shape: vec![],
                wrapped_number: true,
                contiguous: true,
            }),
            _ => self.tensor(i).cloned(),
        }
    }
    pub fn operand(&self, i: usize) -> Result<Operand> {
        match self.get(i) {
            Arg::Tensor(t) => Ok(Operand {
                value: t.value,
                dtype: t.dtype,
                shape: t.shape.clone(),
                class: if t.wrapped_number {
                    PromoClass::Wrapped
                } else if t.shape.is_empty() {
                    PromoClass::ZeroDim
                } else {
                    PromoClass::Dimensioned
                },
            }),
            Arg::Scalar(s) => Ok(Operand {
                value: s.value,
                dtype: s.dtype,
                shape: vec![],
                class: if s.from_tensor { PromoClass::ZeroDim } else { PromoClass::Wrapped },
            }),
            _ => Err(self.wrong(i, "a tensor or a number")),
        }
    }
    pub fn int(&self, i: usize) -> Result<i64> {
        match self.get(i) {
            Arg::Int(v) => Ok(*v),
            Arg::Bool(b) => Ok(*b as i64),
            _ => Err(self.wrong(i, "an int")),
        }
    }
    pub fn int_or(&self, i: usize, default: i64) -> Result<i64> {
        match self.get(i) {
            Arg::None => Ok(default),
            _ => self.int(i),
        }
    }
    pub fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        match self.get(i) {
            Arg::None => Ok(None),
            _ => self.int(i).map(Some),
        }
    }
    pub fn float(&self, i: usize) -> Result<f64> {
        match self.get(i) {
            Arg::Float(v) => Ok(*v),
            Arg::Int(v) => Ok(*v as f64),
            Arg::Scalar(s) => Ok(s.literal),
            _ => Err(self.wrong(i, "a float")),
        }
    }
    pub fn float_or(&self, i: usize, default: f64) -> Result<f64> {
        match self.get(i) {
            Arg::None => Ok(default),
            _ => self.float(i),
        }
    }
    pub fn bool_or(&self, i: usize, default: bool) -> Result<bool> {
        match self.get(i) {
            Arg::None => Ok(default),
            Arg::Bool(b) => Ok(*b),
            Arg::Int(v) => Ok(*v != 0),
            _ => Err(self.wrong(i, "a bool")),
        }
    }
    pub fn ints(&self, i: usize) -> Result<Vec<i64>> {
        match self.get(i) {
            Arg::IntList(v) => Ok(v.clone()),
            Arg::Int(v) => Ok(vec![*v]),
            _ => Err(self.wrong(i, "a list of ints")),
        }
    }
    pub fn opt_ints(&self, i: usize) -> Result<Option<Vec<i64>>> {
        match self.get(i) {
            Arg::None => Ok(None),
            _ => self.ints(i).map(Some),
        }
    }
    /// A `bool[N]` argument (output_mask), None when absent.
    pub fn opt_bools(&self, i: usize) -> Option<&[bool]> {
        match self.get(i) {
            Arg::BoolList(v) => Some(v),
            _ => None,
        }
    }

    pub fn opt_str(&self, i: usize) -> Option<&str> {
        match self.get(i) {
            Arg::Str(s) => Some(s.as_str()),
            _ => None,
        }
    }
    /// A `ScalarType?` argument (passed as its c10 code).
    pub fn opt_dtype(&self, i: usize) -> Result<Option<DType>> {
        match self.get(i) {
            Arg::None => Ok(None),
            Arg::Int(code) => match dtypes::from_torch(*code as i32) {
                Some(d) => Ok(Some(d)),
                None => bail!(Type, "{}: dtype {} is not supported on tpu", self.op, dtypes::torch_name(*code as i32)),
            },
            _ => Err(self.wrong(i, "a dtype")),
        }
    }
}

/// Normalizes a possibly negative dimension index against `rank`.
pub fn norm_dim(op: &str, dim: i64, rank: usize) -> Result<usize> {
    let r = rank.max(1) as i64;
    let d = if dim < 0 { dim + r } else { dim };
    if d < 0 || d >= r {
        bail!(
            Index,
            "{op}: Dimension out of range (expected to be in range of [{}, {}], but got {dim})",
            -r,
            r - 1
        );
    }
    Ok(d as usize)
}
