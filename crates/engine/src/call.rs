//! One op call as the engine sees it: the op name and its arguments, with
//! tensors as views of engine storages. Built from the C records in `ffi`,
//! or directly by the engine's own helpers (transfers).
use std::borrow::Cow;
use std::ffi::c_void;

use stablehlo::DType;

use crate::storage::Storage;

/// A view of a device storage. Sizes, strides and offset are in elements.
/// Sizes and strides borrow the caller's arrays where they can (an op's
/// arguments from PyTorch): no copies on the per-op path.
#[derive(Clone)]
pub struct TensorRef<'a> {
    pub storage: &'a Storage,
    pub dtype: DType,
    pub sizes: Cow<'a, [i64]>,
    pub strides: Cow<'a, [i64]>,
    pub offset: i64,
    pub wrapped: bool,
    pub math: MathBits,
}

/// PyTorch's lazy "math bits" on a view: `z.conj()` and `_neg_view()` only
/// set a flag, and ops that PyTorch lets through with the flag still set
/// (mm, bmm, addmm, dot, ... for the conjugate) read the view's values
/// conjugated or negated. The engine applies them where the view is read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MathBits(pub u8);

impl MathBits {
    pub const NONE: MathBits = MathBits(0);
    pub fn conj(self) -> bool {
        self.0 & 1 != 0
    }
    pub fn neg(self) -> bool {
        self.0 & 2 != 0
    }
}

impl TensorRef<'_> {
    pub fn numel(&self) -> i64 {
        self.sizes.iter().product()
    }
    pub fn is_contiguous(&self) -> bool {
        lowering::views::is_contiguous(&self.sizes, &self.strides)
    }
    /// The view is at offset 0 and its elements, in some dimension order,
    /// are exactly its storage (e.g. `w.t()` of a contiguous `w`): it is
    /// read without an offset input, so XLA sees a plain transpose.
    pub fn is_whole_permuted(&self) -> bool {
        self.offset == 0
            && (self.numel() as usize) * self.dtype.size_bytes() == self.storage.nbytes
            && self.is_non_overlapping_and_dense()
    }
    /// The elements, in some dimension order, are densely packed (torch's
    /// is_non_overlapping_and_dense(); dims of size 0 or 1 never count).
    pub fn is_non_overlapping_and_dense(&self) -> bool {
        let mut dims: Vec<usize> = (0..self.sizes.len()).filter(|&d| self.sizes[d] >= 2).collect();
        dims.sort_by_key(|&d| self.strides[d]);
        let mut expected = 1;
        for d in dims {
            if self.strides[d] != expected {
                return false;
            }
            expected *= self.sizes[d];
        }
        true
    }

    /// The view covers its whole storage, densely, from offset 0.
    pub fn is_whole(&self) -> bool {
        self.offset == 0
            && self.is_contiguous()
            && (self.numel() as usize) * self.dtype.size_bytes() == self.storage.nbytes
    }
}

