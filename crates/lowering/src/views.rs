//! Reading a strided tensor view out of a storage buffer, and writing a value
//! back into one.
//!
//! Invariants: a storage buffer is always 1-D (`[n]` of the dtype it was last
//! written with); sizes, strides and offsets are in elements of the view's
//! dtype. A view's offset is a runtime i64 value, so slices at different
//! positions share one executable.
use stablehlo::{Builder, CompareDir, DType, GatherDims, ScatterDims, TensorType, Value};

use crate::bail;
use crate::error::Result;

/// The layout of a view, as far as the cache key is concerned (the offset's
/// value is not part of it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ViewSpec {
    pub dtype: DType,
    pub sizes: Vec<i64>,
    pub strides: Vec<i64>,
}

impl ViewSpec {
    pub fn numel(&self) -> i64 {
        self.sizes.iter().product()
    }
    pub fn is_contiguous(&self) -> bool {
        is_contiguous(&self.sizes, &self.strides)
    }
}

/// Row-major dense (size-1 dimensions may have any stride), as torch's
/// is_contiguous().
pub fn is_contiguous(sizes: &[i64], strides: &[i64]) -> bool {
    let mut expected = 1;
    for (s, st) in sizes.iter().zip(strides).rev() {
        if *s != 1 && *st != expected {
            return false;
        }
        expected *= s;
    }
    true
}

/// Reinterprets a 1-D storage buffer of `from` as a 1-D array of `to`
/// (a bit cast, as torch's untyped storages do). Bool counts as one byte.
pub fn storage_as(b: &mut Builder, buf: Value, from: DType, to: DType) -> Result<Value> {
    if from == to {
        return Ok(buf);
    }
    // Complex values have no bitcast: go through their parts, stored
    // interleaved (re, im) as torch.view_as_real shows them.
    if let Some(part) = from.complex_part() {
        let n = b.ty(buf).shape[0];
        let re = b.real(buf)?;
        let im = b.imag(buf)?;
        let re = b.reshape(re, &[n, 1])?;
        let im = b.reshape(im, &[n, 1])?;
        let pairs = b.concatenate(&[re, im], 1)?;
        let parts = b.reshape(pairs, &[2 * n])?;
        return storage_as(b, parts, part, to);
    }
    if let Some(part) = to.complex_part() {
        let parts = storage_as(b, buf, from, part)?;
        let n = b.ty(parts).shape[0];
        if n % 2 != 0 {
            bail!(Runtime, "cannot view a storage of {n} {:?} elements as {:?}", part, to);
        }
        let pairs = b.reshape(parts, &[n / 2, 2])?;
        let re = b.slice(pairs, &[0, 0], &[n / 2, 1], &[1, 1])?;
        let im = b.slice(pairs, &[0, 1], &[n / 2, 2], &[1, 1])?;
        let re = b.reshape(re, &[n / 2])?;
        let im = b.reshape(im, &[n / 2])?;
        return Ok(b.complex(re, im)?);
    }
    if from == DType::Bool {
        let bytes = b.convert(buf, DType::U8)?;
        return storage_as(b, bytes, DType::U8, to);
    }
    if to == DType::Bool {
        let bytes = storage_as(b, buf, from, DType::U8)?;
        let n = b.ty(bytes).shape.clone();
        let zero = b.splat(DType::U8, 0.0, &n)?;
        return Ok(b.compare(bytes, zero, stablehlo::CompareDir::Ne)?);
    }
    let (fw, tw) = (from.size_bytes() as i64, to.size_bytes() as i64);
    let n = b.ty(buf).shape[0];
    if fw == tw {
        Ok(b.bitcast_convert(buf, to)?)
    } else if fw > tw {
        let parts = b.bitcast_convert(buf, to)?; // [n, fw/tw]
        Ok(b.reshape(parts, &[n * (fw / tw)])?)
    } else {
        let ratio = tw / fw;
        if n % ratio != 0 {
            bail!(Runtime, "cannot view a storage of {n} {:?} elements as {:?}", from, to);
        }
        let grouped = b.reshape(buf, &[n / ratio, ratio])?;
        Ok(b.bitcast_convert(grouped, to)?)
    }
}

