//! nn.EmbeddingBag: `_embedding_bag` (a masked reduction over [bags, N, D]
//! of the gathered rows) and the two backward ops autograd calls for it:
//! the weight's gradient (`_embedding_bag_backward`) and that of
//! per_sample_weights (`_embedding_bag_per_sample_weights_backward`).
use stablehlo::{CompareDir, DType, Value};

use super::cmp;
use crate::args::{Arg, Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::{ErrorKind, Result};
use crate::ops::elementwise::{not_for, wide};

type R = Result<Vec<Value>>;
type V = Value;

/// EmbeddingBag's `mode` argument.
const SUM: i64 = 0;
const MEAN: i64 = 1;
const MAX: i64 = 2;

/// [bags, n] bool: index position i lies in bag b. Bag b spans
/// [offsets[b], offsets[b+1]); the last one ends at n, unless
/// include_last_offset made offsets one longer than the bags.
fn membership(lx: &mut Lower, offsets: &TensorArg, bags: i64, n: i64) -> Result<V> {
    let off = lx.cast(offsets.value, DType::I64)?;
    let end = lx.b.constant_i64(DType::I64, n);
    let bounds = lx.b.pad(off, end, &[0], &[1], &[0])?;
    let starts = lx.b.slice(bounds, &[0], &[bags], &[1])?;
    let ends = lx.b.slice(bounds, &[1], &[bags + 1], &[1])?;
    let shape = [bags, n];
    let sb = lx.b.broadcast_in_dim(starts, &shape, &[0])?;
    let eb = lx.b.broadcast_in_dim(ends, &shape, &[0])?;
    let pos = lx.b.iota(DType::I64, &shape, 1)?;
    let ge = lx.b.compare(pos, sb, CompareDir::Ge)?;
    let lt = lx.b.compare(pos, eb, CompareDir::Lt)?;
    Ok(lx.b.and(ge, lt)?)
}

/// The CPU's checks of `offsets`, deferred like index checks (the values
/// are on the device): the first bag starts at 0, offsets never decrease,
/// and none lies past the end of `indices`.
fn check_offsets(lx: &mut Lower, offsets: &TensorArg, n: i64) -> Result<()> {
    let k = offsets.shape[0];
    if k == 0 {
        return Ok(());
    }
    let off = lx.cast(offsets.value, DType::I64)?;
    let first = lx.b.slice(off, &[0], &[1], &[1])?;
    let first = lx.b.reshape(first, &[])?;
    let bad = cmp(lx, first, 0.0, CompareDir::Ne)?;
    let op = lx.op;
    lx.check_quoting(
        ErrorKind::Runtime,
        bad,
        &[first],
        format!("{op}: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. However, got {{0}}"),
    )?;
    let last = lx.b.slice(off, &[k - 1], &[k], &[1])?;
    let last = lx.b.reshape(last, &[])?;
    let bad = cmp(lx, last, n as f64, CompareDir::Gt)?;
    lx.check_quoting(
        ErrorKind::Runtime,
        bad,
        &[last],
        format!("{op}: offsets[-1] can not be greater than input's length {n} but got offsets[-1] of {{0}}"),
    )?;
    if k > 1 {
        let before = lx.b.slice(off, &[0], &[k - 1], &[1])?;
        let after = lx.b.slice(off, &[1], &[k], &[1])?;
        let down = lx.b.compare(after, before, CompareDir::Lt)?;
        let bad = crate::ops::indexing::any(lx, down)?;
        lx.check_runtime(bad, format!("{op}: offsets must not decrease (bag b spans indices[offsets[b]:offsets[b+1]])"));
    }
    Ok(())
}

/// The CPU's check of `indices` (RuntimeError, quoting the first index out
/// of range and its position), ahead of index_select's own IndexError.
fn check_indices(lx: &mut Lower, idx: V, n: i64, rows: i64) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let below = cmp(lx, idx, 0.0, CompareDir::Lt)?;
    let above = cmp(lx, idx, rows as f64, CompareDir::Ge)?;
    let bad = lx.b.or(below, above)?;
    let (bad, pos, value) = crate::ops::indexing::first_flagged(lx, bad, idx)?;
    let op = lx.op;
    lx.check_quoting(
        ErrorKind::Runtime,
        bad,
        &[pos, value],
        format!("{op}: Index {{0}} of input takes value {{1}} which is not in the valid range [0, {rows})"),
    )
}

