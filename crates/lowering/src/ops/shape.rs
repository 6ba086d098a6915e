//! Ops that move data between positions: cat, flip, roll, tril/triu,
//! constant_pad_nd.
//!
//! Views (view, reshape, transpose, expand, slicing, ...) never get here:
//! PyTorch and the C++ glue handle them as metadata, and the engine reads any
//! strided view. stack/hstack/repeat/tile/narrow_copy/diag/pad decompose into
//! views plus `cat`/`copy_` before reaching the device.
use stablehlo::{CompareDir, DType, Value};

use crate::args::{norm_dim, Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::promote::promote_types;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("cat", cat),
    op!("concat", cat),
    op!("concatenate", cat),
    op!("flip", flip),
    op!("roll", roll),
    op!("tril", tril),
    op!("triu", triu),
    op!("constant_pad_nd", constant_pad_nd),
];

/// cat(tensors, dim=0): promotes to a common dtype; 1-D empty tensors are
/// skipped (PyTorch's legacy rule), all others must agree off `dim`.
fn cat(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let ts = args.tensors(0)?;
    let dim = args.int_or(1, 0)?;
    if ts.is_empty() {
        bail!(
            Runtime,
            "{}: torch.cat(): expected a non-empty list of Tensors",
            lx.op
        );
    }
    let mut dtype = ts[0].dtype;
    for (i, t) in ts.iter().enumerate() {
        if t.shape.is_empty() {
            bail!(
                Runtime,
                "{}: zero-dimensional tensor (at position {i}) cannot be concatenated",
                lx.op
            );
        }
        dtype = promote_types(dtype, t.dtype);
    }
    let skipped = |t: &TensorArg| t.shape == [0];
    let kept: Vec<(usize, &TensorArg)> =
        ts.iter().enumerate().filter(|(_, t)| !skipped(t)).collect();
    let Some(&(first_i, first)) = kept.first() else {
        return Ok(vec![lx.full(dtype, 0.0, &[0])?]);
    };
    let rank = first.shape.len();
    let d = norm_dim(lx.op, dim, rank)?;
    let mut values = Vec::with_capacity(kept.len());
    for &(i, t) in &kept {
        if t.shape.len() != rank {
            bail!(
                Runtime,
                "{}: Tensors must have same number of dimensions: got {} and {}",
                lx.op,
                rank,
                t.shape.len()
            );
        }
        for k in 0..rank {
            if k != d && t.shape[k] != first.shape[k] {
                bail!(
                    Runtime,
                    "{}: Sizes of tensors must match except in dimension {d}. Expected size {} but got size {} for tensor number {i} in the list (tensor number {first_i} has shape {:?}).",
                    lx.op,
                    first.shape[k],
                    t.shape[k],
                    first.shape
                );
            }
        }
        if t.shape[d] == 0 {
            continue;
        }
        values.push(lx.cast(t.value, dtype)?);
    }
    if values.is_empty() {
        let mut shape = first.shape.clone();
        shape[d] = 0;
        return Ok(vec![lx.full(dtype, 0.0, &shape)?]);
    }
    if values.len() == 1 {
        return Ok(values);
    }
    Ok(vec![lx.b.concatenate(&values, d as i64)?])
}

/// Normalized, duplicate-free dims.
fn dims_list(lx: &Lower, dims: &[i64], rank: usize) -> Result<Vec<i64>> {
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        let n = norm_dim(lx.op, d, rank)? as i64;
        if out.contains(&n) {
            bail!(
                Runtime,
                "{}: dim {n} appears multiple times in the list of dims",
                lx.op
            );
        }
        out.push(n);
    }
    Ok(out)
}

/// flip(self, dims)
fn flip(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let dims = dims_list(lx, &args.ints(1)?, t.shape.len())?;
    if t.shape.is_empty() || dims.is_empty() {
        return Ok(vec![t.value]);
    }
    Ok(vec![lx.b.reverse(t.value, &dims)?])
}