/// i64 flat storage indices of every element of the view, shape `sizes`.
fn flat_indices(b: &mut Builder, view: &ViewSpec, offset: Option<Value>) -> Result<Value> {
    let shape = view.sizes.clone();
    let mut acc = match offset {
        Some(o) => b.broadcast_in_dim(o, &shape, &[])?,
        None => b.splat(DType::I64, 0.0, &shape)?,
    };
    for (d, st) in view.strides.iter().enumerate() {
        if view.sizes[d] == 1 || *st == 0 {
            continue;
        }
        let iota = b.iota(DType::I64, &shape, d as i64)?;
        let stride = b.splat(DType::I64, *st as f64, &shape)?;
        let term = b.mul(iota, stride)?;
        acc = b.add(acc, term)?;
    }
    Ok(acc)
}

/// Gathers a (possibly overlapping) strided view element by element.
fn gather_view(b: &mut Builder, storage: Value, view: &ViewSpec, offset: Option<Value>) -> Result<Value> {
    let idx = flat_indices(b, view, offset)?;
    let mut ishape = view.sizes.clone();
    ishape.push(1);
    let idx = b.reshape(idx, &ishape)?;
    let dims = GatherDims {
        offset_dims: vec![],
        collapsed_slice_dims: vec![0],
        operand_batching_dims: vec![],
        start_indices_batching_dims: vec![],
        start_index_map: vec![0],
        index_vector_dim: view.sizes.len() as i64,
    };
    Ok(b.gather(storage, idx, &dims, &[1], false)?)
}

/// A dense block in permuted order: dims sorted by stride form a row-major
/// block (stride-0 and size-1 dims aside). Returns (order, block sizes).
fn permuted_block(view: &ViewSpec) -> Option<Vec<usize>> {
    let mut dims: Vec<usize> =
        (0..view.sizes.len()).filter(|&d| view.sizes[d] != 1 && view.strides[d] != 0).collect();
    dims.sort_by(|&a, &b| view.strides[b].cmp(&view.strides[a]));
    let mut expected = 1;
    for &d in dims.iter().rev() {
        if view.strides[d] != expected {
            return None;
        }
        expected *= view.sizes[d];
    }
    Some(dims)
}

/// A strided view that is a box (with steps) inside the storage laid out as
/// a row-major array: slices such as `x[:, 1:3]`, `x[..., ::2]`,
/// `x[..., half:]`. Such views are read with one dynamic_slice and written
/// with one dynamic_update_slice instead of an element-wise gather/scatter.
///
/// With the view's non-trivial dims sorted by stride s_0 > s_1 > ... >
/// s_{k-1} (each dividing the one before), the storage, padded to `len`
/// elements, is reshaped to `base` = [len/s_0, s_0/s_1, ..., s_{k-1}]; view
/// dim i moves along base dim i, and the offset's mixed-radix digits are
/// the start. Valid only when the box fits inside `base` for the actual
/// offset, which is why the engine keys programs on [`box_plan`] being Some.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoxPlan {
    /// View dims in stride order (size-1 and stride-0 dims left out).
    pub dims: Vec<usize>,
    pub strides: Vec<i64>,
    pub base: Vec<i64>,
    pub len: i64,
}

