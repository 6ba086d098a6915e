//! Segment reductions (segment_reduce and its backward) and embedding_bag,
//! all as masked reductions over a [segments, positions, ...] broadcast.
use stablehlo::{CompareDir, DType, Value};

use super::cmp;
use crate::args::{norm_dim, Arg, Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::elementwise::{not_for, wide};

type R = Result<Vec<Value>>;
type V = Value;

/// segment_reduce(data, reduce, *, lengths, indices, offsets, axis=0,
/// unsafe=False, initial=None), forward: a masked reduction over
/// [B..., S, n, R...] (segment s holds positions start[s] <= i < end[s]).
pub(super) fn segment_reduce(lx: &mut Lower, args: &Args) -> R {
    let data = args.tensor(0)?.clone();
    let reduce = args.opt_str(1).unwrap_or("").to_string();
    if data.shape.is_empty() {
        bail!(Runtime, "{}: segment_reduce: data must have at least one dimension", lx.op);
    }
    let a = norm_dim(lx.op, args.int_or(5, 0)?, data.shape.len())?;
    let (starts, ends) = seg_bounds(lx, args.opt_tensor(2), args.opt_tensor(4), a)?;
    let seg_shape = lx.shape(starts); // [B..., S]
    let s = seg_shape[a];
    let n = data.shape[a];
    let mut mshape = seg_shape.clone();
    mshape.push(n); // [B..., S, n]
    let sdims: Vec<i64> = (0..=a as i64).collect();
    let sb = lx.b.broadcast_in_dim(starts, &mshape, &sdims)?;
    let eb = lx.b.broadcast_in_dim(ends, &mshape, &sdims)?;
    let pos = lx.b.iota(DType::I64, &mshape, a as i64 + 1)?;
    let ge = lx.b.compare(pos, sb, CompareDir::Ge)?;
    let lt = lx.b.compare(pos, eb, CompareDir::Lt)?;
    let mask = lx.b.and(ge, lt)?;
    let mut big = mshape.clone();
    big.extend_from_slice(&data.shape[a + 1..]);
    let r = data.shape.len() as i64;
    let ddims: Vec<i64> = (0..r).map(|d| if d < a as i64 { d } else { d + 1 }).collect();
    let w = wide(data.dtype);
    if !w.is_float() {
        return Err(not_for("segment_reduce", data.dtype));
    }
    let x = lx.cast(data.value, w)?;
    let xb = lx.b.broadcast_in_dim(x, &big, &ddims)?;
    let mdims: Vec<i64> = (0..=a as i64 + 1).collect();
    let mb = lx.b.broadcast_in_dim(mask, &big, &mdims)?;
    let identity = match reduce.as_str() {
        "sum" | "mean" => 0.0,
        "prod" => 1.0,
        "max" => f64::NEG_INFINITY,
        "min" => f64::INFINITY,
        _ => bail!(Runtime, "{}: segment_reduce: unsupported reduction {reduce}", lx.op),
    };
    let id = lx.full(w, identity, &big)?;
    let sel = lx.b.select(mb, xb, id)?;
    let rd = [a as i64 + 1];
    let mut out = match reduce.as_str() {
        "prod" => lx.b.reduce_prod(sel, &rd)?,
        "max" => lx.b.reduce_max(sel, &rd)?,
        "min" => lx.b.reduce_min(sel, &rd)?,
        _ => lx.b.reduce_sum(sel, &rd)?,
    };
    let oshape = lx.shape(out);
    let init = match args.opt_scalar(7) {
        Some(sc) => {
            let v = lx.cast(sc.value, w)?;
            Some(lx.b.broadcast_in_dim(v, &oshape, &[])?)
        }
        None => None,
    };
    if let Some(iv) = init {
        out = match reduce.as_str() {
            "prod" => lx.b.mul(out, iv)?,
            "max" => lx.b.max(out, iv)?,
            "min" => lx.b.min(out, iv)?,
            _ => lx.b.add(out, iv)?,
        };
    }
    if reduce == "mean" {
        let len = lx.b.sub(ends, starts)?;
        let lf = lx.cast(len, w)?;
        let lb = lx.b.broadcast_in_dim(lf, &oshape, &sdims)?;
        let q = lx.b.div(out, lb)?;
        out = match init {
            Some(iv) => {
                let empty = cmp(lx, lb, 0.0, CompareDir::Eq)?;
                lx.b.select(empty, iv, q)?
            }
            None => q,
        };
    }
    let _ = s;
    Ok(vec![lx.cast(out, data.dtype)?])
}

/// _embedding_bag[_forward_only](weight, indices, offsets, scale_grad_by_freq,
/// mode, sparse, per_sample_weights, include_last_offset, padding_idx):
/// a masked reduction over [bags, N, D] of the gathered rows.
pub(super) fn embedding_bag(lx: &mut Lower, args: &Args) -> R {
    let weight = args.tensor(0)?.clone();
    let indices = args.tensor(1)?.clone();
    let offsets = args.tensor(2)?.clone();
    let mode = args.int_or(4, 0)?;
    let psw = args.opt_tensor(6).cloned();
    let last = args.bool_or(7, false)?;
    let pad = args.int_or(8, -1)?;
    if indices.shape.len() != 1 || offsets.shape.len() != 1 || weight.shape.len() != 2 {
        bail!(Value, "{}: embedding_bag: input has to be 1D or 2D Tensor and weight 2D", lx.op);
    }
    if !weight.dtype.is_float() {
        return Err(not_for("embedding_bag_cpu", weight.dtype));
    }
    let n = indices.shape[0];
    let dm = weight.shape[1];
    let nb = if last { offsets.shape[0] - 1 } else { offsets.shape[0] };
    let off = lx.cast(offsets.value, DType::I64)?;
    let starts = lx.b.slice(off, &[0], &[nb], &[1])?;
    let ends = if last {
        lx.b.slice(off, &[1], &[nb + 1], &[1])?
    } else {
        let p = lx.b.constant_i64(DType::I64, n);
        let e = lx.b.pad(off, p, &[0], &[1], &[0])?;
        lx.b.slice(e, &[1], &[nb + 1], &[1])?
    };
    let idx = lx.cast(indices.value, DType::I64)?;
    let ta = |value, dtype, shape: &[i64]| {
        Arg::Tensor(TensorArg { value, dtype, shape: shape.to_vec(), wrapped_number: false })
    };
    let sub = Args {
        op: args.op.clone(),
        items: vec![ta(weight.value, weight.dtype, &weight.shape), Arg::Int(0), ta(idx, DType::I64, &[n])],
    };
    let f = crate::table::lookup("index_select").expect("index_select lowering").lower;
    let rows = f(lx, &sub)?[0]; // [n, D]
    let w = wide(weight.dtype);
    let mut rows = lx.cast(rows, w)?;
    if let Some(p) = psw {
        let pv = lx.cast(p.value, w)?;
        let pb = lx.b.broadcast_in_dim(pv, &[n, dm], &[0])?;
        rows = lx.b.mul(rows, pb)?;
    }
    let ms = [nb, n];
    let sb = lx.b.broadcast_in_dim(starts, &ms, &[0])?;
    let eb = lx.b.broadcast_in_dim(ends, &ms, &[0])?;
    let pos = lx.b.iota(DType::I64, &ms, 1)?;
    let ge = lx.b.compare(pos, sb, CompareDir::Ge)?;
    let lt = lx.b.compare(pos, eb, CompareDir::Lt)?;
    let mut mask = lx.b.and(ge, lt)?;
    let seg_mask = mask;
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
    let out = if mode == 2 {
        let id = lx.full(w, f64::NEG_INFINITY, &big)?;
        let sel = lx.b.select(mb, xb, id)?;
        let m = lx.b.reduce_max(sel, &[1])?;
        let cb = lx.b.broadcast_in_dim(cnt, &[nb, dm], &[0])?;
        let empty = cmp(lx, cb, 0.0, CompareDir::Eq)?;
        let z = lx.full(w, 0.0, &[nb, dm])?;
        lx.b.select(empty, z, m)?
    } else {
        let id = lx.full(w, 0.0, &big)?;
        let sel = lx.b.select(mb, xb, id)?;
        let s = lx.b.reduce_sum(sel, &[1])?;
        if mode == 1 {
            let cf = lx.cast(cnt, w)?;
            let one = lx.full(w, 1.0, &[nb])?;
            let cf = lx.b.max(cf, one)?;
            let cb = lx.b.broadcast_in_dim(cf, &[nb, dm], &[0])?;
            lx.b.div(s, cb)?
        } else {
            s
        }
    };
    let out = lx.cast(out, weight.dtype)?;
    // offset2bag: the bag of each index position (positions past every bag → 0).
    let sm = lx.cast(seg_mask, DType::I64)?;
    let bag_iota = lx.b.iota(DType::I64, &ms, 0)?;
    let bagid = lx.b.mul(sm, bag_iota)?;
    let o2b = lx.b.reduce_sum(bagid, &[0])?;
    let maxi = if mode == 2 { lx.full(DType::I64, 0.0, &[nb, dm])? } else { lx.full(DType::I64, 0.0, &[nb])? };
    Ok(vec![out, o2b, cnt, maxi])
}

/// (starts, ends) of each segment, [B..., S] i64, from lengths or offsets.
fn seg_bounds(lx: &mut Lower, lengths: Option<&TensorArg>, offsets: Option<&TensorArg>, a: usize) -> Result<(V, V)> {
    let (starts, ends) = if let Some(l) = lengths {
        let r = l.shape.len();
        if r != a + 1 {
            bail!(Runtime, "{}: segment_reduce: Expected axis to be the last dimension of lengths", lx.op);
        }
        let lv = lx.cast(l.value, DType::I64)?;
        // Inclusive prefix sum along the last dim.
        let s = l.shape[r - 1];
        let mut acc = lv;
        let mut shift = 1;
        while shift < s {
            let zero = lx.b.constant_i64(DType::I64, 0);
            let mut low = vec![0; r];
            low[r - 1] = shift;
            let p = lx.b.pad(acc, zero, &low, &vec![0; r], &vec![0; r])?;
            let p = lx.b.slice(p, &vec![0; r], &l.shape, &vec![1; r])?;
            acc = lx.b.add(acc, p)?;
            shift *= 2;
        }
        let st = lx.b.sub(acc, lv)?;
        (st, acc)
    } else if let Some(o) = offsets {
        let r = o.shape.len();
        if r != a + 1 {
            bail!(Runtime, "{}: segment_reduce: Expected axis to be the last dimension of offsets", lx.op);
        }
        let ov = lx.cast(o.value, DType::I64)?;
        let mut lim = o.shape.clone();
        lim[r - 1] -= 1;
        let st = lx.b.slice(ov, &vec![0; r], &lim, &vec![1; r])?;
        let mut start = vec![0; r];
        start[r - 1] = 1;
        let en = lx.b.slice(ov, &start, &o.shape, &vec![1; r])?;
        (st, en)
    } else {
        bail!(Runtime, "{}: segment_reduce: Either lengths or offsets must be defined", lx.op);
    };
    Ok((starts, ends))
}

/// Mask [B..., S, n]: position i lies in segment s.
fn seg_mask(lx: &mut Lower, starts: V, ends: V, a: usize, n: i64) -> Result<V> {
    let mut mshape = lx.shape(starts);
    mshape.push(n);
    let sdims: Vec<i64> = (0..=a as i64).collect();
    let sb = lx.b.broadcast_in_dim(starts, &mshape, &sdims)?;
    let eb = lx.b.broadcast_in_dim(ends, &mshape, &sdims)?;
    let pos = lx.b.iota(DType::I64, &mshape, a as i64 + 1)?;
    let ge = lx.b.compare(pos, sb, CompareDir::Ge)?;
    let lt = lx.b.compare(pos, eb, CompareDir::Lt)?;
    Ok(lx.b.and(ge, lt)?)
}

/// _segment_reduce_backward(grad, output, data, reduce, *, lengths, offsets,
/// axis, initial): each element gets its segment's gradient share (prod
/// uses output/data, so zeros in data are not handled like CPU).
pub(super) fn segment_reduce_backward(lx: &mut Lower, args: &Args) -> R {
    let grad = args.tensor(0)?.clone();
    let output = args.tensor(1)?.clone();
    let data = args.tensor(2)?.clone();
    let reduce = args.opt_str(3).unwrap_or("").to_string();
    let a = norm_dim(lx.op, args.int_or(6, 0)?, data.shape.len().max(1))?;
    let (starts, ends) = seg_bounds(lx, args.opt_tensor(4), args.opt_tensor(5), a)?;
    let n = data.shape[a];
    let mask = seg_mask(lx, starts, ends, a, n)?; // [B..., S, n]
    let mut big = lx.shape(mask);
    big.extend_from_slice(&data.shape[a + 1..]);
    let r = data.shape.len() as i64;
    let ddims: Vec<i64> = (0..r).map(|d| if d < a as i64 { d } else { d + 1 }).collect();
    let odims: Vec<i64> = (0..r).map(|d| if d <= a as i64 { d } else { d + 1 }).collect();
    let w = wide(data.dtype);
    let x = lx.cast(data.value, w)?;
    let g = lx.cast(grad.value, w)?;
    let o = lx.cast(output.value, w)?;
    let xb = lx.b.broadcast_in_dim(x, &big, &ddims)?;
    let gb = lx.b.broadcast_in_dim(g, &big, &odims)?;
    let ob = lx.b.broadcast_in_dim(o, &big, &odims)?;
    let mdims: Vec<i64> = (0..=a as i64 + 1).collect();
    let mb = lx.b.broadcast_in_dim(mask, &big, &mdims)?;
    let zero = lx.full(w, 0.0, &big)?;
    let contrib = match reduce.as_str() {
        "sum" => gb,
        "mean" => {
            let len = lx.b.sub(ends, starts)?;
            let lf = lx.cast(len, w)?;
            let sdims: Vec<i64> = (0..=a as i64).collect();
            let lb = lx.b.broadcast_in_dim(lf, &big, &sdims)?;
            lx.b.div(gb, lb)?
        }
        "max" | "min" => {
            let eq = lx.b.compare(xb, ob, CompareDir::Eq)?;
            let hit = lx.b.and(eq, mb)?;
            let hf = lx.cast(hit, w)?;
            let cnt = lx.b.reduce_sum(hf, &[a as i64 + 1])?;
            let cb = lx.b.broadcast_in_dim(cnt, &big, &odims)?;
            let q = lx.b.div(gb, cb)?;
            lx.b.select(hit, q, zero)?
        }
        "prod" => {
            let go = lx.b.mul(gb, ob)?;
            lx.b.div(go, xb)?
        }
        _ => bail!(Runtime, "{}: segment_reduce: unsupported reduction {reduce}", lx.op),
    };
    let sel = lx.b.select(mb, contrib, zero)?;
    let out = lx.b.reduce_sum(sel, &[a as i64])?;
    Ok(vec![lx.cast(out, data.dtype)?])
}
