//! Ops whose output shape depends on the data: nonzero, masked_select,
//! repeat_interleave with tensor repeats.
//!
//! Each has a `size` lowering (how many elements are selected) that the
//! engine runs and reads back first — a host sync, as on CUDA — and a main
//! lowering that receives that count as `Lower::dynamic_size`.
use stablehlo::{CompareDir, DType, ScatterDims, Value};

use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("nonzero", nonzero, size = nonzero_count),
    op!("masked_select", masked_select, size = masked_count),
    op!("repeat_interleave.Tensor", repeat_interleave, size = repeat_total),
];

/// Flat i1 mask of `v` (nonzero elements are true).
pub(crate) fn flat_mask(lx: &mut Lower, v: Value) -> Result<Value> {
    let n = lx.shape(v).iter().product::<i64>();
    let flat = lx.b.reshape(v, &[n])?;
    lx.cast(flat, DType::Bool)
}

pub(crate) fn count(lx: &mut Lower, mask: Value) -> Result<Value> {
    let ones = lx.cast(mask, DType::I64)?;
    Ok(lx.b.reduce_sum(ones, &[0])?)
}

/// Inclusive prefix sum of a 1-D i64 array in log2(n) shifted adds.
pub(crate) fn prefix_sum(lx: &mut Lower, x: Value) -> Result<Value> {
    let n = lx.shape(x)[0];
    let mut acc = x;
    let mut shift = 1;
    while shift < n {
        let zero = lx.b.constant_i64(DType::I64, 0);
        let shifted = lx.b.pad(acc, zero, &[shift], &[0], &[0])?;
        let shifted = lx.b.slice(shifted, &[0], &[n], &[1])?;
        acc = lx.b.add(acc, shifted)?;
        shift *= 2;
    }
    Ok(acc)
}

/// The flat positions of the true elements of `mask` (1-D i1 of n), in
/// order, as a 1-D i64 array of `count` entries.
pub(crate) fn true_positions(lx: &mut Lower, mask: Value, count: i64) -> Result<Value> {
    let n = lx.shape(mask)[0];
    let as_int = lx.cast(mask, DType::I64)?;
    let rank = prefix_sum(lx, as_int)?;
    let one = lx.full(DType::I64, 1.0, &[n])?;
    let slot = lx.b.sub(rank, one)?;
    // Unselected elements go to slot `count`, past the end: scatter drops them.
    let past = lx.full(DType::I64, count as f64, &[n])?;
    let slot = lx.b.select(mask, slot, past)?;
    let slot = lx.b.reshape(slot, &[n, 1])?;
    let positions = lx.b.iota(DType::I64, &[n], 0)?;
    let init = lx.full(DType::I64, 0.0, &[count])?;
    let dims = ScatterDims::points_1d();
    Ok(lx.b.scatter(init, slot, positions, &dims, |_b, _cur, upd| Ok(vec![upd[0]]))?)
}

fn nonzero_count(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let mask = flat_mask(lx, t.value)?;
    Ok(vec![count(lx, mask)?])
}

/// Row-major flat positions (1-D i64 of `count`) as one coordinate array
/// (1-D i64 of `count`) per dim of `shape`.
pub(crate) fn unravel(lx: &mut Lower, flat: Value, shape: &[i64], count: i64) -> Result<Vec<Value>> {
    let mut coords = Vec::with_capacity(shape.len());
    let mut stride: i64 = shape.iter().product();
    for &size in shape {
        stride /= size.max(1);
        let s = lx.full(DType::I64, stride as f64, &[count])?;
        let n = lx.full(DType::I64, size as f64, &[count])?;
        let q = lx.b.div(flat, s)?;
        coords.push(lx.b.rem(q, n)?);
    }
    Ok(coords)
}

/// nonzero(self) -> [count, ndim] int64 coordinates, row-major order.
fn nonzero(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let Some(count) = lx.dynamic_size else { bail!(Runtime, "{}: size not computed (internal error)", lx.op) };
    let mask = flat_mask(lx, t.value)?;
    let flat = true_positions(lx, mask, count)?;
    let mut columns = Vec::with_capacity(t.shape.len());
    for coord in unravel(lx, flat, &t.shape, count)? {
        columns.push(lx.b.reshape(coord, &[count, 1])?);
    }
    if columns.is_empty() {
        return Ok(vec![lx.full(DType::I64, 0.0, &[count, 0])?]);
    }
    Ok(vec![lx.b.concatenate(&columns, 1)?])
}