/// The box layout of a view over a storage of `n` elements at `offset`.
pub fn box_plan(view: &ViewSpec, n: i64, offset: i64) -> Option<BoxPlan> {
    let mut dims: Vec<usize> =
        (0..view.sizes.len()).filter(|&d| view.sizes[d] != 1 && view.strides[d] != 0).collect();
    if dims.is_empty() || view.strides.iter().any(|&s| s < 0) {
        return None;
    }
    dims.sort_by(|&a, &b| view.strides[b].cmp(&view.strides[a]));
    let strides: Vec<i64> = dims.iter().map(|&d| view.strides[d]).collect();
    for w in strides.windows(2) {
        if w[1] == w[0] || w[0] % w[1] != 0 {
            return None;
        }
    }
    let s0 = strides[0];
    let len = ((n + s0 - 1) / s0).max(1) * s0;
    let mut base = vec![len / s0];
    for w in strides.windows(2) {
        base.push(w[0] / w[1]);
    }
    base.push(*strides.last()?);
    // Digits of the offset, and the box must fit without wrapping.
    let mut rem = offset;
    for (i, &st) in strides.iter().enumerate() {
        let c = rem / st;
        rem %= st;
        if c + view.sizes[dims[i]] > base[i] {
            return None;
        }
    }
    Some(BoxPlan { dims, strides, base, len })
}

/// The box's start indices, computed in the program from the runtime offset.
fn box_starts(b: &mut Builder, plan: &BoxPlan, offset: Option<Value>) -> Result<Vec<Value>> {
    let Some(mut rem) = offset else {
        return Ok((0..plan.base.len()).map(|_| b.constant_i64(DType::I64, 0)).collect());
    };
    let mut starts = Vec::with_capacity(plan.base.len());
    for &st in &plan.strides {
        let s = b.constant_i64(DType::I64, st);
        starts.push(b.div(rem, s)?);
        rem = b.rem(rem, s)?;
    }
    starts.push(rem);
    Ok(starts)
}

fn boxed_storage(b: &mut Builder, storage: Value, plan: &BoxPlan) -> Result<Value> {
    let n = b.ty(storage).shape[0];
    let dtype = b.ty(storage).dtype;
    let padded = if plan.len > n {
        let zero = b.constant_f64(dtype, 0.0);
        b.pad(storage, zero, &[0], &[plan.len - n], &[0])?
    } else {
        storage
    };
    Ok(b.reshape(padded, &plan.base)?)
}

fn read_box(b: &mut Builder, storage: Value, view: &ViewSpec, plan: &BoxPlan, offset: Option<Value>) -> Result<Value> {
    let boxed = boxed_storage(b, storage, plan)?;
    let starts = box_starts(b, plan, offset)?;
    let mut sizes: Vec<i64> = plan.dims.iter().map(|&d| view.sizes[d]).collect();
    sizes.push(1);
    let block = b.dynamic_slice(boxed, &starts, &sizes)?;
    sizes.pop();
    let dense = b.reshape(block, &sizes)?;
    // dense dim k is view dim dims[k]: transpose into increasing view order,
    // then broadcast over the size-1 and stride-0 dims.
    let mut sorted: Vec<(usize, usize)> = plan.dims.iter().enumerate().map(|(k, &d)| (d, k)).collect();
    sorted.sort();
    let perm: Vec<i64> = sorted.iter().map(|&(_, k)| k as i64).collect();
    let transposed = b.transpose(dense, &perm)?;
    let target: Vec<i64> = sorted.iter().map(|&(d, _)| d as i64).collect();
    Ok(b.broadcast_in_dim(transposed, &view.sizes, &target)?)
}