/// The rows weight[indices], [n, D], in the accumulation type.
fn gathered_rows(lx: &mut Lower, weight: &TensorArg, idx: V, n: i64) -> Result<V> {
    let rows = lx.call(
        "index_select",
        vec![Arg::tensor(weight.value, weight.dtype, &weight.shape), Arg::Int(0), Arg::tensor(idx, DType::I64, &[n])],
    )?[0];
    lx.cast(rows, wide(weight.dtype))
}

/// `grad` [bags, D] spread to the index positions, [n, D]: each position
/// gets its bag's row (positions outside every bag get zeros).
fn spread_to_positions(lx: &mut Lower, member: V, grad: V) -> Result<V> {
    let dtype = lx.dtype(grad);
    let m = lx.cast(member, dtype)?;
    Ok(lx.b.dot_general(m, grad, &[], &[], &[0], &[0], Some(dtype))?)
}

/// _embedding_bag[_forward_only](weight, indices, offsets, scale_grad_by_freq,
/// mode, sparse, per_sample_weights, include_last_offset, padding_idx)
/// -> (output, offset2bag, bag_size, max_indices)
pub(super) fn embedding_bag(lx: &mut Lower, args: &Args) -> R {
    let weight = args.tensor(0)?.clone();
    let indices = args.tensor(1)?.clone();
    let offsets = args.tensor(2)?.clone();
    let mode = args.int_or(4, SUM)?;
    let psw = args.opt_tensor(6).cloned();
    let last = args.bool_or(7, false)?;
    let pad = args.int_or(8, -1)?;
    if indices.shape.len() != 1 || offsets.shape.len() != 1 || weight.shape.len() != 2 {
        bail!(Value, "{}: embedding_bag: input has to be 1D or 2D Tensor and weight 2D", lx.op);
    }
    if !weight.dtype.is_float() {
        return Err(not_for("embedding_bag_cpu", weight.dtype));
    }
    if psw.is_some() && mode != SUM {
        bail!(Runtime, "{}: embedding_bag: per_sample_weights only supported with mode='sum'", lx.op);
    }
    let n = indices.shape[0];
    let dm = weight.shape[1];
    let nb = if last { offsets.shape[0] - 1 } else { offsets.shape[0] };
    check_offsets(lx, &offsets, n)?;
    let idx = lx.cast(indices.value, DType::I64)?;
    check_indices(lx, idx, n, weight.shape[0])?;
    let w = wide(weight.dtype);
    let mut rows = gathered_rows(lx, &weight, idx, n)?;
    if let Some(p) = psw {
        let pv = lx.cast(p.value, w)?;
        let pb = lx.b.broadcast_in_dim(pv, &[n, dm], &[0])?;
        rows = lx.b.mul(rows, pb)?;
    }
    let ms = [nb, n];
    let seg_mask = membership(lx, &offsets, nb, n)?;
    let mut mask = seg_mask;
    if pad >= 0 {
        let ib = lx.b.broadcast_in_dim(idx, &ms, &[1])?;
        let np = cmp(lx, ib, pad as f64, CompareDir::Ne)?;
        mask = lx.b.and(mask, np)?;
    }
    let big = [nb, n, dm];
    let mb = lx.b.broadcast_in_dim(mask, &big, &[0, 1])?;
    let xb = lx.b.broadcast_in_dim(rows, &big, &[1, 2])?;
    let cnt = lx.cast(mask, DType::I64)?;
    let cnt = lx.b.reduce_sum(cnt, &[1])?; // [nb]
    let (out, maxi) = if mode == MAX {
        // The CPU walks each bag in order: its first row sets the result,
        // a later one replaces it only when strictly greater. So a NaN first
        // row gives NaN, a later NaN is never taken: the maximum of the
        // non-NaN rows unless the first is NaN.
        let pos = lx.b.iota(DType::I64, &big, 1)?;
        let past = lx.full(DType::I64, n as f64, &big)?;
        let in_bag = lx.b.select(mb, pos, past)?;
        let first_pos = lx.b.reduce_min(in_bag, &[1])?; // [nb, dm], the same for every column
        let fpb = lx.b.broadcast_in_dim(first_pos, &big, &[0, 2])?;
        let is_first = lx.b.compare(pos, fpb, CompareDir::Eq)?;
        let nan = lx.b.compare(xb, xb, CompareDir::Ne)?;
        let first_nan = lx.b.and(is_first, nan)?;
        let first_nan = lx.b.reduce_or(first_nan, &[1])?; // [nb, dm]
        let not_nan = lx.b.not(nan)?;
        let usable = lx.b.and(mb, not_nan)?;
        let id = lx.full(w, f64::NEG_INFINITY, &big)?;
        let sel = lx.b.select(usable, xb, id)?;
        let m = lx.b.reduce_max(sel, &[1])?;
        let cb = lx.b.broadcast_in_dim(cnt, &[nb, dm], &[0])?;
        let empty = cmp(lx, cb, 0.0, CompareDir::Eq)?;
        let z = lx.full(w, 0.0, &[nb, dm])?;
        let nanv = lx.full(w, f64::NAN, &[nb, dm])?;
        let m = lx.b.select(first_nan, nanv, m)?;
        let out = lx.b.select(empty, z, m)?;
        // max_indices: the weight row of the first maximum in its bag (or of
        // the NaN first row); 0 for an empty bag.
        let mbig = lx.b.broadcast_in_dim(m, &big, &[0, 2])?;
        let at_max = lx.b.compare(sel, mbig, CompareDir::Eq)?;
        let at_max = lx.b.and(at_max, usable)?;
        let fnb = lx.b.broadcast_in_dim(first_nan, &big, &[0, 2])?;
        let at_max = lx.b.select(fnb, is_first, at_max)?;
        let cand = lx.b.select(at_max, pos, past)?;
        let first = lx.b.reduce_min(cand, &[1])?;
        let fb = lx.b.broadcast_in_dim(first, &big, &[0, 2])?;
        let is_max = lx.b.compare(pos, fb, CompareDir::Eq)?;
        let ib = lx.b.broadcast_in_dim(idx, &big, &[1])?;
        let zero = lx.full(DType::I64, 0.0, &big)?;
        let picked = lx.b.select(is_max, ib, zero)?;
        (out, lx.b.reduce_sum(picked, &[1])?)
    } else {
        let id = lx.full(w, 0.0, &big)?;
        let sel = lx.b.select(mb, xb, id)?;
        let s = lx.b.reduce_sum(sel, &[1])?;
        let out = if mode == MEAN {
            let cf = lx.cast(cnt, w)?;
            let one = lx.full(w, 1.0, &[nb])?;
            let cf = lx.b.max(cf, one)?;
            let cb = lx.b.broadcast_in_dim(cf, &[nb, dm], &[0])?;
            lx.b.div(s, cb)?
        } else {
            s
        };
        (out, lx.full(DType::I64, 0.0, &[nb])?)
    };
    let out = lx.cast(out, weight.dtype)?;
    // offset2bag: the bag of each index position (positions past every bag → 0).
    let sm = lx.cast(seg_mask, DType::I64)?;
    let bag_iota = lx.b.iota(DType::I64, &ms, 0)?;
    let bagid = lx.b.mul(sm, bag_iota)?;
    let o2b = lx.b.reduce_sum(bagid, &[0])?;
    Ok(vec![out, o2b, cnt, maxi])
}

