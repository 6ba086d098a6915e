//! Indexing by index tensors: index_select, index_fill, take and the shared
//! helpers here; gather/scatter/scatter_reduce/index_add/index_copy in
//! `scatter`; advanced indexing (`index.Tensor`, `index_put`,
//! `masked_scatter`) in `advanced`. (embedding's backward is in `nn`;
//! embedding itself reaches the device as index_select.)
//!
//! Index values are only known on the device, so out-of-range indices are
//! reported through `lx.check` (an IndexError at the next host sync; the
//! program itself clamps gathers and drops out-of-bounds scatter updates).
//! Ops that PyTorch lets wrap negative indices (index, index_put, index_fill,
//! take) wrap them here; the others treat them as out of range, like the CPU.
use stablehlo::{CompareDir, DType, GatherDims, Value};

use crate::args::{norm_dim, Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::{ErrorKind, Result};
use crate::op;
use crate::table::OpEntry;

mod advanced;
mod scatter;

pub const OPS: &[OpEntry] = &[
    op!("index_select", index_select),
    op!("gather", scatter::gather),
    op!("scatter", scatter::scatter),
    op!("scatter_add", scatter::scatter_add),
    op!("scatter_reduce", scatter::scatter_reduce),
    op!("index_add", scatter::index_add),
    op!("index_copy", scatter::index_copy),
    op!("index_fill", index_fill),
    op!("take", take),
    op!("index", advanced::index, size = advanced::index_mask_count, when = advanced::has_mask_index),
    op!("_unsafe_index", advanced::index),
    op!("index_put", advanced::index_put),
    op!("_index_put_impl", advanced::index_put),
    op!("_unsafe_index_put", advanced::index_put),
    op!("masked_scatter", advanced::masked_scatter),
];

/// An integer index tensor as i64.
pub(super) fn as_index(lx: &mut Lower, t: &TensorArg) -> Result<Value> {
    if !t.dtype.is_integer() {
        bail!(
            Index,
            "{}: tensors used as indices must be long, int, byte or bool tensors, got {}",
            lx.op,
            crate::dtypes::name(t.dtype)
        );
    }
    lx.cast(t.value, DType::I64)
}

/// A rank-0 i1 that is true when any element of `v` (i1) is.
pub(crate) fn any(lx: &mut Lower, v: Value) -> Result<Value> {
    let r = lx.shape(v).len() as i64;
    if r == 0 {
        return Ok(v);
    }
    let dims: Vec<i64> = (0..r).collect();
    Ok(lx.b.reduce_or(v, &dims)?)
}

/// Whether any element of the i1 `mask` is set, the flat (row-major)
/// position of the first set one, and `x` there: what a CPU kernel that
/// checks element by element reports. One reduction (the position) and a
/// one-element slice; position and value mean nothing when none is set.
pub(crate) fn first_flagged(lx: &mut Lower, mask: Value, x: Value) -> Result<(Value, Value, Value)> {
    let n: i64 = lx.shape(mask).iter().product();
    let zero = lx.b.splat_i64(DType::I64, 0, &[])?;
    if n == 0 {
        let none = lx.b.compare(zero, zero, CompareDir::Ne)?;
        return Ok((none, zero, zero));
    }
    let mask = lx.b.reshape(mask, &[n])?;
    let x = lx.cast(x, DType::I64)?;
    let x = lx.b.reshape(x, &[n])?;
    let pos = lx.b.iota(DType::I64, &[n], 0)?;
    let past = lx.b.splat_i64(DType::I64, n, &[n])?;
    let flagged_pos = lx.b.select(mask, pos, past)?;
    let first = lx.b.reduce_min(flagged_pos, &[0])?;
    let end = lx.b.splat_i64(DType::I64, n, &[])?;
    let any = lx.b.compare(first, end, CompareDir::Lt)?;
    // dynamic_slice clamps a start of n to n - 1.
    let value = lx.b.dynamic_slice(x, &[first], &[1])?;
    let value = lx.b.reshape(value, &[])?;
    Ok((any, first, value))
}

/// The exception an out-of-range index raises, as on the CPU: the
/// gather/scatter family (and index_add) raise RuntimeError, the rest
/// IndexError.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum OutOfRange {
    IndexError,
    RuntimeError,
    /// RuntimeError where this rank-0 i1 holds, else IndexError: for an
    /// op whose CPU kernel takes a scatter shortcut only for some runtime
    /// scalars (index_add with alpha 1).
    RuntimeErrorWhen(Value),
}