fn write_box(
    b: &mut Builder,
    storage: Value,
    view: &ViewSpec,
    plan: &BoxPlan,
    offset: Option<Value>,
    value: Value,
) -> Result<Value> {
    let n = b.ty(storage).shape[0];
    let boxed = boxed_storage(b, storage, plan)?;
    let starts = box_starts(b, plan, offset)?;
    // Drop the size-1 dims, order the rest by stride, add the unit last dim.
    let kept: Vec<i64> = (0..view.sizes.len()).filter(|&d| view.sizes[d] != 1).map(|d| view.sizes[d]).collect();
    let squeezed = b.reshape(value, &kept)?;
    let kept_dims: Vec<usize> = (0..view.sizes.len()).filter(|&d| view.sizes[d] != 1).collect();
    let perm: Vec<i64> = plan
        .dims
        .iter()
        .map(|d| kept_dims.iter().position(|k| k == d).unwrap_or(0) as i64)
        .collect();
    let ordered = b.transpose(squeezed, &perm)?;
    let mut sizes: Vec<i64> = plan.dims.iter().map(|&d| view.sizes[d]).collect();
    sizes.push(1);
    let update = b.reshape(ordered, &sizes)?;
    let updated = b.dynamic_update_slice(boxed, update, &starts)?;
    let flat = b.reshape(updated, &[plan.len])?;
    if plan.len > n {
        return Ok(b.slice(flat, &[0], &[n], &[1])?);
    }
    Ok(flat)
}

/// Reads the view (`view.dtype`, sizes, strides, offset) out of a 1-D storage
/// buffer that already has the view's dtype (see [`storage_as`]). `plan` is
/// the view's [`box_plan`], if any.
pub fn read_view(
    b: &mut Builder,
    storage: Value,
    view: &ViewSpec,
    offset: Option<Value>,
    plan: Option<&BoxPlan>,
) -> Result<Value> {
    let n = b.ty(storage).shape[0];
    let numel = view.numel();
    if numel == 0 {
        return Ok(b.splat(view.dtype, 0.0, &view.sizes)?);
    }
    if view.is_contiguous() {
        if offset.is_none() && numel == n {
            return Ok(b.reshape(storage, &view.sizes)?);
        }
        let start = match offset {
            Some(o) => o,
            None => b.constant_i64(DType::I64, 0),
        };
        let flat = b.dynamic_slice(storage, &[start], &[numel])?;
        return Ok(b.reshape(flat, &view.sizes)?);
    }
    if let Some(order) = permuted_block(view) {
        // Slice the block, lay it out in stride order, then transpose and
        // broadcast back to the view's dimension order.
        let block: Vec<i64> = order.iter().map(|&d| view.sizes[d]).collect();
        let span: i64 = block.iter().product();
        let flat = match offset {
            // No offset and the block is the whole storage: no slice at all.
            None if span == n => storage,
            Some(o) => b.dynamic_slice(storage, &[o], &[span])?,
            None => {
                let zero = b.constant_i64(DType::I64, 0);
                b.dynamic_slice(storage, &[zero], &[span])?
            }
        };
        let dense = b.reshape(flat, &block)?;
        // dense dim k holds view dim order[k]; broadcast_in_dim maps it there.
        let mut sorted: Vec<(usize, usize)> = order.iter().enumerate().map(|(k, &d)| (d, k)).collect();
        sorted.sort();
        let perm: Vec<i64> = sorted.iter().map(|&(_, k)| k as i64).collect();
        let transposed = b.transpose(dense, &perm)?;
        let target_dims: Vec<i64> = sorted.iter().map(|&(d, _)| d as i64).collect();
        return Ok(b.broadcast_in_dim(transposed, &view.sizes, &target_dims)?);
    }
    if let Some(plan) = plan {
        return read_box(b, storage, view, plan, offset);
    }
    gather_view(b, storage, view, offset)
}

