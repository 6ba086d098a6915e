//! Matrix products: mm, bmm, addmm, baddbmm, addbmm, addmv, mv, dot, vdot,
//! addr, outer/ger, trace and `_addmm_activation`.
//!
//! `matmul`, `linear` and `outer` are CompositeImplicit in PyTorch: on tpu
//! they reach mm/bmm/addmm/addmv/dot (plus views and `mul`), which live here.
//! Products of 16-bit floats accumulate in f32 (`dot_general`'s result type)
//! and round once at the end, like PyTorch's CPU kernels; `beta * self` and
//! `alpha * product` are also applied in that accumulation type.
use stablehlo::{CompareDir, DType, Value};

use crate::args::{Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::dtypes;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;
use super::elementwise::type_name;

pub const OPS: &[OpEntry] = &[
    op!("mm", mm),
    op!("bmm", bmm),
    op!("addmm", addmm),
    op!("_addmm_activation", addmm_activation),
    op!("baddbmm", baddbmm),
    op!("addbmm", addbmm),
    op!("mv", mv),
    op!("addmv", addmv),
    op!("dot", dot),
    op!("vdot", vdot),
    op!("addr", addr),
    op!("outer", outer),
    op!("ger", outer),
    op!("trace", trace),
];

/// The type products accumulate in: f32 for 16-bit floats, else the dtype.
fn acc_type(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

fn supported(lx: &Lower, kernel: &str, d: DType) -> Result<()> {
    if d == DType::Bool || d.is_unsigned_integer() && d != DType::U8 {
        bail!(
            NotImplemented,
            "{}: \"{kernel}\" not implemented for '{}'",
            lx.op,
            type_name(d)
        );
    }
    Ok(())
}

fn same_dtype(lx: &Lower, a: &TensorArg, b: &TensorArg) -> Result<()> {
    if a.dtype != b.dtype {
        bail!(
            Runtime,
            "{}: expected m1 and m2 to have the same dtype, but got: {} != {}",
            lx.op,
            dtypes::name(a.dtype).trim_start_matches("torch."),
            dtypes::name(b.dtype).trim_start_matches("torch.")
        );
    }
    Ok(())
}

fn need_rank(lx: &Lower, t: &TensorArg, rank: usize, what: &str) -> Result<()> {
    if t.shape.len() != rank {
        bail!(
            Runtime,
            "{}: {what} must be a {}, got {}-D tensor",
            lx.op,
            match rank {
                1 => "vector",
                2 => "matrix",
                _ => "3D tensor",
            },
            t.shape.len()
        );
    }
    Ok(())
}

/// `a @ b` over the contracting dims, accumulated in `acc_type`. 16-bit
/// operands are widened first rather than handed over as a mixed-precision
/// dot (bf16 x bf16 -> f32): the XLA CPU plugin runs such a dot only where
/// its YNNPACK path takes it, and elsewhere fails at run time ("Unsupported
/// element type for DotThunk::Execute"), e.g. after a bucketing mask. The
/// widening is exact, so the result is the same.
fn contract(
    lx: &mut Lower,
    a: Value,
    b: Value,
    batch: &[i64],
    lc: &[i64],
    rc: &[i64],
) -> Result<Value> {
    let dtype = lx.dtype(a);
    let acc = acc_type(dtype);
    let (a, b) = if acc == dtype { (a, b) } else { (lx.b.convert(a, acc)?, lx.b.convert(b, acc)?) };
    Ok(lx.b.dot_general(a, b, batch, batch, lc, rc, Some(acc))?)
}

/// The product of a mm of [n,k]x[k,m] in the accumulation type.
fn mm_acc(lx: &mut Lower, a: &TensorArg, b: &TensorArg) -> Result<Value> {
    need_rank(lx, a, 2, "self")?;
    need_rank(lx, b, 2, "mat2")?;
    same_dtype(lx, a, b)?;
    supported(lx, "addmm_impl_cpu_", a.dtype)?;
    if a.shape[1] != b.shape[0] {
        bail!(
            Runtime,
            "{}: mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})",
            lx.op,
            a.shape[0],
            a.shape[1],
            b.shape[0],
            b.shape[1]
        );
    }
    contract(lx, a.value, b.value, &[], &[1], &[0])
}

fn bmm_acc(lx: &mut Lower, a: &TensorArg, b: &TensorArg) -> Result<Value> {
    need_rank(lx, a, 3, "batch1")?;
    need_rank(lx, b, 3, "batch2")?;
    same_dtype(lx, a, b)?;
    supported(lx, "bmm", a.dtype)?;
    if b.shape[0] != a.shape[0] || b.shape[1] != a.shape[2] {
        bail!(
            Runtime,
            "{}: Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}].",
            lx.op,
            a.shape[0],
            a.shape[2],
            b.shape[0],
            b.shape[1]
        );
    }
    contract(lx, a.value, b.value, &[0], &[2], &[1])
}

fn mv_acc(lx: &mut Lower, m: &TensorArg, v: &TensorArg) -> Result<Value> {
    need_rank(lx, m, 2, "mat")?;
    need_rank(lx, v, 1, "vec")?;
    same_dtype(lx, m, v)?;
    supported(lx, "addmv_impl_cpu", m.dtype)?;
    if m.shape[1] != v.shape[0] {
        bail!(
            Runtime,
            "{}: size mismatch, got input ({}), mat ({}x{}), vec ({})",
            lx.op,
            m.shape[0],
            m.shape[0],
            m.shape[1],
            v.shape[0]
        );
    }
    contract(lx, m.value, v.value, &[], &[1], &[0])
}

/// Rounds an accumulated product back to the inputs' dtype.
fn finish(lx: &mut Lower, v: Value, dtype: DType) -> Result<Vec<Value>> {
    Ok(vec![lx.cast(v, dtype)?])
}

fn mm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (a, b) = (args.tensor(0)?, args.tensor(1)?);
    let p = mm_acc(lx, a, b)?;
    finish(lx, p, a.dtype)
}

fn bmm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (a, b) = (args.tensor(0)?, args.tensor(1)?);
    let p = bmm_acc(lx, a, b)?;
    finish(lx, p, a.dtype)
}