/// Records a check for indices outside [-size, size) (`wrap`) or [0, size),
/// and returns the indices wrapped into [0, size).
pub(super) fn checked(
    lx: &mut Lower,
    idx: Value,
    size: i64,
    dim: usize,
    wrap: bool,
    what: &str,
    raises: OutOfRange,
) -> Result<Value> {
    let shape = lx.shape(idx);
    let lo_v = if wrap { -size } else { 0 };
    let lo = lx.b.splat_i64(DType::I64, lo_v, &shape)?;
    let hi = lx.b.splat_i64(DType::I64, size, &shape)?;
    let below = lx.b.compare(idx, lo, CompareDir::Lt)?;
    let above = lx.b.compare(idx, hi, CompareDir::Ge)?;
    let bad = lx.b.or(below, above)?;
    // The CPU's kernels name the first bad index ("index 5 is out of bounds
    // for dimension 0 with size 3") or say "index out of range in self":
    // the message has both, and the valid range.
    let (flag, _, value) = first_flagged(lx, bad, idx)?;
    let message = format!(
        "{}: index out of range in self: index {{0}} is out of bounds for dimension {dim} with size {size} \
         (valid: [{lo_v}, {size}); {what})",
        lx.op
    );
    match raises {
        OutOfRange::IndexError => lx.check_quoting(ErrorKind::Index, flag, &[value], message)?,
        OutOfRange::RuntimeError => lx.check_quoting(ErrorKind::Runtime, flag, &[value], message)?,
        OutOfRange::RuntimeErrorWhen(runtime) => {
            let as_runtime = lx.b.and(flag, runtime)?;
            let not_runtime = lx.b.not(runtime)?;
            let as_index = lx.b.and(flag, not_runtime)?;
            lx.check_quoting(ErrorKind::Runtime, as_runtime, &[value], message.clone())?;
            lx.check_quoting(ErrorKind::Index, as_index, &[value], message)?;
        }
    }
    if !wrap {
        return Ok(idx);
    }
    let zero = lx.b.splat_i64(DType::I64, 0, &shape)?;
    let neg = lx.b.compare(idx, zero, CompareDir::Lt)?;
    let plus = lx.b.add(idx, hi)?;
    Ok(lx.b.select(neg, plus, idx)?)
}

pub(super) fn shapes(t: &TensorArg, i: &TensorArg) -> String {
    format!("input shape {:?}, index shape {:?}", t.shape, i.shape)
}

/// Rows `idx` ([k] i64, in range) of `v` along `d`: the result has k in place of dim d.
pub(super) fn take_rows(lx: &mut Lower, v: Value, idx: Value, d: usize) -> Result<Value> {
    let shape = lx.shape(v);
    let k = lx.shape(idx)[0];
    let r = shape.len();
    let idx = lx.b.reshape(idx, &[k, 1])?;
    let mut slice = shape.clone();
    slice[d] = 1;
    let dims = GatherDims {
        offset_dims: (0..r as i64).filter(|&x| x != d as i64).collect(),
        collapsed_slice_dims: vec![d as i64],
        start_index_map: vec![d as i64],
        index_vector_dim: 1,
        ..Default::default()
    };
    Ok(lx.b.gather(v, idx, &dims, &slice, false)?)
}

