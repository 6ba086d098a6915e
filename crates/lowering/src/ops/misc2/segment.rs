//! Segment reductions (segment_reduce and its backward), as masked
//! reductions over a [segments, positions, ...] broadcast.
use stablehlo::{CompareDir, DType, Value};

use super::cmp;
use crate::args::{norm_dim, Args, TensorArg};
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