/// _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size,
/// maximum_indices, num_weights, scale_grad_by_freq, mode, sparse,
/// per_sample_weights, padding_idx=-1): the weight's gradient.
pub(super) fn embedding_bag_backward(lx: &mut Lower, args: &Args) -> R {
    let grad = args.tensor(0)?.clone();
    let indices = args.tensor(1)?.clone();
    let offsets = args.tensor(2)?.clone();
    let bag_size = args.tensor(4)?.clone();
    let max_indices = args.tensor(5)?.clone();
    let num_weights = args.int(6)?;
    let by_freq = args.bool_or(7, false)?;
    let mode = args.int(8)?;
    let psw = args.opt_tensor(10).cloned();
    let pad = args.int_or(11, -1)?;
    if args.bool_or(9, false)? {
        bail!(
            NotImplemented,
            "{}: EmbeddingBag(sparse=True) needs sparse gradients, which tpu does not support; \
             use sparse=False",
            lx.op
        );
    }
    if grad.shape.len() != 2 || indices.shape.len() != 1 {
        bail!(Runtime, "{}: expected a 2-D grad and 1-D indices, got {:?} and {:?}", lx.op, grad.shape, indices.shape);
    }
    let (nb, dm, n) = (grad.shape[0], grad.shape[1], indices.shape[0]);
    let a = wide(grad.dtype);
    let g = lx.cast(grad.value, a)?;
    let embedding_backward = |lx: &mut Lower, g: V, idx: V, n: i64, d: i64, rows: i64, pad: i64, by_freq: bool| -> Result<V> {
        Ok(lx.call(
            "embedding_dense_backward",
            vec![
                Arg::tensor(g, a, &[n, d]),
                Arg::tensor(idx, DType::I64, &[n]),
                Arg::Int(rows),
                Arg::Int(pad),
                Arg::Bool(by_freq),
            ],
        )?[0])
    };
    let out = if mode == MAX {
        // grad[b, d] goes to row max_indices[b, d] of column d, for the
        // bags that are not empty: a scatter-add over the flattened weight.
        let size = lx.cast(bag_size.value, DType::I64)?;
        let sb = lx.b.broadcast_in_dim(size, &[nb, dm], &[0])?;
        let nonempty = cmp(lx, sb, 0.0, CompareDir::Gt)?;
        let zero = lx.full(a, 0.0, &[nb, dm])?;
        let g = lx.b.select(nonempty, g, zero)?;
        let rows = lx.cast(max_indices.value, DType::I64)?;
        let width = lx.full(DType::I64, dm as f64, &[nb, dm])?;
        let col = lx.b.iota(DType::I64, &[nb, dm], 1)?;
        let flat = lx.b.mul(rows, width)?;
        let flat = lx.b.add(flat, col)?;
        let flat = lx.b.reshape(flat, &[nb * dm])?;
        let g = lx.b.reshape(g, &[nb * dm, 1])?;
        let out = embedding_backward(lx, g, flat, nb * dm, 1, num_weights * dm, -1, false)?;
        lx.b.reshape(out, &[num_weights, dm])?
    } else {
        let g = if mode == MEAN {
            let size = lx.cast(bag_size.value, a)?;
            let one = lx.full(a, 1.0, &[nb])?;
            let size = lx.b.max(size, one)?;
            let sb = lx.b.broadcast_in_dim(size, &[nb, dm], &[0])?;
            lx.b.div(g, sb)?
        } else {
            g
        };
        let member = membership(lx, &offsets, nb, n)?;
        let mut per_pos = spread_to_positions(lx, member, g)?;
        if let Some(p) = psw {
            let pv = lx.cast(p.value, a)?;
            let pb = lx.b.broadcast_in_dim(pv, &[n, dm], &[0])?;
            per_pos = lx.b.mul(per_pos, pb)?;
        }
        let idx = lx.cast(indices.value, DType::I64)?;
        embedding_backward(lx, per_pos, idx, n, dm, num_weights, pad, by_freq)?
    };
    Ok(vec![lx.cast(out, grad.dtype)?])
}