fn mv(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (m, v) = (args.tensor(0)?, args.tensor(1)?);
    let p = mv_acc(lx, m, v)?;
    finish(lx, p, m.dtype)
}

/// Checks that self has the inputs' dtype (addmm and friends do not promote).
fn self_dtype(lx: &Lower, args: &Args, dtype: DType) -> Result<()> {
    let this = args.tensor(0)?;
    if this.dtype != dtype {
        bail!(
            Runtime,
            "{}: self and mat2 must have the same dtype, but got {} and {}",
            lx.op,
            type_name(this.dtype),
            type_name(dtype)
        );
    }
    Ok(())
}

/// `beta * self + alpha * product` in the product's (accumulation) type,
/// with torch's rule that beta == 0 ignores self (NaN and inf in it too).
/// `beta`/`alpha` are the argument positions of the two Scalars.
fn add_scaled(
    lx: &mut Lower,
    args: &Args,
    product: Value,
    beta: usize,
    alpha: usize,
) -> Result<Value> {
    let this = args.tensor(0)?;
    let acc = lx.dtype(product);
    let shape = lx.shape(product);
    if lx.b.broadcast_shapes(&this.shape, &shape).ok().as_deref() != Some(&shape[..]) {
        bail!(
            Runtime,
            "{}: The expanded size of the tensor must match the existing size: self of shape {:?} cannot broadcast to the product's shape {:?}",
            lx.op,
            this.shape,
            shape
        );
    }
    let s = lx.cast(this.value, acc)?;
    let s = lx.expand(s, &shape)?;
    let mut out = product;
    if let Some(al) = args.opt_scalar(alpha) {
        let al = scalar_as(lx, al.value, acc, &shape)?;
        out = lx.b.mul(out, al)?;
    }
    let scaled = match args.opt_scalar(beta) {
        Some(be) => {
            let be = scalar_as(lx, be.value, acc, &shape)?;
            let prod = lx.b.mul(s, be)?;
            let zero = lx.full_like(be, 0.0)?;
            let is_zero = lx.b.compare(be, zero, CompareDir::Eq)?;
            lx.b.select(is_zero, zero, prod)?
        }
        None => s,
    };
    Ok(lx.b.add(scaled, out)?)
}

/// A rank-0 runtime scalar converted to `dtype` and broadcast to `shape`.
fn scalar_as(lx: &mut Lower, v: Value, dtype: DType, shape: &[i64]) -> Result<Value> {
    let v = lx.cast(v, dtype)?;
    Ok(lx.b.broadcast_in_dim(v, shape, &[])?)
}

