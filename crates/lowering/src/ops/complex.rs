//! Complex tensors (complex64, complex128), as far as rotary embeddings
//! written with `torch.view_as_complex` / `torch.polar` need them (Meta's
//! Llama, torchtitan): building complex values, conjugation, and, through
//! the shared lowerings, arithmetic, copies and concatenation.
//!
//! `view_as_real`/`view_as_complex` are views (registered in the C++ glue);
//! a storage written as complex and read as float, or the reverse, is
//! reinterpreted part by part (`views::storage_as`).
//!
//! Most lowerings were written for real dtypes only, so complex tensors are
//! accepted only by the ops in [`COMPLEX_OPS`]; any other op given one fails
//! with a message naming it instead of computing something wrong.
use stablehlo::{Builder, DType, Value};

use super::elementwise::{broadcast_shape, type_name};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("conj_physical", conj_physical),
    op!("_conj_physical", conj_physical),
    op!("polar", polar),
    op!("complex", complex),
];

/// Ops (by base name, without overload or trailing `_`) whose lowerings are
/// correct for complex tensors.
pub const COMPLEX_OPS: &[&str] = &[
    // copies and conversions
    "copy", "_copy_from", "_copy_from_and_resize", "clone", "_to_copy", "fill", "zero", "alias_copy",
    "detach_copy", "cat", "stack", "_unsafe_view", "view_copy", "_reshape_copy",
    // moving elements (fftshift is a roll; slicing's backward pads)
    "roll", "flip", "index_select", "constant_pad_nd", "slice_backward", "select_backward", "repeat",
    "unfold_backward",
    "where", "sum", "mean", "prod", "cumsum", "cumprod", "var", "std", "var_mean", "std_mean", "logsumexp",
    "linalg_vector_norm", "norm",
    // indexing and masking
    "gather", "scatter", "index_put", "_index_put_impl", "masked_fill", "triu", "tril", "index", "_unsafe_index",
    "_unsafe_masked_index", "nonzero", "nonzero_static", "masked_select", "masked_scatter", "index_add",
    "index_copy", "index_fill", "scatter_add", "put", "take", "channel_shuffle", "native_channel_shuffle",
    "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d",
    "replication_pad3d", "im2col", "col2im", "eye",
    // more arithmetic and tests
    "rsub", "addcmul", "addcdiv", "lerp", "logical_and", "logical_or", "logical_xor", "logical_not", "all", "any",
    "count_nonzero", "exp2", "sinc", "linalg_cross", "nan_to_num",
    // random fills (through the view_as_real layout, as PyTorch fills them)
    "uniform", "normal",
    // refuses with a message of its own
    "_local_scalar_dense",
    // arithmetic and the math functions StableHLO defines on complex numbers
    "add", "sub", "mul", "div", "neg", "negative", "exp", "expm1", "log", "log2", "log10", "log1p", "sqrt",
    "rsqrt", "reciprocal", "sin", "cos", "tan", "tanh", "pow", "sinh", "cosh", "sigmoid", "square",
    "tanh_backward", "sigmoid_backward",
    // inverse trigonometric and hyperbolic functions (ops/complex_inverse.rs)
    "asin", "acos", "atan", "asinh", "acosh", "atanh",
    // equality (complex numbers have no order)
    "eq", "ne", "equal", "isnan", "isinf",
    // complex-specific (abs and angle dispatch here from their real lowerings)
    "conj_physical", "_conj_physical", "polar", "complex", "abs", "angle", "sgn", "_assert_async",
    // matrix products (ops/linalg.rs; conjugate-bit inputs are read conjugated)
    "mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "outer", "ger", "addr", "trace",
    "logaddexp", "logcumsumexp", "_logcumsumexp", "renorm",
    // LU and Cholesky families (ops/linalg_lu, ops/cholesky.rs)
    "linalg_matrix_exp", "linalg_lu_factor_ex", "linalg_lu", "lu_unpack", "linalg_lu_solve", "_linalg_solve_ex", "linalg_inv_ex",
    "_linalg_det", "_linalg_slogdet", "linalg_cholesky_ex", "linalg_cholesky", "cholesky", "triangular_solve",
    "linalg_solve_triangular", "cholesky_solve", "_cholesky_solve_helper", "cholesky_inverse",
    // Householder QR (ops/linalg_orth/householder.rs)
    "geqrf", "linalg_qr", "linalg_householder_product", "orgqr", "ormqr",
    // Jacobi eigh and SVD (ops/linalg_orth)
    "_linalg_eigh", "linalg_matrix_sqrth", "_linalg_svd", "linalg_polar", "linalg_lstsq",
    // torch.fft (ops/fft.rs)
    "_fft_r2c", "_fft_c2c", "_fft_c2r",
];

