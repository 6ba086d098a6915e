//! Indexed reads and writes: index_reduce (through scatter_reduce),
//! nonzero_static and put.
use stablehlo::{CompareDir, DType};

use super::{cmp, scatter_1d, R};
use crate::args::{norm_dim, Arg, Args};
use crate::bail;
use crate::ctx::Lower;

/// index_reduce(self, dim, index, source, reduce, *, include_self=True):
/// expands `index` ([k]) to `source`'s shape and reuses scatter_reduce.
pub(super) fn index_reduce(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?.clone();
    let index = args.tensor(2)?.clone();
    let src = args.tensor(3)?.clone();
    let reduce = args.opt_str(4).unwrap_or("").to_string();
    if !matches!(reduce.as_str(), "prod" | "mean" | "amax" | "amin") {
        bail!(
            Runtime,
            "{}: index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.",
            lx.op
        );
    }
    if index.shape.len() > 1 {
        bail!(Index, "{}: Index is supposed to be a vector", lx.op);
    }
    if src.dtype != t.dtype {
        bail!(Runtime, "{}: self and source need to have the same dtype", lx.op);
    }
    let one = |s: &[i64]| if s.is_empty() { vec![1] } else { s.to_vec() };
    let (ss, us) = (one(&t.shape), one(&src.shape));
    let d = norm_dim(lx.op, args.int(1)?, ss.len())?;
    let k: i64 = index.shape.iter().product();
    if us.len() != ss.len() || us[d] != k {
        bail!(
            Index,
            "{}: index_reduce_(): Number of indices ({k}) should be equal to source.size(dim) ({:?})",
            lx.op,
            src.shape
        );
    }
    let self_v = lx.b.reshape(t.value, &ss)?;
    let src_v = lx.b.reshape(src.value, &us)?;
    let idx = lx.cast(index.value, DType::I64)?;
    let idx = lx.b.reshape(idx, &[k])?;
    // IndexError as on the CPU, ahead of scatter_reduce's RuntimeError.
    let what = crate::ops::indexing::shapes(&t, &index);
    let idx = crate::ops::indexing::checked(lx, idx, ss[d], d, false, &what, crate::ops::indexing::OutOfRange::IndexError)?;
    let idx = lx.b.broadcast_in_dim(idx, &us, &[d as i64])?;
    let sub = Args {
        op: args.op.clone(),
        items: vec![
            Arg::tensor(self_v, t.dtype, &ss),
            Arg::Int(d as i64),
            Arg::tensor(idx, DType::I64, &us),
            Arg::tensor(src_v, t.dtype, &us),
            Arg::Str(reduce),
            Arg::Bool(args.bool_or(5, true)?),
        ],
    };
    let f = crate::table::lookup("scatter_reduce").expect("scatter_reduce lowering").lower;
    let out = f(lx, &sub)?;
    Ok(vec![lx.b.reshape(out[0], &t.shape)?])
}

/// nonzero_static(self, *, size, fill_value=-1) -> [size, ndim] int64.
pub(super) fn nonzero_static(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?.clone();
    let size = args.int(1)?;
    let fill = args.int_or(2, -1)?;
    if size < 0 {
        bail!(Runtime, "{}: nonzero_static: 'size' must be an non-negative integer", lx.op);
    }
    let r = t.shape.len() as i64;
    let n: i64 = t.shape.iter().product();
    if size == 0 || r == 0 || n == 0 {
        let v = if r == 0 && n == 1 { 0.0 } else { fill as f64 };
        return Ok(vec![lx.full(DType::I64, v, &[size, r])?]);
    }
    let flat = lx.b.reshape(t.value, &[n])?;
    let mask = lx.cast(flat, DType::Bool)?;
    let as_int = lx.cast(mask, DType::I64)?;
    let rank = crate::ops::dynamic::prefix_sum(lx, as_int)?;
    let one = lx.full(DType::I64, 1.0, &[n])?;
    let slot = lx.b.sub(rank, one)?;
    let past = lx.full(DType::I64, size as f64, &[n])?;
    let slot = lx.b.select(mask, slot, past)?;
    let pos = lx.b.iota(DType::I64, &[n], 0)?;
    let init = lx.full(DType::I64, -1.0, &[size])?;
    let p = scatter_1d(lx, init, slot, pos, false)?;
    let empty = cmp(lx, p, 0.0, CompareDir::Lt)?;
    let mut cols = vec![];
    let mut stride = n;
    for &s in &t.shape {
        stride /= s;
        let st = lx.full(DType::I64, stride as f64, &[size])?;
        let q = lx.b.div(p, st)?;
        let sz = lx.full(DType::I64, s as f64, &[size])?;
        let c = lx.b.rem(q, sz)?;
        let f = lx.full(DType::I64, fill as f64, &[size])?;
        let c = lx.b.select(empty, f, c)?;
        cols.push(lx.b.reshape(c, &[size, 1])?);
    }
    Ok(vec![lx.b.concatenate(&cols, 1)?])
}

/// put(self, index, source, accumulate=False): flat scatter into self.
pub(super) fn put(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?.clone();
    let index = args.tensor(1)?.clone();
    let src = args.tensor(2)?.clone();
    let acc = matches!(args.get(3), Arg::Bool(true));
    let k: i64 = index.shape.iter().product();
    let ks: i64 = src.shape.iter().product();
    if k != ks {
        bail!(
            Runtime,
            "{}: put_(): Expected source and index to have the same number of elements, but got source.numel() = {ks}, index.numel() = {k}",
            lx.op
        );
    }
    if src.dtype != t.dtype {
        bail!(Runtime, "{}: put_(): self and source expected to have the same dtype", lx.op);
    }
    if index.dtype != DType::I64 {
        bail!(Runtime, "{}: put_(): Expected a long tensor for index", lx.op);
    }
    let n: i64 = t.shape.iter().product();
    if k == 0 {
        return Ok(vec![t.value]);
    }
    let idx = lx.b.reshape(index.value, &[k])?;
    let lo = cmp(lx, idx, -(n as f64), CompareDir::Lt)?;
    let hi = cmp(lx, idx, n as f64, CompareDir::Ge)?;
    let bad = lx.b.or(lo, hi)?;
    let (bad, _, value) = crate::ops::indexing::first_flagged(lx, bad, idx)?;
    lx.check_quoting(
        crate::ErrorKind::Index,
        bad,
        &[value],
        format!("{}: put_(): out of range: tried to access index {{0}} on a tensor of {n} elements.", lx.op),
    )?;
    let neg = cmp(lx, idx, 0.0, CompareDir::Lt)?;
    let nn = lx.full(DType::I64, n as f64, &[k])?;
    let wrapped = lx.b.add(idx, nn)?;
    let idx = lx.b.select(neg, wrapped, idx)?;
    let flat = lx.b.reshape(t.value, &[n])?;
    let u = lx.b.reshape(src.value, &[k])?;
    let out = scatter_1d(lx, flat, idx, u, acc)?;
    Ok(vec![lx.b.reshape(out, &t.shape)?])
}