#[derive(Clone)]
pub enum CallValue<'a> {
    None,
    Tensor(TensorRef<'a>),
    TensorList(Vec<Option<TensorRef<'a>>>),
    /// A CPU tensor with dimensions, allowed only where PyTorch moves it
    /// (e.g. indices); `bytes` is its contiguous data.
    HostTensor { dtype: DType, sizes: Vec<i64>, bytes: &'a [u8] },
    /// A runtime number: a Python scalar (dtype f64/i64/bool/complex128) or a
    /// 0-dim CPU tensor (`from_tensor`). A complex number keeps its real part
    /// in `f` and its imaginary part's bits in `i` (`complex_scalar`, `imag_part`).
    Scalar { dtype: DType, f: f64, i: i64, from_tensor: bool },
    /// A `Scalar[]` argument: runtime values too (optimizer step sizes
    /// change every step), as (float, int) pairs of one dtype.
    ScalarList { dtype: DType, values: Vec<(f64, i64)> },
    Int(i64),
    Float(f64),
    Bool(bool),
    IntList(Vec<i64>),
    FloatList(Vec<f64>),
    BoolList(Vec<bool>),
    Str(String),
    Generator(*mut c_void),
    Device(i64),
    Other(String),
}

#[derive(Clone)]
pub struct CallArg<'a> {
    pub value: CallValue<'a>,
    /// 0: read only; 1: an input the op also updates; 2: an out= argument.
    pub write: u8,
}

/// The `CallValue::Scalar` of a complex number.
pub fn complex_scalar<'a>(dtype: DType, re: f64, im: f64, from_tensor: bool) -> CallValue<'a> {
    CallValue::Scalar { dtype, f: re, i: im.to_bits() as i64, from_tensor }
}

/// The imaginary part of a complex `CallValue::Scalar`, from its `i`.
pub fn imag_part(i: i64) -> f64 {
    f64::from_bits(i as u64)
}

/// Kinds of returns, as the schema declares them.
pub const RET_TENSOR: i32 = 0;
pub const RET_LIST: i32 = 1;
pub const RET_NUMBER: i32 = 2;

pub struct Call<'a> {
    pub op: &'a str,
    pub args: Vec<CallArg<'a>>,
    /// For each return: the argument it aliases, or -1.
    pub ret_alias: Cow<'a, [i32]>,
    pub ret_kind: Cow<'a, [i32]>,
    /// PyTorch tags the op `pointwise`: its new outputs take the inputs'
    /// memory layout (`layout.rs`).
    pub pointwise: bool,
}

impl Call<'_> {
    /// The dtypes of each argument's tensors (none for other arguments): what
    /// a lowering's `size_when` looks at.
    pub fn arg_dtypes(&self) -> Vec<Vec<DType>> {
        self.args
            .iter()
            .map(|a| match &a.value {
                CallValue::Tensor(t) => vec![t.dtype],
                CallValue::TensorList(ts) => ts.iter().flatten().map(|t| t.dtype).collect(),
                CallValue::HostTensor { dtype, .. } => vec![*dtype],
                _ => vec![],
            })
            .collect()
    }

    /// The device the op runs on: that of its first device tensor, else 0.
    pub fn device(&self) -> i32 {
        for a in &self.args {
            match &a.value {
                CallValue::Tensor(t) => return t.storage.device,
                CallValue::TensorList(ts) => {
                    if let Some(Some(t)) = ts.iter().find(|t| t.is_some()) {
                        return t.storage.device;
                    }
                }
                CallValue::Device(d) if *d >= 0 => return *d as i32,
                _ => {}
            }
        }
        0
    }

    /// A short description of the tensor arguments, for error messages:
    /// "tensor of shape [2, 3] and dtype torch.float32, number 2.0".
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for a in self.args.iter().filter(|a| a.write != 2) {
            match &a.value {
                CallValue::Tensor(t) => parts.push(format!(
                    "tpu tensor of shape {:?} and dtype {}",
                    t.sizes,
                    lowering::dtypes::name(t.dtype)
                )),
                CallValue::TensorList(ts) => parts.push(format!(
                    "list of {} tensors{}",
                    ts.len(),
                    ts.iter()
                        .flatten()
                        .next()
                        .map(|t| format!(" (first of shape {:?}, {})", t.sizes, lowering::dtypes::name(t.dtype)))
                        .unwrap_or_default()
                )),
                CallValue::HostTensor { dtype, sizes, .. } => {
                    parts.push(format!("cpu tensor of shape {:?} and dtype {}", sizes, lowering::dtypes::name(*dtype)))
                }
                CallValue::Scalar { dtype, f, i, .. } => parts.push(if dtype.is_complex() {
                    format!("number ({f}{:+}j)", imag_part(*i))
                } else if dtype.is_float() {
                    format!("number {f}")
                } else {
                    format!("number {i}")
                }),
                _ => {}
            }
        }
        parts.join(", ")
    }
}
