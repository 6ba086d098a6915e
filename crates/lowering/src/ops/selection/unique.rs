//! The unique family (data-dependent output size): _unique2/_unique,
//! unique_consecutive and unique_dim. Each has a `size` lowering counting
//! the distinct runs (the engine reads it back first) and a main lowering
//! receiving that count as `Lower::dynamic_size`.
use stablehlo::{CompareDir, DType, GatherDims, Value};

use super::{scan, sort_dim};
use crate::args::{norm_dim, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

/// Flat values, sorted (or not), with their run-start flags and a
/// 1-based run number per element: (values, order, start flags, run ids).
fn runs(lx: &mut Lower, x: Value, sorted: bool) -> Result<(Value, Value, Value, Value)> {
    let n = lx.shape(x).iter().product::<i64>();
    let flat = lx.b.reshape(x, &[1, n])?;
    let (v, order) = if sorted { sort_dim(lx, flat, 1, false)? } else {
        let i = lx.b.iota(DType::I64, &[1, n], 1)?;
        (flat, i)
    };
    let start = if n > 1 {
        let a = lx.b.slice(v, &[0, 0], &[1, n - 1], &[1, 1])?;
        let c = lx.b.slice(v, &[0, 1], &[1, n], &[1, 1])?;
        let diff = lx.b.compare(a, c, CompareDir::Ne)?;
        let t1 = lx.b.constant_i64(DType::Bool, 1);
        lx.b.pad(diff, t1, &[0, 1], &[0, 0], &[0, 0])?
    } else {
        lx.b.splat_i64(DType::Bool, 1, &[1, n])?
    };
    let s64 = lx.cast(start, DType::I64)?;
    let z = lx.b.constant_i64(DType::I64, 0);
    let id = scan(lx, vec![s64], &[z], |b, p, c| Ok(vec![b.add(p[0], c[0])?]))?[0];
    Ok((v, order, start, id))
}

fn count_runs(lx: &mut Lower, x: Value, sorted: bool) -> Result<Vec<Value>> {
    if lx.shape(x).iter().product::<i64>() == 0 {
        return Ok(vec![lx.b.constant_i64(DType::I64, 0)]);
    }
    let (_, _, start, _) = runs(lx, x, sorted)?;
    let s = lx.cast(start, DType::I64)?;
    let s = lx.b.reduce_sum(s, &[0, 1])?;
    Ok(vec![s])
}

/// (unique values [count], inverse in x's shape, counts [count]).
fn unique_common(lx: &mut Lower, x: Value, sorted: bool, inverse: bool, counts: bool) -> Result<Vec<Value>> {
    let Some(count) = lx.dynamic_size else { bail!(Runtime, "{}: size not computed (internal error)", lx.op) };
    let shape = lx.shape(x);
    let n = shape.iter().product::<i64>();
    let dt = lx.dtype(x);
    let empty = lx.b.splat_i64(DType::I64, 0, &[0])?;
    if n == 0 {
        let v = lx.b.reshape(x, &[0])?;
        let inv = if inverse { lx.b.splat_i64(DType::I64, 0, &shape)? } else { empty };
        return Ok(vec![v, inv, empty]);
    }
    let (v, order, start, id) = runs(lx, x, sorted)?;
    let v = lx.b.reshape(v, &[n])?;
    let order = lx.b.reshape(order, &[n])?;
    let start = lx.b.reshape(start, &[n])?;
    let id = lx.b.reshape(id, &[n])?;
    let one = lx.b.splat_i64(DType::I64, 1, &[n])?;
    let slot = lx.b.sub(id, one)?;
    let slot2 = lx.b.reshape(slot, &[n, 1])?;
    let sdims = stablehlo::ScatterDims::points_1d();
    // Values: each run's first element goes to its slot; others past the end.
    let past = lx.b.splat_i64(DType::I64, count, &[n])?;
    let first_slot = lx.b.select(start, slot, past)?;
    let first_slot = lx.b.reshape(first_slot, &[n, 1])?;
    let init = lx.b.splat_i64(dt, 0, &[count])?;
    let uniq = lx.b.scatter(init, first_slot, v, &sdims, |_b, _c, u| Ok(vec![u[0]]))?;
    let inv = if inverse {
        // inverse[order[j]] = slot[j]
        let o2 = lx.b.reshape(order, &[n, 1])?;
        let init = lx.b.splat_i64(DType::I64, 0, &[n])?;
        let inv = lx.b.scatter(init, o2, slot, &sdims, |_b, _c, u| Ok(vec![u[0]]))?;
        lx.b.reshape(inv, &shape)?
    } else {
        empty
    };
    let cnt = if counts {
        let init = lx.b.splat_i64(DType::I64, 0, &[count])?;
        lx.b.scatter(init, slot2, one, &sdims, |b, c, u| Ok(vec![b.add(c[0], u[0])?]))?
    } else {
        empty
    };
    Ok(vec![uniq, inv, cnt])
}

pub(super) fn unique2_count(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    count_runs(lx, t.value, true)
}

/// _unique2(self, sorted, return_inverse, return_counts) and
/// _unique(self, sorted, return_inverse). CPU always sorts.
pub(super) fn unique2(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let inverse = args.bool_or(2, false)?;
    let legacy = lx.op.contains("_unique.") || lx.op.ends_with("_unique");
    let counts = !legacy && args.bool_or(3, false)?;
    let mut out = unique_common(lx, t.value, true, inverse, counts)?;
    if legacy {
        out.truncate(2);
    }
    Ok(out)
}

pub(super) fn unique_consecutive_count(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    match args.opt_int(3)? {
        Some(d) => count_slices(lx, t.value, d, false),
        None => count_runs(lx, t.value, false),
    }
}

/// unique_consecutive(self, return_inverse, return_counts, dim=None).
pub(super) fn unique_consecutive(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    match args.opt_int(3)? {
        Some(d) => unique_slices(lx, t.value, d, false),
        None => {
            let inverse = args.bool_or(1, false)?;
            let counts = args.bool_or(2, false)?;
            unique_common(lx, t.value, false, inverse, counts)
        }
    }
}

pub(super) fn unique_dim_count(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    count_slices(lx, t.value, args.int(1)?, true)
}

/// unique_dim(self, dim, sorted, return_inverse, return_counts): unique
/// slices along dim, always sorted lexicographically (as CPU); inverse and
/// counts are always computed.
pub(super) fn unique_dim(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    unique_slices(lx, t.value, args.int(1)?, true)
}

/// Slices of `x` along `dim` as rows: ([n, m] value, dim, perm to rows).
fn slices(lx: &mut Lower, x: Value, dim: i64) -> Result<(Value, usize, Vec<i64>)> {
    let shape = lx.shape(x);
    let d = norm_dim(lx.op, dim, shape.len())?;
    if shape.is_empty() {
        bail!(Index, "{}: unique with dim needs a tensor with at least one dimension", lx.op);
    }
    let mut perm = vec![d as i64];
    perm.extend((0..shape.len() as i64).filter(|&k| k != d as i64));
    let t = if d == 0 { x } else { lx.b.transpose(x, &perm)? };
    let n = shape[d];
    let m = shape.iter().product::<i64>() / n.max(1);
    Ok((lx.b.reshape(t, &[n, m])?, d, perm))
}

/// Rows of `m` ([n, k]) in lexicographic order (stable) when `sorted`, with
/// their original positions and run-start flags: (rows, order [n], start [n]).
fn slice_runs(lx: &mut Lower, m: Value, sorted: bool) -> Result<(Value, Value, Value)> {
    let s = lx.shape(m);
    let (n, k) = (s[0], s[1]);
    let order = lx.b.iota(DType::I64, &[n], 0)?;
    let (rows, order) = if sorted && n > 1 && k > 0 {
        let mut cols = Vec::new();
        for j in 0..k {
            let c = lx.b.slice(m, &[0, j], &[n, j + 1], &[1, 1])?;
            cols.push(lx.b.reshape(c, &[n])?);
        }
        cols.push(order);
        let out = lx.b.sort(&cols, 0, true, |b, a| {
            // Lexicographic over the k key columns, built from the last.
            let mut acc: Option<Value> = None;
            for j in (0..k as usize).rev() {
                let lt = b.compare(a[2 * j], a[2 * j + 1], CompareDir::Lt)?;
                acc = Some(match acc {
                    None => lt,
                    Some(rest) => {
                        let eq = b.compare(a[2 * j], a[2 * j + 1], CompareDir::Eq)?;
                        let e = b.and(eq, rest)?;
                        b.or(lt, e)?
                    }
                });
            }
            Ok(acc.expect("k > 0"))
        })?;
        let mut cols = Vec::new();
        for &c in &out[..k as usize] {
            cols.push(lx.b.reshape(c, &[n, 1])?);
        }
        (lx.b.concatenate(&cols, 1)?, out[k as usize])
    } else {
        (m, order)
    };
    let start = if n > 1 && k > 0 {
        let a = lx.b.slice(rows, &[0, 0], &[n - 1, k], &[1, 1])?;
        let c = lx.b.slice(rows, &[1, 0], &[n, k], &[1, 1])?;
        let diff = lx.b.compare(a, c, CompareDir::Ne)?;
        let diff = lx.b.reduce_or(diff, &[1])?;
        let t1 = lx.b.constant_i64(DType::Bool, 1);
        lx.b.pad(diff, t1, &[1], &[0], &[0])?
    } else {
        // One row, or empty slices (all equal: only the first starts a run).
        let first = lx.b.iota(DType::I64, &[n], 0)?;
        let zero = lx.b.splat_i64(DType::I64, 0, &[n])?;
        lx.b.compare(first, zero, CompareDir::Eq)?
    };
    Ok((rows, order, start))
}

fn count_slices(lx: &mut Lower, x: Value, dim: i64, sorted: bool) -> Result<Vec<Value>> {
    let (m, _, _) = slices(lx, x, dim)?;
    if lx.shape(m)[0] == 0 {
        return Ok(vec![lx.b.constant_i64(DType::I64, 0)]);
    }
    let (_, _, start) = slice_runs(lx, m, sorted)?;
    let s = lx.cast(start, DType::I64)?;
    Ok(vec![lx.b.reduce_sum(s, &[0])?])
}

/// (unique slices, inverse [n], counts [count]) along `dim`.
fn unique_slices(lx: &mut Lower, x: Value, dim: i64, sorted: bool) -> Result<Vec<Value>> {
    let Some(count) = lx.dynamic_size else { bail!(Runtime, "{}: size not computed (internal error)", lx.op) };
    let shape = lx.shape(x);
    let (m, d, perm) = slices(lx, x, dim)?;
    let s = lx.shape(m);
    let (n, k) = (s[0], s[1]);
    let mut out_shape = shape.clone();
    out_shape[d] = count;
    if n == 0 {
        let v = lx.b.splat_i64(lx.dtype(x), 0, &out_shape)?;
        let e = lx.b.splat_i64(DType::I64, 0, &[0])?;
        return Ok(vec![v, e, e]);
    }
    let (rows, order, start) = slice_runs(lx, m, sorted)?;
    let s64 = lx.cast(start, DType::I64)?;
    let s64 = lx.b.reshape(s64, &[1, n])?;
    let z = lx.b.constant_i64(DType::I64, 0);
    let id = scan(lx, vec![s64], &[z], |b, p, c| Ok(vec![b.add(p[0], c[0])?]))?[0];
    let id = lx.b.reshape(id, &[n])?;
    let one = lx.b.splat_i64(DType::I64, 1, &[n])?;
    let slot = lx.b.sub(id, one)?;
    let sdims = stablehlo::ScatterDims::points_1d();
    // The sorted position of each run's first row.
    let past = lx.b.splat_i64(DType::I64, count, &[n])?;
    let first_slot = lx.b.select(start, slot, past)?;
    let first_slot = lx.b.reshape(first_slot, &[n, 1])?;
    let pos = lx.b.iota(DType::I64, &[n], 0)?;
    let init = lx.b.splat_i64(DType::I64, 0, &[count])?;
    let first = lx.b.scatter(init, first_slot, pos, &sdims, |_b, _c, u| Ok(vec![u[0]]))?;
    let first = lx.b.reshape(first, &[count, 1])?;
    let gdims = GatherDims {
        offset_dims: vec![1],
        collapsed_slice_dims: vec![0],
        operand_batching_dims: vec![],
        start_indices_batching_dims: vec![],
        start_index_map: vec![0],
        index_vector_dim: 1,
    };
    let uniq = lx.b.gather(rows, first, &gdims, &[1, k], false)?;
    let mut moved: Vec<i64> = perm.iter().map(|&p| shape[p as usize]).collect();
    moved[0] = count;
    let uniq = lx.b.reshape(uniq, &moved)?;
    let mut inv_perm = vec![0i64; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv_perm[p as usize] = i as i64;
    }
    let uniq = if d == 0 { uniq } else { lx.b.transpose(uniq, &inv_perm)? };
    let o2 = lx.b.reshape(order, &[n, 1])?;
    let init = lx.b.splat_i64(DType::I64, 0, &[n])?;
    let inv = lx.b.scatter(init, o2, slot, &sdims, |_b, _c, u| Ok(vec![u[0]]))?;
    let slot2 = lx.b.reshape(slot, &[n, 1])?;
    let init = lx.b.splat_i64(DType::I64, 0, &[count])?;
    let cnt = lx.b.scatter(init, slot2, one, &sdims, |b, c, u| Ok(vec![b.add(c[0], u[0])?]))?;
    Ok(vec![uniq, inv, cnt])
}