/// _embedding_bag_per_sample_weights_backward(grad, weight, indices,
/// offsets, offset2bag, mode, padding_idx=-1): per index position, the dot
/// product of its bag's gradient with the weight row it gathered.
pub(super) fn embedding_bag_per_sample_weights_backward(lx: &mut Lower, args: &Args) -> R {
    let grad = args.tensor(0)?.clone();
    let weight = args.tensor(1)?.clone();
    let indices = args.tensor(2)?.clone();
    let offsets = args.tensor(3)?.clone();
    let mode = args.int(5)?;
    let pad = args.int_or(6, -1)?;
    if mode != SUM {
        bail!(
            NotImplemented,
            "{}: embedding_bag_backward: per_sample_weights only supported for mode='sum'",
            lx.op
        );
    }
    if grad.shape.len() != 2 || indices.shape.len() != 1 || weight.shape.len() != 2 {
        bail!(Runtime, "{}: expected a 2-D grad and weight and 1-D indices, got {:?}, {:?} and {:?}",
              lx.op, grad.shape, weight.shape, indices.shape);
    }
    let (nb, n) = (grad.shape[0], indices.shape[0]);
    let a = wide(grad.dtype);
    let g = lx.cast(grad.value, a)?;
    let member = membership(lx, &offsets, nb, n)?;
    let per_pos = spread_to_positions(lx, member, g)?;
    let idx = lx.cast(indices.value, DType::I64)?;
    let rows = gathered_rows(lx, &weight, idx, n)?;
    let rows = lx.cast(rows, a)?;
    let prod = lx.b.mul(rows, per_pos)?;
    let mut out = lx.b.reduce_sum(prod, &[1])?;
    if pad >= 0 {
        let keep = cmp(lx, idx, pad as f64, CompareDir::Ne)?;
        let zero = lx.full(a, 0.0, &[n])?;
        out = lx.b.select(keep, out, zero)?;
    }
    Ok(vec![lx.cast(out, grad.dtype)?])
}