/// Writes `value` (the view's dtype and sizes) into the view of a 1-D storage
/// of the view's dtype; returns the new storage.
pub fn write_view(
    b: &mut Builder,
    storage: Value,
    view: &ViewSpec,
    offset: Option<Value>,
    value: Value,
    plan: Option<&BoxPlan>,
) -> Result<Value> {
    let n = b.ty(storage).shape[0];
    let numel = view.numel();
    if numel == 0 {
        return Ok(storage);
    }
    if view.is_contiguous() {
        let flat = b.reshape(value, &[numel])?;
        if offset.is_none() && numel == n {
            return Ok(flat);
        }
        let start = match offset {
            Some(o) => o,
            None => b.constant_i64(DType::I64, 0),
        };
        return Ok(b.dynamic_update_slice(storage, flat, &[start])?);
    }
    if let Some(plan) = plan {
        if !view.strides.contains(&0) {
            return write_box(b, storage, view, plan, offset, value);
        }
    }
    let (view, value) = collapse_broadcast_dims(b, storage, view, offset, plan, value)?;
    let view = &view;
    let idx = flat_indices(b, view, offset)?;
    let mut ishape = view.sizes.clone();
    ishape.push(1);
    let idx = b.reshape(idx, &ishape)?;
    let dims = ScatterDims {
        update_window_dims: vec![],
        inserted_window_dims: vec![0],
        input_batching_dims: vec![],
        scatter_indices_batching_dims: vec![],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: view.sizes.len() as i64,
    };
    Ok(b.scatter(storage, idx, value, &dims, |_rb, _lhs, rhs| Ok(vec![rhs[0]]))?)
}

/// A write through a broadcast view (stride 0 along a dim: `x.expand(2, 3)`)
/// lands each storage element several times. The element takes a value
/// that was written to it rather than the old value copied from another
/// row: along each such dim, the last position whose value changed wins,
/// and the dim collapses to size 1. (A plain scatter let the last row win,
/// changed or not, so `expanded.index_put_(...)` lost its writes.) It is
/// not the CPU's rule in every case: the CPU takes the last write in the
/// op's own order, and a write of the old value is invisible here; PyTorch
/// deprecates these writes and refuses most of them.
fn collapse_broadcast_dims(
    b: &mut Builder,
    storage: Value,
    view: &ViewSpec,
    offset: Option<Value>,
    plan: Option<&BoxPlan>,
    value: Value,
) -> Result<(ViewSpec, Value)> {
    let mut view = view.clone();
    let mut value = value;
    let dims: Vec<usize> = (0..view.sizes.len()).filter(|&d| view.strides[d] == 0 && view.sizes[d] > 1).collect();
    if dims.is_empty() {
        return Ok((view, value));
    }
    let old = read_view(b, storage, &view, offset, plan)?;
    let changed = b.compare(value, old, CompareDir::Ne)?;
    // NaN written over NaN is no change.
    let changed = if view.dtype.is_float() || view.dtype.is_complex() {
        let nv = b.compare(value, value, CompareDir::Ne)?;
        let no = b.compare(old, old, CompareDir::Ne)?;
        let both = b.and(nv, no)?;
        let keep = b.not(both)?;
        b.and(changed, keep)?
    } else {
        changed
    };
    let mut changed = changed;
    for &d in &dims {
        let shape = view.sizes.clone();
        let pos = b.iota(DType::I64, &shape, d as i64)?;
        let none = b.splat(DType::I64, -1.0, &shape)?;
        let key = b.select(changed, pos, none)?;
        let inits = [b.constant_i64(DType::I64, -2), b.constant_f64(view.dtype, 0.0)];
        let flag_init = b.constant_i64(DType::Bool, 0);
        let out = b.reduce(&[key, value, changed], &[inits[0], inits[1], flag_init], &[d as i64], |r, x, y| {
            let take_x = r.compare(x[0], y[0], CompareDir::Ge)?;
            Ok(vec![r.select(take_x, x[0], y[0])?, r.select(take_x, x[1], y[1])?, r.or(x[2], y[2])?])
        })?;
        view.sizes[d] = 1;
        value = b.reshape(out[1], &view.sizes)?;
        changed = b.reshape(out[2], &view.sizes)?;
    }
    Ok((view, value))
}

/// The type of a storage buffer holding `n` elements of `dtype`.
pub fn storage_type(dtype: DType, n: i64) -> TensorType {
    TensorType::new(dtype, [n])
}