fn broadcast_pair(lx: &mut Lower, args: &Args) -> Result<(Value, Value)> {
    let x = args.tensor(0)?.clone();
    let m = args.tensor(1)?.clone();
    if m.dtype != DType::Bool && m.dtype != DType::U8 {
        bail!(Runtime, "{}: masked_select: expected BoolTensor for mask", lx.op);
    }
    let shape = lx.b.broadcast_shapes(&x.shape, &m.shape).map_err(|_| {
        crate::error::LowerError::new(
            crate::error::ErrorKind::Runtime,
            format!(
                "{}: The size of tensor a ({:?}) must match the size of tensor b ({:?})",
                lx.op, x.shape, m.shape
            ),
        )
    })?;
    let xv = lx.expand(x.value, &shape)?;
    let mv = lx.expand(m.value, &shape)?;
    Ok((xv, mv))
}

fn masked_count(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (_, m) = broadcast_pair(lx, args)?;
    let mask = flat_mask(lx, m)?;
    Ok(vec![count(lx, mask)?])
}

/// masked_select(self, mask) -> the selected elements, 1-D, row-major order.
fn masked_select(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let Some(count) = lx.dynamic_size else { bail!(Runtime, "{}: size not computed (internal error)", lx.op) };
    let (x, m) = broadcast_pair(lx, args)?;
    let mask = flat_mask(lx, m)?;
    let n = lx.shape(x).iter().product::<i64>();
    let flat_x = lx.b.reshape(x, &[n])?;
    let pos = true_positions(lx, mask, count)?;
    let pos = lx.b.reshape(pos, &[count, 1])?;
    let dims = stablehlo::GatherDims::points_1d();
    let _ = CompareDir::Ne;
    Ok(vec![lx.b.gather(flat_x, pos, &dims, &[1], true)?])
}

fn repeats_arg(lx: &mut Lower, args: &Args) -> Result<Value> {
    let r = args.tensor(0)?.clone();
    if r.shape.len() != 1 || !matches!(r.dtype, DType::I32 | DType::I64) {
        bail!(
            Runtime,
            "{}: repeat_interleave: repeats must be a 1-D tensor of int32 or int64, got shape {:?} and {:?}",
            lx.op,
            r.shape,
            r.dtype
        );
    }
    lx.cast(r.value, DType::I64)
}

fn repeat_total(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let r = repeats_arg(lx, args)?;
    Ok(vec![lx.b.reduce_sum(r, &[0])?])
}

/// repeat_interleave.Tensor(repeats, *, output_size=None) -> [sum(repeats)]:
/// i repeated repeats[i] times. Output j holds the number of bags that end
/// at or before j (the inclusive prefix sums of repeats).
fn repeat_interleave(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let Some(total) = lx.dynamic_size else { bail!(Runtime, "{}: size not computed (internal error)", lx.op) };
    if total < 0 {
        bail!(Runtime, "{}: repeats can not be negative", lx.op);
    }
    let r = repeats_arg(lx, args)?;
    let n = lx.shape(r)[0];
    let zero = lx.full(DType::I64, 0.0, &[n])?;
    let negative = lx.b.compare(r, zero, CompareDir::Lt)?;
    let negative = crate::ops::indexing::any(lx, negative)?;
    lx.check_runtime(negative, format!("{}: repeats can not be negative", lx.op));
    if let Some(wanted) = args.opt_int(1)? {
        if wanted != total {
            bail!(
                Runtime,
                "{}: allocated size does not match required size (output_size={wanted}, sum of repeats={total})",
                lx.op
            );
        }
    }
    // ends_at[e] counts the bags ending at e (at most `total`, so one extra
    // slot); its prefix sum is the output. O(total) memory, not total × n.
    let ends = prefix_sum(lx, r)?;
    let ends = lx.b.reshape(ends, &[n, 1])?;
    let ones = lx.full(DType::I64, 1.0, &[n])?;
    let init = lx.full(DType::I64, 0.0, &[total + 1])?;
    let dims = ScatterDims::points_1d();
    let ends_at = lx.b.scatter(init, ends, ones, &dims, |b, cur, upd| Ok(vec![b.add(cur[0], upd[0])?]))?;
    let done = prefix_sum(lx, ends_at)?;
    let index = lx.b.slice(done, &[0], &[total], &[1])?;
    // The indices have the repeats' integer type.
    let dtype = args.tensor(0)?.dtype;
    Ok(vec![lx.cast(index, dtype)?])
}