/// Rolls `v` by `shift` along `dim`: out[i] = in[(i - shift) mod n].
fn roll_dim(lx: &mut Lower, v: Value, shift: i64, dim: usize) -> Result<Value> {
    let shape = lx.shape(v);
    let n = shape[dim];
    if n == 0 {
        return Ok(v);
    }
    let s = shift.rem_euclid(n);
    if s == 0 {
        return Ok(v);
    }
    let zeros = vec![0; shape.len()];
    let mut start = zeros.clone();
    start[dim] = n - s;
    let tail = lx.b.slice(v, &start, &shape, &[])?;
    let mut limit = shape.clone();
    limit[dim] = n - s;
    let head = lx.b.slice(v, &zeros, &limit, &[])?;
    Ok(lx.b.concatenate(&[tail, head], dim as i64)?)
}

/// roll(self, shifts, dims=[]): with no dims, rolls the flattened tensor.
fn roll(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let shifts = args.ints(1)?;
    let dims = args.opt_ints(2)?.unwrap_or_default();
    if dims.is_empty() {
        if shifts.len() != 1 {
            bail!(
                Runtime,
                "{}: shifts and dimensions must align. shifts: {}, dims:0",
                lx.op,
                shifts.len()
            );
        }
        let n: i64 = t.shape.iter().product();
        let flat = lx.b.reshape(t.value, &[n])?;
        let r = roll_dim(lx, flat, shifts[0], 0)?;
        return Ok(vec![lx.b.reshape(r, &t.shape)?]);
    }
    if shifts.len() != dims.len() {
        bail!(
            Runtime,
            "{}: shifts and dimensions must align. shifts: {}, dims:{}",
            lx.op,
            shifts.len(),
            dims.len()
        );
    }
    let mut v = t.value;
    for (&s, &d) in shifts.iter().zip(&dims) {
        let d = norm_dim(lx.op, d, t.shape.len())?;
        v = roll_dim(lx, v, s, d)?;
    }
    Ok(vec![v])
}

/// Keeps the elements on one side of the `diagonal`-th diagonal of the last
/// two dims, zeroing the rest.
fn triangle(lx: &mut Lower, args: &Args, lower: bool) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let k = args.int_or(1, 0)?;
    let r = t.shape.len();
    if r < 2 {
        bail!(
            Runtime,
            "{}: {}: input tensor must have at least 2 dimensions",
            lx.op,
            if lower { "tril" } else { "triu" }
        );
    }
    let shape = t.shape.clone();
    let rows = lx.b.iota(DType::I64, &shape, (r - 2) as i64)?;
    let cols = lx.b.iota(DType::I64, &shape, (r - 1) as i64)?;
    let diff = lx.b.sub(cols, rows)?;
    let kv = lx.b.splat_i64(DType::I64, k, &shape)?;
    let keep = lx.b.compare(
        diff,
        kv,
        if lower {
            CompareDir::Le
        } else {
            CompareDir::Ge
        },
    )?;
    let zero = lx.full(t.dtype, 0.0, &shape)?;
    Ok(vec![lx.b.select(keep, t.value, zero)?])
}

fn tril(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    triangle(lx, args, true)
}

fn triu(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    triangle(lx, args, false)
}

/// constant_pad_nd(self, pad, value=0): pad pairs (lo, hi) from the last
/// dim backwards; negative pads crop.
fn constant_pad_nd(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let pad = args.ints(1)?;
    let r = t.shape.len();
    if pad.len() % 2 != 0 || pad.len() / 2 > r {
        bail!(
            Runtime,
            "{}: Length of pad must be even but instead it equals {} (and at most twice the input's {} dims)",
            lx.op,
            pad.len(),
            r
        );
    }
    let (mut lo, mut hi) = (vec![0; r], vec![0; r]);
    for (i, pair) in pad.chunks(2).enumerate() {
        let d = r - 1 - i;
        lo[d] = pair[0];
        hi[d] = pair[1];
        if t.shape[d] + pair[0] + pair[1] < 0 {
            bail!(
                Runtime,
                "{}: The input size {}, plus negative padding {} and {} resulted in a negative output size, which is invalid. Check dimension {d} of your input.",
                lx.op,
                t.shape[d],
                pair[0],
                pair[1]
            );
        }
    }
    let fill = match args.opt_scalar(2) {
        Some(s) => lx.cast(s.value, t.dtype)?,
        None => lx.b.constant_f64(t.dtype, 0.0),
    };
    let interior = vec![0; r];
    Ok(vec![lx.b.pad(t.value, fill, &lo, &hi, &interior)?])
}