/// addmm(self, mat1, mat2, *, beta=1, alpha=1)
fn addmm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (a, b) = (args.tensor(1)?, args.tensor(2)?);
    let p = mm_acc(lx, a, b)?;
    self_dtype(lx, args, a.dtype)?;
    let r = add_scaled(lx, args, p, 3, 4)?;
    finish(lx, r, a.dtype)
}

/// _addmm_activation(self, mat1, mat2, *, beta, alpha, use_gelu): addmm then
/// relu (or gelu).
fn addmm_activation(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (a, b) = (args.tensor(1)?, args.tensor(2)?);
    let p = mm_acc(lx, a, b)?;
    self_dtype(lx, args, a.dtype)?;
    let r = add_scaled(lx, args, p, 3, 4)?;
    let gelu = args.bool_or(5, false)?;
    let out = if gelu {
        // Exact (erf) gelu, as PyTorch's CPU kernel: 0.5 x (1 + erf(x / sqrt 2)).
        let k = lx.full_like(r, std::f64::consts::FRAC_1_SQRT_2)?;
        let t = lx.b.mul(r, k)?;
        let t = crate::ops::special_fns::erf_precise(lx, t)?;
        let one = lx.full_like(r, 1.0)?;
        let t = lx.b.add(t, one)?;
        let half = lx.full_like(r, 0.5)?;
        let t = lx.b.mul(t, half)?;
        lx.b.mul(r, t)?
    } else {
        let zero = lx.full_like(r, 0.0)?;
        lx.b.max(r, zero)?
    };
    finish(lx, out, a.dtype)
}

/// baddbmm(self, batch1, batch2, *, beta=1, alpha=1)
fn baddbmm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (a, b) = (args.tensor(1)?, args.tensor(2)?);
    let p = bmm_acc(lx, a, b)?;
    self_dtype(lx, args, a.dtype)?;
    let r = add_scaled(lx, args, p, 3, 4)?;
    finish(lx, r, a.dtype)
}

/// addbmm(self, batch1, batch2, *, beta=1, alpha=1): the batch products summed.
fn addbmm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (a, b) = (args.tensor(1)?, args.tensor(2)?);
    need_rank(lx, a, 3, "batch1")?;
    need_rank(lx, b, 3, "batch2")?;
    same_dtype(lx, a, b)?;
    if a.shape[0] != b.shape[0] || a.shape[2] != b.shape[1] {
        bail!(
            Runtime,
            "{}: batch1 and batch2 shapes cannot be multiplied ({:?} and {:?})",
            lx.op,
            a.shape,
            b.shape
        );
    }
    // Contract over the batch and k dims at once.
    let p = contract(lx, a.value, b.value, &[], &[0, 2], &[0, 1])?;
    self_dtype(lx, args, a.dtype)?;
    let r = add_scaled(lx, args, p, 3, 4)?;
    finish(lx, r, a.dtype)
}

/// addmv(self, mat, vec, *, beta=1, alpha=1)
fn addmv(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (m, v) = (args.tensor(1)?, args.tensor(2)?);
    let p = mv_acc(lx, m, v)?;
    self_dtype(lx, args, m.dtype)?;
    let r = add_scaled(lx, args, p, 3, 4)?;
    finish(lx, r, m.dtype)
}

fn dot(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (a, b) = (args.tensor(0)?, args.tensor(1)?);
    if a.shape.len() != 1 || b.shape.len() != 1 {
        bail!(
            Runtime,
            "{}: 1D tensors expected, but got {}D and {}D tensors",
            lx.op,
            a.shape.len(),
            b.shape.len()
        );
    }
    if a.dtype != b.dtype {
        bail!(
            Runtime,
            "{}: dot : expected both vectors to have same dtype, but found {} and {}",
            lx.op,
            type_name(a.dtype),
            type_name(b.dtype)
        );
    }
    supported(lx, "dot", a.dtype)?;
    if a.shape[0] != b.shape[0] {
        bail!(
            Runtime,
            "{}: inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of elements, but got {} and {} elements respectively",
            lx.op,
            a.shape[0],
            b.shape[0],
            a.shape[0],
            b.shape[0]
        );
    }
    let p = contract(lx, a.value, b.value, &[], &[0], &[0])?;
    finish(lx, p, a.dtype)
}

