//! Reading a strided tensor view out of a storage buffer, and writing a value
//! back into one.
//!
//! Invariants: a storage buffer is always 1-D (`[n]` of the dtype it was last
//! written with); sizes, strides and offsets are in elements of the view's
//! dtype. A view's offset is a runtime i64 value, so slices at different
//! positions share one executable.
use stablehlo::{Builder, DType, GatherDims, ScatterDims, TensorType, Value};

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

/// Reads the view (`view.dtype`, sizes, strides, offset) out of a 1-D storage
/// buffer that already has the view's dtype (see [`storage_as`]).
pub fn read_view(b: &mut Builder, storage: Value, view: &ViewSpec, offset: Option<Value>) -> Result<Value> {
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
        let start = match offset {
            Some(o) => o,
            None => b.constant_i64(DType::I64, 0),
        };
        let flat = b.dynamic_slice(storage, &[start], &[span])?;
        let dense = b.reshape(flat, &block)?;
        // dense dim k holds view dim order[k]; broadcast_in_dim maps it there.
        let mut sorted: Vec<(usize, usize)> = order.iter().enumerate().map(|(k, &d)| (d, k)).collect();
        sorted.sort();
        let perm: Vec<i64> = sorted.iter().map(|&(_, k)| k as i64).collect();
        let transposed = b.transpose(dense, &perm)?;
        let target_dims: Vec<i64> = sorted.iter().map(|&(d, _)| d as i64).collect();
        return Ok(b.broadcast_in_dim(transposed, &view.sizes, &target_dims)?);
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

/// The type of a storage buffer holding `n` elements of `dtype`.
pub fn storage_type(dtype: DType, n: i64) -> TensorType {
    TensorType::new(dtype, [n])
}