/// index_select(self, dim, index): no negative indices, like the CPU.
fn index_select(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let index = args.tensor(2)?;
    if !matches!(index.dtype, DType::I32 | DType::I64) {
        bail!(Runtime, "{}: index_select(): Expected dtype int32 or int64 for index", lx.op);
    }
    // The CPU takes no cast into out=, not even a widening one.
    if lx.out_dtype.is_some_and(|d| d != t.dtype) {
        bail!(Runtime, "{}: index_select(): self and result must have the same scalar type", lx.op);
    }
    if index.shape.len() > 1 {
        bail!(
            Index,
            "{}: index_select(): Index is supposed to be a vector, got shape {:?}",
            lx.op,
            index.shape
        );
    }
    let d = norm_dim(lx.op, args.int(1)?, t.shape.len())?;
    let k: i64 = index.shape.iter().product();
    if t.shape.is_empty() && k != 1 {
        bail!(Index, "{}: index_select(): Index to scalar can have only 1 value, got {k} value(s)", lx.op);
    }
    let (v, shape) = if t.shape.is_empty() {
        (lx.b.reshape(t.value, &[1])?, vec![1])
    } else {
        (t.value, t.shape.clone())
    };
    let mut out_shape = shape.clone();
    out_shape[d] = k;
    if k == 0 || out_shape.iter().product::<i64>() == 0 {
        if shape[d] == 0 && k > 0 {
            bail!(
                Index,
                "{}: index out of range in self (dimension {d} has size 0)",
                lx.op
            );
        }
        let z = lx.full(t.dtype, 0.0, &out_shape)?;
        return Ok(vec![if t.shape.is_empty() {
            lx.b.reshape(z, &index.shape)?
        } else {
            z
        }]);
    }
    let idx = as_index(lx, index)?;
    let idx = lx.b.reshape(idx, &[k])?;
    let idx = checked(lx, idx, shape[d], d, false, &shapes(t, index), OutOfRange::IndexError)?;
    let out = take_rows(lx, v, idx, d)?;
    // A 0-dim source gives a 0-dim result, whatever the index's shape (as CPU).
    Ok(vec![if t.shape.is_empty() { lx.b.reshape(out, &[])? } else { out }])
}

/// index_fill(self, dim, index, value): negative indices wrap.
fn index_fill(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let index = args.tensor(2)?;
    let d = norm_dim(lx.op, args.int(1)?, t.shape.len())?;
    let value = args.operand(3)?;
    if !value.shape.is_empty() {
        bail!(Runtime, "{}: index_fill_ only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).", lx.op, value.shape.len());
    }
    let k: i64 = index.shape.iter().product();
    if k == 0 || t.shape.iter().product::<i64>() == 0 {
        return Ok(vec![t.value]);
    }
    let n = if t.shape.is_empty() { 1 } else { t.shape[d] };
    let idx = as_index(lx, index)?;
    let idx = lx.b.reshape(idx, &[k])?;
    let idx = checked(lx, idx, n, d, true, &shapes(t, index), OutOfRange::IndexError)?;
    let ib = lx.b.broadcast_in_dim(idx, &[k, n], &[0])?;
    let pos = lx.b.iota(DType::I64, &[k, n], 1)?;
    let eq = lx.b.compare(ib, pos, CompareDir::Eq)?;
    let hit = lx.b.reduce_or(eq, &[0])?;
    let mask = if t.shape.is_empty() {
        lx.b.reshape(hit, &[])?
    } else {
        lx.b.broadcast_in_dim(hit, &t.shape, &[d as i64])?
    };
    let v = crate::ops::elementwise::checked_fill_value(lx, &value, t.dtype)?;
    let v = lx.b.broadcast_in_dim(v, &t.shape, &[])?;
    Ok(vec![lx.b.select(mask, v, t.value)?])
}

/// take(self, index): elements of the flattened self; negative indices wrap.
fn take(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let index = args.tensor(1)?;
    let n: i64 = t.shape.iter().product();
    let k: i64 = index.shape.iter().product();
    if k == 0 {
        return Ok(vec![lx.full(t.dtype, 0.0, &index.shape)?]);
    }
    if n == 0 {
        bail!(
            Index,
            "{}: out of range: tried to access an index on a tensor of 0 elements.",
            lx.op
        );
    }
    let flat = lx.b.reshape(t.value, &[n])?;
    let idx = as_index(lx, index)?;
    let idx = lx.b.reshape(idx, &[k])?;
    let idx = checked(lx, idx, n, 0, true, &shapes(t, index), OutOfRange::IndexError)?;
    let out = take_rows(lx, flat, idx, 0)?;
    Ok(vec![lx.b.reshape(out, &index.shape)?])
}