/// Whether `op` ("aten::mul.Tensor", "mul_", "aten::copy_ (cpu -> tpu)")
/// accepts complex tensors.
pub fn accepts_complex(op: &str) -> bool {
    COMPLEX_OPS.contains(&crate::table::functional_name(op))
}

/// conj_physical(self): the conjugate, materialized (real tensors: a copy).
fn conj_physical(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    if !t.dtype.is_complex() {
        return Ok(vec![t.value]);
    }
    Ok(vec![lx.b.conj(t.value)?])
}

/// The two float operands of polar/complex, broadcast to one shape.
fn float_pair(lx: &mut Lower, args: &Args, what: &str) -> Result<(Value, Value)> {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    if a.dtype != b.dtype || !matches!(a.dtype, DType::F32 | DType::F64) {
        bail!(
            Type,
            "{}: Expected both inputs to be Float or Double tensors but got {} and {} ({what}; \
             float16 and bfloat16 would need complex32, which tpu does not support)",
            lx.op,
            type_name(a.dtype),
            type_name(b.dtype)
        );
    }
    let shape = broadcast_shape(lx, &[&a, &b])?;
    Ok((lx.expand(a.value, &shape)?, lx.expand(b.value, &shape)?))
}

/// polar(abs, angle) = abs * (cos(angle) + i sin(angle)).
fn polar(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (r, theta) = float_pair(lx, args, "abs and angle")?;
    let c = lx.b.cosine(theta)?;
    let s = lx.b.sine(theta)?;
    let re = lx.b.mul(r, c)?;
    let im = lx.b.mul(r, s)?;
    Ok(vec![lx.b.complex(re, im)?])
}

/// complex(real, imag).
fn complex(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (re, im) = float_pair(lx, args, "real and imag")?;
    Ok(vec![lx.b.complex(re, im)?])
}

/// |z| = sqrt(re^2 + im^2), computed in f64 for complex64 so that squaring
/// cannot overflow; returned in the part dtype.
pub(crate) fn abs(lx: &mut Lower, z: Value) -> Result<Value> {
    let part = lx.dtype(z).complex_part().expect("complex");
    let re = lx.b.real(z)?;
    let im = lx.b.imag(z)?;
    let (re, im) = (lx.cast(re, DType::F64)?, lx.cast(im, DType::F64)?);
    let re2 = lx.b.mul(re, re)?;
    let im2 = lx.b.mul(im, im)?;
    let sum = lx.b.add(re2, im2)?;
    let r = lx.b.sqrt(sum)?;
    lx.cast(r, part)
}

/// arg(z) = atan2(im, re), in the part dtype.
pub(crate) fn angle(lx: &mut Lower, z: Value) -> Result<Value> {
    let re = lx.b.real(z)?;
    let im = lx.b.imag(z)?;
    Ok(lx.b.atan2(im, re)?)
}

/// sgn(z) = z / |z|, and 0 for z = 0.
pub(crate) fn sgn(lx: &mut Lower, z: Value) -> Result<Value> {
    let dtype = lx.dtype(z);
    let r = abs(lx, z)?;
    let zero = lx.full_like(r, 0.0)?;
    let is_zero = lx.b.compare(r, zero, stablehlo::CompareDir::Eq)?;
    let one = lx.full_like(r, 1.0)?;
    let safe = lx.b.select(is_zero, one, r)?;
    let safe = lx.cast(safe, dtype)?;
    let q = lx.b.div(z, safe)?;
    let czero = lx.full_like(q, 0.0)?;
    Ok(lx.b.select(is_zero, czero, q)?)
}

