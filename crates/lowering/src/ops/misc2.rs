//! More OpInfo-coverage ops: index_reduce, nonzero_static, put, angle,
//! channel_shuffle, logcumsumexp, histc, gcd/lcm, frexp; segment_reduce and
//! embedding_bag live in misc2/segment.rs.
use stablehlo::{CompareDir, DType, ScatterDims, Value};

use super::elementwise::{float_of, not_for, prepare, wide};
use crate::args::{norm_dim, Arg, Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::promote::result_type;
use crate::table::OpEntry;

mod segment;
use segment::{embedding_bag, segment_reduce, segment_reduce_backward};

type R = Result<Vec<Value>>;
type V = Value;

pub const OPS: &[OpEntry] = &[
    op!("index_reduce", index_reduce),
    op!("nonzero_static", nonzero_static),
    op!("put", put),
    op!("angle", angle),
    op!("channel_shuffle", channel_shuffle),
    op!("native_channel_shuffle", channel_shuffle),
    op!("logcumsumexp", logcumsumexp),
    op!("_logcumsumexp", logcumsumexp),
    op!("histc", histc, static),
    op!("gcd", gcd),
    op!("lcm", lcm),
    op!("frexp", frexp),
    op!("segment_reduce", segment_reduce),
    op!("_segment_reduce_backward", segment_reduce_backward),
    op!("_embedding_bag_forward_only", embedding_bag),
    op!("_embedding_bag", embedding_bag),
];

pub(super) fn cmp(lx: &mut Lower, a: V, x: f64, dir: CompareDir) -> Result<V> {
    let c = lx.full_like(a, x)?;
    Ok(lx.b.compare(a, c, dir)?)
}

/// index_reduce(self, dim, index, source, reduce, *, include_self=True):
/// expands `index` ([k]) to `source`'s shape and reuses scatter_reduce.
fn index_reduce(lx: &mut Lower, args: &Args) -> R {
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
    let idx = lx.b.broadcast_in_dim(idx, &us, &[d as i64])?;
    let ta = |value, dtype, shape: &[i64]| {
        Arg::Tensor(TensorArg { value, dtype, shape: shape.to_vec(), wrapped_number: false })
    };
    let sub = Args {
        op: args.op.clone(),
        items: vec![
            ta(self_v, t.dtype, &ss),
            Arg::Int(d as i64),
            ta(idx, DType::I64, &us),
            ta(src_v, t.dtype, &us),
            Arg::Str(reduce),
            Arg::Bool(args.bool_or(5, true)?),
        ],
    };
    let f = crate::table::lookup("scatter_reduce").expect("scatter_reduce lowering").lower;
    let out = f(lx, &sub)?;
    Ok(vec![lx.b.reshape(out[0], &t.shape)?])
}

/// Inclusive prefix sum of a 1-D i64 array (log2(n) shifted adds).
fn prefix_sum(lx: &mut Lower, x: V) -> Result<V> {
    let n = lx.shape(x)[0];
    let mut acc = x;
    let mut shift = 1;
    while shift < n {
        let zero = lx.b.constant_i64(DType::I64, 0);
        let s = lx.b.pad(acc, zero, &[shift], &[0], &[0])?;
        let s = lx.b.slice(s, &[0], &[n], &[1])?;
        acc = lx.b.add(acc, s)?;
        shift *= 2;
    }
    Ok(acc)
}

/// Scatters `upd` ([n]) into `init` ([m]) at `slot` ([n] i64; out-of-range dropped).
fn scatter_1d(lx: &mut Lower, init: V, slot: V, upd: V, add: bool) -> Result<V> {
    let n = lx.shape(slot)[0];
    let slot = lx.b.reshape(slot, &[n, 1])?;
    let dims = ScatterDims {
        update_window_dims: vec![],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    Ok(lx.b.scatter(init, slot, upd, &dims, move |rb, cur, u| {
        Ok(vec![if add { rb.add(cur[0], u[0])? } else { u[0] }])
    })?)
}

/// nonzero_static(self, *, size, fill_value=-1) -> [size, ndim] int64.
fn nonzero_static(lx: &mut Lower, args: &Args) -> R {
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
    let rank = prefix_sum(lx, as_int)?;
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
fn put(lx: &mut Lower, args: &Args) -> R {
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
    let bad = lx.b.reduce_or(bad, &[0])?;
    lx.check(bad, format!("{}: put_(): index out of range for tensor of {n} elements", lx.op));
    let neg = cmp(lx, idx, 0.0, CompareDir::Lt)?;
    let nn = lx.full(DType::I64, n as f64, &[k])?;
    let wrapped = lx.b.add(idx, nn)?;
    let idx = lx.b.select(neg, wrapped, idx)?;
    let flat = lx.b.reshape(t.value, &[n])?;
    let u = lx.b.reshape(src.value, &[k])?;
    let out = scatter_1d(lx, flat, idx, u, acc)?;
    Ok(vec![lx.b.reshape(out, &t.shape)?])
}

/// angle of a real tensor: pi for negatives, 0 otherwise, NaN kept.
fn angle(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    let out = float_of(t.dtype);
    let x = lx.cast(t.value, out)?;
    let neg = cmp(lx, x, 0.0, CompareDir::Lt)?;
    let pi = lx.full_like(x, std::f64::consts::PI)?;
    let z = lx.full_like(x, 0.0)?;
    let r = lx.b.select(neg, pi, z)?;
    let nan = lx.b.compare(x, x, CompareDir::Ne)?;
    Ok(vec![lx.b.select(nan, x, r)?])
}

/// channel_shuffle(self, groups): [N, g, C/g, *] → [N, C/g, g, *].
fn channel_shuffle(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    let g = args.int(1)?;
    if g <= 0 {
        bail!(Runtime, "{}: Number of groups to divide channels in must be positive. Value of groups:{g}", lx.op);
    }
    if t.shape.len() < 3 {
        bail!(
            Runtime,
            "{}: channel_shuffle expects input to have at least 3 dimensions, but got input with sizes {:?}",
            lx.op,
            t.shape
        );
    }
    let c = t.shape[1];
    if c % g != 0 {
        bail!(Runtime, "{}: Number of channels must be divisible by groups. Got {c} channels and {g} groups.", lx.op);
    }
    let mut s = vec![t.shape[0], g, c / g];
    s.extend_from_slice(&t.shape[2..]);
    let v = lx.b.reshape(t.value, &s)?;
    let mut perm: Vec<i64> = vec![0, 2, 1];
    perm.extend(3..s.len() as i64);
    let v = lx.b.transpose(v, &perm)?;
    Ok(vec![lx.b.reshape(v, &t.shape)?])
}

/// log(exp(a) + exp(b)), stable, with infinities and NaN handled.
fn logaddexp(lx: &mut Lower, a: V, b: V) -> Result<V> {
    let m = lx.b.max(a, b)?;
    let mn = lx.b.min(a, b)?;
    let d = lx.b.sub(mn, m)?;
    let e = lx.b.exp(d)?;
    let l = lx.b.log_plus_one(e)?;
    let s = lx.b.add(m, l)?;
    let fin = lx.b.is_finite(m)?;
    let r = lx.b.select(fin, s, m)?;
    let na = lx.b.compare(a, a, CompareDir::Ne)?;
    let nb = lx.b.compare(b, b, CompareDir::Ne)?;
    let nan = lx.b.or(na, nb)?;
    let sum = lx.b.add(a, b)?;
    Ok(lx.b.select(nan, sum, r)?)
}

/// logcumsumexp(self, dim): Hillis-Steele scan with logaddexp.
fn logcumsumexp(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if !t.dtype.is_float() {
        return Err(not_for("logcumsumexp_out_cpu", t.dtype));
    }
    if t.shape.is_empty() {
        norm_dim(lx.op, args.int(1)?, 1)?;
        return Ok(vec![t.value]);
    }
    let d = norm_dim(lx.op, args.int(1)?, t.shape.len())?;
    // CPU accumulates in acc_type: double for float, float for halves.
    let w = if t.dtype == DType::F32 { DType::F64 } else { wide(t.dtype) };
    let mut acc = lx.cast(t.value, w)?;
    let shape = t.shape.clone();
    let n = shape[d];
    let r = shape.len();
    if n <= 128 {
        // Sequential, in CPU's order (same rounding as the reference).
        let mut parts = vec![];
        let mut prev: Option<V> = None;
        for i in 0..n {
            let mut st = vec![0; r];
            st[d] = i;
            let mut lim = shape.clone();
            lim[d] = i + 1;
            let xi = lx.b.slice(acc, &st, &lim, &vec![1; r])?;
            let cur = match prev {
                Some(p) => logaddexp(lx, p, xi)?,
                None => xi,
            };
            parts.push(cur);
            prev = Some(cur);
        }
        let out = lx.b.concatenate(&parts, d as i64)?;
        return Ok(vec![lx.cast(out, t.dtype)?]);
    }
    let mut shift = 1;
    while shift < n {
        let ninf = lx.b.constant_f64(w, f64::NEG_INFINITY);
        let mut low = vec![0; r];
        low[d] = shift;
        let s = lx.b.pad(acc, ninf, &low, &vec![0; r], &vec![0; r])?;
        let s = lx.b.slice(s, &vec![0; r], &shape, &vec![1; r])?;
        acc = logaddexp(lx, acc, s)?;
        shift *= 2;
    }
    Ok(vec![lx.cast(acc, t.dtype)?])
}

/// histc(self, bins=100, min=0, max=0): equal-width histogram.
fn histc(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?.clone();
    if !t.dtype.is_float() {
        return Err(not_for("histogram_cpu", t.dtype));
    }
    let bins = args.int_or(1, 100)?;
    if bins <= 0 {
        bail!(Runtime, "{}: torch.histc(): bins must be > 0, but got {bins} for bins", lx.op);
    }
    let lit = |i: usize| match args.get(i) {
        Arg::Scalar(s) => s.literal,
        Arg::Int(v) => *v as f64,
        Arg::Float(v) => *v,
        _ => 0.0,
    };
    let (mn, mx) = (lit(2), lit(3));
    if mn > mx {
        bail!(Runtime, "{}: torch.histc(): max must be larger than min", lx.op);
    }
    let w = if t.dtype == DType::F64 { DType::F64 } else { DType::F32 };
    let n: i64 = t.shape.iter().product();
    let flat = lx.b.reshape(t.value, &[n])?;
    let x = lx.cast(flat, w)?;
    // Edges are stored in the input dtype.
    let (mut lo, mut hi);
    if mn == mx && n > 0 {
        lo = lx.b.reduce_min(x, &[0])?;
        hi = lx.b.reduce_max(x, &[0])?;
    } else {
        lo = lx.b.constant_f64(t.dtype, mn);
        lo = lx.cast(lo, w)?;
        hi = lx.b.constant_f64(t.dtype, mx);
        hi = lx.cast(hi, w)?;
    }
    let same = lx.b.compare(lo, hi, CompareDir::Eq)?;
    let one = lx.b.constant_f64(w, 1.0);
    let lo1 = lx.b.sub(lo, one)?;
    let hi1 = lx.b.add(hi, one)?;
    lo = lx.b.select(same, lo1, lo)?;
    hi = lx.b.select(same, hi1, hi)?;
    let (lo, hi) = (lx.cast(lo, t.dtype)?, lx.cast(hi, t.dtype)?);
    let (lo, hi) = (lx.cast(lo, w)?, lx.cast(hi, w)?);
    let lob = lx.b.broadcast_in_dim(lo, &[n], &[])?;
    let hib = lx.b.broadcast_in_dim(hi, &[n], &[])?;
    let nb = lx.full(w, bins as f64, &[n])?;
    let span = lx.b.sub(hib, lob)?;
    let off = lx.b.sub(x, lob)?;
    let p = lx.b.mul(off, nb)?;
    let p = lx.b.div(p, span)?;
    let p = lx.b.floor(p)?;
    let zero = lx.full(w, 0.0, &[n])?;
    let top = lx.full(w, (bins - 1) as f64, &[n])?;
    let p = lx.b.clamp(zero, p, top)?;
    // Local correction against linspace edges.
    let edge = |lx: &mut Lower, k: V| -> Result<V> {
        let step = lx.b.div(span, nb)?;
        let a = lx.b.mul(step, k)?;
        let a = lx.b.add(lob, a)?;
        let rem = lx.b.sub(nb, k)?;
        let bb = lx.b.mul(step, rem)?;
        let bb = lx.b.sub(hib, bb)?;
        let half = lx.full(w, ((bins + 1) / 2) as f64, &[n])?;
        let first = lx.b.compare(k, half, CompareDir::Lt)?;
        let e = lx.b.select(first, a, bb)?;
        let e = lx.cast(e, t.dtype)?;
        lx.cast(e, w)
    };
    let e0 = edge(lx, p)?;
    let onev = lx.full(w, 1.0, &[n])?;
    let p1 = lx.b.add(p, onev)?;
    let e1 = edge(lx, p1)?;
    let below = lx.b.compare(x, e0, CompareDir::Lt)?;
    let pm1 = lx.b.sub(p, onev)?;
    let above = lx.b.compare(x, e1, CompareDir::Ge)?;
    let p = lx.b.select(below, pm1, p)?;
    let p = lx.b.select(above, p1, p)?;
    let p = lx.b.clamp(zero, p, top)?;
    let ge = lx.b.compare(x, lob, CompareDir::Ge)?;
    let le = lx.b.compare(x, hib, CompareDir::Le)?;
    let ok = lx.b.and(ge, le)?;
    let pi = lx.cast(p, DType::I64)?;
    let past = lx.full(DType::I64, bins as f64, &[n])?;
    let slot = lx.b.select(ok, pi, past)?;
    let init = lx.full(w, 0.0, &[bins])?;
    let ones = lx.full(w, 1.0, &[n])?;
    let out = if n == 0 { init } else { scatter_1d(lx, init, slot, ones, true)? };
    Ok(vec![lx.cast(out, t.dtype)?])
}

fn int_pair(lx: &mut Lower, args: &Args, name: &str) -> Result<(V, V, DType)> {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let out = result_type(&[&a, &b]);
    if out.is_float() || out == DType::Bool {
        return Err(not_for(name, out));
    }
    let v = prepare(lx, &[&a, &b], out)?;
    Ok((v[0], v[1], out))
}

fn gcd_of(lx: &mut Lower, a: V, b: V, dt: DType) -> Result<V> {
    let steps = match dt {
        DType::I64 => 93,
        _ => 48,
    };
    let (mut a, mut b) = (a, b);
    for _ in 0..steps {
        let z = cmp(lx, b, 0.0, CompareDir::Eq)?;
        let one = lx.full_like(b, 1.0)?;
        let safe = lx.b.select(z, one, b)?;
        let r = lx.b.rem(a, safe)?;
        let na = lx.b.select(z, a, b)?;
        let nb = lx.b.select(z, b, r)?;
        a = na;
        b = nb;
    }
    if dt == DType::U8 {
        return Ok(a);
    }
    Ok(lx.b.abs(a)?)
}

fn gcd(lx: &mut Lower, args: &Args) -> R {
    let (a, b, dt) = int_pair(lx, args, "gcd_cpu")?;
    Ok(vec![gcd_of(lx, a, b, dt)?])
}

fn lcm(lx: &mut Lower, args: &Args) -> R {
    let (a, b, dt) = int_pair(lx, args, "lcm_cpu")?;
    let g = gcd_of(lx, a, b, dt)?;
    let z = cmp(lx, g, 0.0, CompareDir::Eq)?;
    let one = lx.full_like(g, 1.0)?;
    let safe = lx.b.select(z, one, g)?;
    let q = lx.b.div(a, safe)?;
    let m = lx.b.mul(q, b)?;
    let m = if dt == DType::U8 { m } else { lx.b.abs(m)? };
    let zero = lx.full_like(m, 0.0)?;
    Ok(vec![lx.b.select(z, zero, m)?])
}

/// frexp(self) -> (mantissa in [0.5, 1), int32 exponent).
fn frexp(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if !t.dtype.is_float() {
        bail!(
            Runtime,
            "{}: torch.frexp() only supports floating-point dtypes",
            lx.op
        );
    }
    let x = lx.cast(t.value, DType::F64)?;
    let ax = lx.b.abs(x)?;
    let l = lx.b.log(ax)?;
    let ln2 = lx.full_like(l, std::f64::consts::LN_2)?;
    let l = lx.b.div(l, ln2)?;
    let e = lx.b.floor(l)?;
    let one = lx.full_like(e, 1.0)?;
    let mut e = lx.b.add(e, one)?;
    let two = lx.full_like(e, 2.0)?;
    let half = lx.full_like(e, 0.5)?;
    let mut m = x;
    let scale = |lx: &mut Lower, x: V, e: V| -> Result<V> {
        // x * 2^-e in two halves (avoids overflow of 2^-e).
        let two = lx.full_like(e, 2.0)?;
        let h = lx.full_like(e, 0.5)?;
        let ne = lx.b.neg(e)?;
        let e1 = lx.b.mul(ne, h)?;
        let e1 = lx.b.floor(e1)?;
        let e2 = lx.b.sub(ne, e1)?;
        let p1 = lx.b.pow(two, e1)?;
        let p2 = lx.b.pow(two, e2)?;
        let y = lx.b.mul(x, p1)?;
        Ok(lx.b.mul(y, p2)?)
    };
    m = scale(lx, m, e)?;
    for _ in 0..2 {
        let am = lx.b.abs(m)?;
        let big = lx.b.compare(am, one, CompareDir::Ge)?;
        let small = lx.b.compare(am, half, CompareDir::Lt)?;
        let mh = lx.b.mul(m, half)?;
        let m2 = lx.b.mul(m, two)?;
        let ep = lx.b.add(e, one)?;
        let em = lx.b.sub(e, one)?;
        m = lx.b.select(big, mh, m)?;
        e = lx.b.select(big, ep, e)?;
        m = lx.b.select(small, m2, m)?;
        e = lx.b.select(small, em, e)?;
    }
    let fin = lx.b.is_finite(x)?;
    let nz = cmp(lx, x, 0.0, CompareDir::Ne)?;
    let ok = lx.b.and(fin, nz)?;
    let m = lx.b.select(ok, m, x)?;
    let z = lx.full_like(e, 0.0)?;
    let e = lx.b.select(ok, e, z)?;
    Ok(vec![lx.cast(m, t.dtype)?, lx.cast(e, DType::I32)?])
}

