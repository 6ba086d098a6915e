//! gather, scatter (src/value, add/multiply), scatter_add, scatter_reduce
//! (sum/prod/mean/amax/amin, include_self), index_add and index_copy.
//!
//! gather/scatter address single elements: each index element becomes a full
//! coordinate vector (the index along `dim`, its own position elsewhere).
//! index_add/index_copy move whole slices along `dim`. Negative indices are
//! out of range here, as on the CPU.
use stablehlo::{CompareDir, DType, GatherDims, ScatterDims, Value};

use super::{as_index, checked, shapes, OutOfRange};
use crate::args::{norm_dim, Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

/// Full coordinates for gather/scatter along `d`: [..index shape, rank],
/// the index itself in component d and the position in the others.
fn coords(lx: &mut Lower, idx: Value, d: usize, rank: usize) -> Result<Value> {
    let shape = lx.shape(idx);
    let mut with1 = shape.clone();
    with1.push(1);
    let mut parts = Vec::with_capacity(rank);
    for k in 0..rank {
        let c = if k == d {
            idx
        } else {
            lx.b.iota(DType::I64, &shape, k as i64)?
        };
        parts.push(lx.b.reshape(c, &with1)?);
    }
    if parts.len() == 1 {
        return Ok(parts[0]);
    }
    Ok(lx.b.concatenate(&parts, rank as i64)?)
}

fn point_gather_dims(rank: usize) -> GatherDims {
    GatherDims {
        collapsed_slice_dims: (0..rank as i64).collect(),
        start_index_map: (0..rank as i64).collect(),
        index_vector_dim: rank as i64,
        ..Default::default()
    }
}

fn point_scatter_dims(rank: usize) -> ScatterDims {
    ScatterDims {
        inserted_window_dims: (0..rank as i64).collect(),
        scatter_dims_to_operand_dims: (0..rank as i64).collect(),
        index_vector_dim: rank as i64,
        ..Default::default()
    }
}

/// Checks gather/scatter index rank and sizes; returns the normalized dim.
/// `src` (scatter) must be at least as large as index in every dim.
fn check_index_shape(
    lx: &Lower,
    t: &TensorArg,
    dim: i64,
    index: &TensorArg,
    src: Option<&TensorArg>,
) -> Result<usize> {
    let r = t.shape.len().max(1);
    let ir = index.shape.len().max(1);
    if ir != r && !index.shape.is_empty() {
        bail!(
            Runtime,
            "{}: Index tensor must have the same number of dimensions as input tensor",
            lx.op
        );
    }
    let d = norm_dim(lx.op, dim, t.shape.len())?;
    if !index.shape.is_empty() && !t.shape.is_empty() {
        for k in 0..r {
            if k != d && index.shape[k] > t.shape[k] {
                bail!(
                    Runtime,
                    "{}: Size does not match at dimension {k} expected index {:?} to be no larger than self {:?} apart from dimension {d}",
                    lx.op,
                    index.shape,
                    t.shape
                );
            }
        }
    }
    if let Some(s) = src {
        if !index.shape.is_empty()
            && (s.shape.len().max(1) != ir
                || (0..s.shape.len()).any(|k| index.shape[k] > s.shape[k]))
        {
            bail!(
                Runtime,
                "{}: Expected index {:?} to be no larger than src {:?} in every dimension",
                lx.op,
                index.shape,
                s.shape
            );
        }
    }
    Ok(d)
}

/// A value of rank >= 1 (0-dim tensors become [1]).
fn at_least_1d(lx: &mut Lower, v: Value) -> Result<Value> {
    if lx.shape(v).is_empty() {
        return Ok(lx.b.reshape(v, &[1])?);
    }
    Ok(v)
}

/// gather(self, dim, index, *, sparse_grad=False)
pub(super) fn gather(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let index = args.tensor(2)?;
    let d = check_index_shape(lx, t, args.int(1)?, index, None)?;
    let n: i64 = index.shape.iter().product();
    if n == 0 {
        return Ok(vec![lx.full(t.dtype, 0.0, &index.shape)?]);
    }
    let size = if t.shape.is_empty() { 1 } else { t.shape[d] };
    if t.shape.iter().product::<i64>() == 0 {
        bail!(
            Runtime,
            "{}: index is out of bounds for dimension {d} with size 0",
            lx.op
        );
    }
    let v = at_least_1d(lx, t.value)?;
    let idx = as_index(lx, index)?;
    let idx = at_least_1d(lx, idx)?;
    let idx = checked(lx, idx, size, d, false, &shapes(t, index), OutOfRange::RuntimeError)?;
    let r = lx.shape(v).len();
    let c = coords(lx, idx, d, r)?;
    let out =
        lx.b.gather(v, c, &point_gather_dims(r), &vec![1; r], false)?;
    Ok(vec![lx.b.reshape(out, &index.shape)?])
}

#[derive(Copy, Clone, PartialEq, Eq)]
enum Combine {
    Assign,
    Add,
    Mul,
    Max,
    Min,
}

/// Scatters `updates` (index's shape, self's dtype) into `base` at the
/// positions `index` gives along `d`, combining with `how`.
fn scatter_core(
    lx: &mut Lower,
    t: &TensorArg,
    base: Value,
    d: usize,
    index: &TensorArg,
    updates: Value,
    how: Combine,
) -> Result<Value> {
    let n: i64 = index.shape.iter().product();
    if n == 0 {
        return Ok(base);
    }
    let size = if t.shape.is_empty() { 1 } else { t.shape[d] };
    let v = at_least_1d(lx, base)?;
    let idx = as_index(lx, index)?;
    let idx = at_least_1d(lx, idx)?;
    let idx = checked(lx, idx, size, d, false, &shapes(t, index), OutOfRange::RuntimeError)?;
    let r = lx.shape(v).len();
    let c = coords(lx, idx, d, r)?;
    let u = at_least_1d(lx, updates)?;
    let out =
        lx.b.scatter(v, c, u, &point_scatter_dims(r), move |rb, cur, upd| {
            Ok(vec![match how {
                Combine::Assign => upd[0],
                Combine::Add => rb.add(cur[0], upd[0])?,
                Combine::Mul => rb.mul(cur[0], upd[0])?,
                Combine::Max => rb.max(cur[0], upd[0])?,
                Combine::Min => rb.min(cur[0], upd[0])?,
            }])
        })?;
    Ok(lx.b.reshape(out, &t.shape)?)
}

/// The scatter source cut to the index's shape (or a number broadcast to
/// it), in self's dtype.
fn updates_for(
    lx: &mut Lower,
    args: &Args,
    i: usize,
    t: &TensorArg,
    index: &TensorArg,
) -> Result<Value> {
    match args.opt_tensor(i) {
        Some(src) => {
            if src.dtype != t.dtype {
                bail!(
                    Runtime,
                    "{}: Expected self.dtype to be equal to src.dtype (got {} and {})",
                    lx.op,
                    crate::dtypes::name(t.dtype),
                    crate::dtypes::name(src.dtype)
                );
            }
            if src.shape == index.shape {
                return Ok(src.value);
            }
            let zeros = vec![0; src.shape.len()];
            let s = lx.b.slice(src.value, &zeros, &index.shape, &[])?;
            Ok(s)
        }
        None => {
            let s = args.operand(i)?;
            let v = crate::ops::elementwise::checked_fill_value(lx, &s, t.dtype)?;
            Ok(lx.b.broadcast_in_dim(v, &index.shape, &[])?)
        }
    }
}

/// scatter.src / .value / .reduce / .value_reduce (reduce: "add" | "multiply").
pub(super) fn scatter(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let index = args.tensor(2)?;
    let d = check_index_shape(lx, t, args.int(1)?, index, args.opt_tensor(3))?;
    let how = match args.opt_str(4) {
        None => Combine::Assign,
        Some("add") | Some("sum") => Combine::Add,
        Some("multiply") | Some("prod") => Combine::Mul,
        Some(other) => bail!(
            Runtime,
            "{}: reduce argument must be either add or multiply, got {other}",
            lx.op
        ),
    };
    let u = updates_for(lx, args, 3, t, index)?;
    Ok(vec![scatter_core(lx, t, t.value, d, index, u, how)?])
}

/// scatter_add(self, dim, index, src)
pub(super) fn scatter_add(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let index = args.tensor(2)?;
    let d = check_index_shape(lx, t, args.int(1)?, index, args.opt_tensor(3))?;
    let u = updates_for(lx, args, 3, t, index)?;
    Ok(vec![scatter_core(
        lx,
        t,
        t.value,
        d,
        index,
        u,
        Combine::Add,
    )?])
}

/// scatter_reduce.two(self, dim, index, src, reduce, *, include_self=True):
/// sum, prod, mean, amax, amin.
pub(super) fn scatter_reduce(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let index = args.tensor(2)?;
    let d = check_index_shape(lx, t, args.int(1)?, index, args.opt_tensor(3))?;
    let reduce = args.opt_str(4).unwrap_or("sum").to_string();
    let include_self = args.bool_or(5, true)?;
    let u = updates_for(lx, args, 3, t, index)?;
    let (how, identity) = match reduce.as_str() {
        "sum" | "mean" => (Combine::Add, 0.0),
        "prod" => (Combine::Mul, 1.0),
        "amax" => (Combine::Max, f64::NEG_INFINITY),
        "amin" => (Combine::Min, f64::INFINITY),
        other => bail!(
            Runtime,
            "{}: reduce argument must be either sum, prod, mean, amax or amin, got {other}",
            lx.op
        ),
    };
    // Positions some update lands on.
    let ones = lx.full(DType::F32, 1.0, &index.shape)?;
    let fake = TensorArg {
        value: t.value,
        dtype: DType::F32,
        shape: t.shape.clone(),
        wrapped_number: false,
        contiguous: true,
    };
    let zeros = lx.full(DType::F32, 0.0, &t.shape)?;
    let counts = scatter_core(lx, &fake, zeros, d, index, ones, Combine::Add)?;
    let mut base = t.value;
    if !include_self {
        let z = lx.full(DType::F32, 0.0, &t.shape)?;
        let hit = lx.b.compare(counts, z, CompareDir::Gt)?;
        let id = identity_of(lx, t.dtype, identity, &t.shape)?;
        base = lx.b.select(hit, id, t.value)?;
    }
    let out = scatter_core(lx, t, base, d, index, u, how)?;
    if reduce != "mean" {
        return Ok(vec![out]);
    }
    let extra = lx.full(DType::F32, if include_self { 1.0 } else { 0.0 }, &t.shape)?;
    let cnt = lx.b.add(counts, extra)?;
    let one = lx.full(DType::F32, 1.0, &t.shape)?;
    let cnt = lx.b.max(cnt, one)?;
    let cnt = lx.cast(cnt, t.dtype)?;
    let q = lx.b.div(out, cnt)?;
    if t.dtype.is_float() {
        return Ok(vec![q]);
    }
    // Integer mean rounds toward -inf (values here are sums of ints / counts).
    let r = lx.b.rem(out, cnt)?;
    let zero = lx.full_like(r, 0.0)?;
    let rneg = lx.b.compare(r, zero, CompareDir::Lt)?;
    let one = lx.full_like(q, 1.0)?;
    let qm1 = lx.b.sub(q, one)?;
    Ok(vec![lx.b.select(rneg, qm1, q)?])
}

/// The reduction identity in `dtype` (infinities clamp to the type's range).
fn identity_of(lx: &mut Lower, dtype: DType, x: f64, shape: &[i64]) -> Result<Value> {
    if dtype.is_float() || x.is_finite() {
        return lx.full(dtype, x, shape);
    }
    let v = match (dtype, x > 0.0) {
        (DType::Bool, up) => up as i64,
        (DType::U8, up) => {
            if up {
                255
            } else {
                0
            }
        }
        (DType::I8, up) => {
            if up {
                i8::MAX as i64
            } else {
                i8::MIN as i64
            }
        }
        (DType::I16, up) => {
            if up {
                i16::MAX as i64
            } else {
                i16::MIN as i64
            }
        }
        (DType::I32, up) => {
            if up {
                i32::MAX as i64
            } else {
                i32::MIN as i64
            }
        }
        (_, up) => {
            if up {
                i64::MAX
            } else {
                i64::MIN
            }
        }
    };
    Ok(lx.b.splat_i64(dtype, v, shape)?)
}

/// Scatters whole slices of `source` along `d` at `index` ([k]): index_add
/// and index_copy.
fn index_slices(lx: &mut Lower, args: &Args, add: bool) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let index = args.tensor(2)?;
    let src = args.tensor(3)?;
    let d = norm_dim(lx.op, args.int(1)?, t.shape.len())?;
    let k: i64 = index.shape.iter().product();
    if index.shape.len() > 1 {
        bail!(
            Index,
            "{}: Index should have dimension 1 or 0 (got {})",
            lx.op,
            index.shape.len()
        );
    }
    if src.dtype != t.dtype {
        bail!(
            Runtime,
            "{}: self ({}) and source ({}) must have the same scalar type",
            lx.op,
            crate::dtypes::name(t.dtype),
            crate::dtypes::name(src.dtype)
        );
    }
    let self_shape = if t.shape.is_empty() {
        vec![1]
    } else {
        t.shape.clone()
    };
    let mut want = self_shape.clone();
    want[d] = k;
    let src_shape = if src.shape.is_empty() {
        vec![1]
    } else {
        src.shape.clone()
    };
    if src_shape != want {
        bail!(
            Runtime,
            "{}: source of shape {:?} must have the shape of self {:?} with dimension {d} of size {k} (the index's length)",
            lx.op,
            src.shape,
            t.shape
        );
    }
    if k == 0 || t.shape.iter().product::<i64>() == 0 {
        return Ok(vec![t.value]);
    }
    let mut u = lx.b.reshape(src.value, &want)?;
    if add {
        if let Some(alpha) = args.opt_scalar(4) {
            let a = lx.cast(alpha.value, t.dtype)?;
            let a = lx.b.broadcast_in_dim(a, &want, &[])?;
            u = lx.b.mul(u, a)?;
        }
    }
    let base = lx.b.reshape(t.value, &self_shape)?;
    let idx = as_index(lx, index)?;
    let idx = lx.b.reshape(idx, &[k, 1])?;
    let raises = index_slices_raise(lx, args, add, d, index.dtype)?;
    let idx = checked(lx, idx, self_shape[d], d, false, &shapes(t, index), raises)?;
    let r = self_shape.len() as i64;
    let dims = ScatterDims {
        update_window_dims: (0..r).filter(|&x| x != d as i64).collect(),
        inserted_window_dims: vec![d as i64],
        scatter_dims_to_operand_dims: vec![d as i64],
        index_vector_dim: 1,
        ..Default::default()
    };
    let out = lx.b.scatter(base, idx, u, &dims, move |rb, cur, upd| {
        Ok(vec![if add { rb.add(cur[0], upd[0])? } else { upd[0] }])
    })?;
    Ok(vec![lx.b.reshape(out, &t.shape)?])
}