/// logaddexp of complex values, as ATen's `_log_add_exp_helper`: ordered
/// by real part, log1p(exp(min - max)) + max; both real parts -inf gives
/// the smaller operand, both +inf log(exp(min) + exp(max)); any NaN part
/// gives NaN + NaN i.
pub(crate) fn logaddexp(lx: &mut Lower, x: Value, y: Value) -> Result<Value> {
    use stablehlo::CompareDir::{Eq, Lt, Ne};
    let (xr, yr) = (lx.b.real(x)?, lx.b.real(y)?);
    let x_first = lx.b.compare(xr, yr, Lt)?;
    let min = lx.b.select(x_first, x, y)?;
    let max = lx.b.select(x_first, y, x)?;
    let d = lx.b.sub(min, max)?;
    let e = lx.b.exp(d)?;
    let l = lx.b.log_plus_one(e)?;
    let general = lx.b.add(l, max)?;
    let (emin, emax) = (lx.b.exp(min)?, lx.b.exp(max)?);
    let s = lx.b.add(emin, emax)?;
    let both_pos_inf = lx.b.log(s)?;
    let (minr, maxr) = (lx.b.real(min)?, lx.b.real(max)?);
    let fin = lx.b.is_finite(minr)?;
    let inf = lx.b.not(fin)?;
    let same = lx.b.compare(minr, maxr, Eq)?;
    let both_inf = lx.b.and(inf, same)?;
    let zero = lx.full_like(minr, 0.0)?;
    let neg = lx.b.compare(minr, zero, Lt)?;
    let at_inf = lx.b.select(neg, min, both_pos_inf)?;
    let r = lx.b.select(both_inf, at_inf, general)?;
    let nx = lx.b.compare(x, x, Ne)?;
    let ny = lx.b.compare(y, y, Ne)?;
    let nan = lx.b.or(nx, ny)?;
    let nanv = lx.full_like(xr, f64::NAN)?;
    let nanc = lx.b.complex(nanv, nanv)?;
    Ok(lx.b.select(nan, nanc, r)?)
}

// Helpers for lowerings that serve real and complex dtypes alike (linear
// algebra): each is the plain real operation for real values.

/// The complex conjugate.
pub(crate) fn conj(b: &mut Builder, x: Value) -> Result<Value> {
    Ok(if b.dtype(x).is_complex() { b.conj(x)? } else { x })
}

/// The conjugate transpose of the last two dims.
pub(crate) fn adjoint(b: &mut Builder, x: Value) -> Result<Value> {
    let r = b.shape(x).len() as i64;
    let perm: Vec<i64> = (0..r - 2).chain([r - 1, r - 2]).collect();
    let t = b.transpose(x, &perm)?;
    conj(b, t)
}

/// |x| as a real value, sqrt(re² + im²) in the part dtype for complex x:
/// for scaled inputs, or where only a comparison reads it.
pub(crate) fn modulus(b: &mut Builder, x: Value) -> Result<Value> {
    if !b.dtype(x).is_complex() {
        return Ok(b.abs(x)?);
    }
    let (re, im) = (b.real(x)?, b.imag(x)?);
    let (re2, im2) = (b.mul(re, re)?, b.mul(im, im)?);
    let s = b.add(re2, im2)?;
    Ok(b.sqrt(s)?)
}

/// `x` (`[.., n, n]`) with its diagonal's imaginary part dropped: LAPACK
/// reads only the real part of a Hermitian matrix's diagonal.
pub(crate) fn real_diagonal(b: &mut Builder, x: Value) -> Result<Value> {
    let dt = b.dtype(x);
    if !dt.is_complex() {
        return Ok(x);
    }
    let s = b.shape(x).to_vec();
    let r = s.len() as i64;
    let rows = b.iota(DType::I64, &s, r - 2)?;
    let cols = b.iota(DType::I64, &s, r - 1)?;
    let diag = b.compare(rows, cols, stablehlo::CompareDir::Eq)?;
    let re = b.real(x)?;
    let re = b.convert(re, dt)?;
    Ok(b.select(diag, re, x)?)
}