/// vdot(a, b): the dot product with `a` conjugated (for real tensors, dot).
fn vdot(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let a = args.tensor(0)?;
    if !a.dtype.is_complex() {
        return dot(lx, args);
    }
    let conj = lx.b.conj(a.value)?;
    let mut args = args.clone();
    if let Some(crate::args::Arg::Tensor(t)) = args.items.get_mut(0) {
        t.value = conj;
    }
    dot(lx, &args)
}

/// The outer product of two vectors in the accumulation type.
fn outer_acc(lx: &mut Lower, a: &TensorArg, b: &TensorArg) -> Result<Value> {
    if a.shape.len() != 1 || b.shape.len() != 1 {
        bail!(
            Runtime,
            "{}: outer: expected 1D vectors, but got {}D and {}D tensors",
            lx.op,
            a.shape.len(),
            b.shape.len()
        );
    }
    let dtype = crate::promote::promote_types(a.dtype, b.dtype);
    let acc = acc_type(dtype);
    let shape = [a.shape[0], b.shape[0]];
    let x = lx.cast(a.value, acc)?;
    let x = lx.b.broadcast_in_dim(x, &shape, &[0])?;
    let y = lx.cast(b.value, acc)?;
    let y = lx.b.broadcast_in_dim(y, &shape, &[1])?;
    Ok(lx.b.mul(x, y)?)
}

fn outer(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (a, b) = (args.tensor(0)?, args.tensor(1)?);
    let p = outer_acc(lx, a, b)?;
    let dtype = crate::promote::promote_types(a.dtype, b.dtype);
    finish(lx, p, dtype)
}

/// addr(self, vec1, vec2, *, beta=1, alpha=1)
fn addr(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (a, b) = (args.tensor(1)?, args.tensor(2)?);
    let p = outer_acc(lx, a, b)?;
    let this = args.tensor(0)?;
    let dtype =
        crate::promote::promote_types(this.dtype, crate::promote::promote_types(a.dtype, b.dtype));
    if dtype == DType::Bool {
        return Ok(vec![bool_addr(lx, args, p)?]);
    }
    let p = lx.cast(p, acc_type(dtype))?;
    let r = add_scaled(lx, args, p, 3, 4)?;
    finish(lx, r, dtype)
}

/// Bool addr, as the CPU computes it: (beta and self) or (alpha and outer),
/// a zero beta ignoring self.
fn bool_addr(lx: &mut Lower, args: &Args, product: Value) -> Result<Value> {
    let this = args.tensor(0)?;
    let shape = lx.shape(product);
    // `v and scalar`, where the Scalar argument at `at` is given.
    let and_scalar = |lx: &mut Lower, v: Value, at: usize| -> Result<Value> {
        let Some(s) = args.opt_scalar(at) else { return Ok(v) };
        let s = lx.cast(s.value, DType::Bool)?;
        let s = lx.b.broadcast_in_dim(s, &shape, &[])?;
        Ok(lx.b.and(v, s)?)
    };
    let outer = lx.cast(product, DType::Bool)?;
    let outer = and_scalar(lx, outer, 4)?;
    let s = lx.cast(this.value, DType::Bool)?;
    let s = lx.expand(s, &shape)?;
    let s = and_scalar(lx, s, 3)?;
    Ok(lx.b.or(s, outer)?)
}

/// trace(self): the sum of the main diagonal of a matrix (integers give int64).
fn trace(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    if t.shape.len() != 2 {
        bail!(
            Runtime,
            "{}: trace: expected a matrix, but got tensor with dim {}",
            lx.op,
            t.shape.len()
        );
    }
    supported(lx, "trace", t.dtype)?;
    let out_dtype = if t.dtype.is_float() || t.dtype.is_complex() {
        t.dtype
    } else {
        DType::I64
    };
    let acc = acc_type(out_dtype);
    let v = lx.cast(t.value, acc)?;
    let r = lx.b.iota(DType::I64, &t.shape, 0)?;
    let c = lx.b.iota(DType::I64, &t.shape, 1)?;
    let on = lx.b.compare(r, c, CompareDir::Eq)?;
    let zero = lx.full(acc, 0.0, &t.shape)?;
    let d = lx.b.select(on, v, zero)?;
    let s = lx.b.reduce_sum(d, &[0, 1])?;
    finish(lx, s, out_dtype)
}