/// What an out-of-range index raises, as on the CPU. index_copy raises
/// IndexError. index_add takes a scatter_add shortcut (RuntimeError) for
/// rank > 1, dim 0 or the last, an int64 index and alpha 1 (a runtime
/// scalar, so the choice is made on the device); otherwise IndexError.
fn index_slices_raise(
    lx: &mut Lower,
    args: &Args,
    add: bool,
    d: usize,
    index_dtype: DType,
) -> Result<OutOfRange> {
    let rank = args.tensor(0)?.shape.len();
    if !add || rank < 2 || !(d == 0 || d == rank - 1) || index_dtype != DType::I64 {
        return Ok(OutOfRange::IndexError);
    }
    let Some(alpha) = args.opt_scalar(4) else {
        return Ok(OutOfRange::RuntimeError);
    };
    // A complex alpha (complex tensors) is 1 when its parts are 1 and 0.
    let (re, im) = if alpha.dtype.is_complex() {
        (lx.b.real(alpha.value)?, Some(lx.b.imag(alpha.value)?))
    } else {
        (alpha.value, None)
    };
    let re = lx.b.convert(re, DType::F64)?;
    let one = lx.b.constant_f64(DType::F64, 1.0);
    let mut is_one = lx.b.compare(re, one, CompareDir::Eq)?;
    if let Some(im) = im {
        let im = lx.b.convert(im, DType::F64)?;
        let zero = lx.b.constant_f64(DType::F64, 0.0);
        let real = lx.b.compare(im, zero, CompareDir::Eq)?;
        is_one = lx.b.and(is_one, real)?;
    }
    Ok(OutOfRange::RuntimeErrorWhen(is_one))
}

/// index_add(self, dim, index, source, *, alpha=1)
pub(super) fn index_add(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    index_slices(lx, args, true)
}

/// index_copy(self, dim, index, source)
pub(super) fn index_copy(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    index_slices(lx, args, false)
}
