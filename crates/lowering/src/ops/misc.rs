//! Assorted ops from the OpInfo coverage run: equal, linalg_cross, signbit,
//! heaviside, nextafter, entr, xlog1py, logit, isin, bucketize and
//! searchsorted.
use stablehlo::{CompareDir, DType, Value};

use super::elementwise::{broadcast_shape, float_of, not_for, prepare, type_name, wide};
use super::special::E;
use crate::args::{Arg, Args, Operand};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::promote::result_type;
use crate::table::OpEntry;

type R = Result<Vec<Value>>;
type V = Value;

pub const OPS: &[OpEntry] = &[
    op!("equal", equal),
    op!("linalg_cross", linalg_cross),
    op!("signbit", signbit),
    op!("heaviside", heaviside),
    op!("nextafter", nextafter),
    op!("special_entr", entr),
    op!("special_xlog1py", xlog1py),
    op!("logit", logit),
    op!("special_logit", logit),
    op!("logit_backward", logit_backward),
    op!("isin", isin),
    op!("bucketize", bucketize),
    op!("searchsorted", searchsorted),
];

/// torch.equal: same shape and all elements equal → a bool number.
fn equal(lx: &mut Lower, args: &Args) -> R {
    let (a, b) = (args.tensor(0)?, args.tensor(1)?);
    if a.dtype != b.dtype {
        bail!(
            Runtime,
            "{}: Expected object of scalar type {} but got scalar type {} for argument 'other'",
            lx.op,
            type_name(a.dtype),
            type_name(b.dtype)
        );
    }
    if a.shape != b.shape {
        return Ok(vec![lx.full(DType::Bool, 0.0, &[])?]);
    }
    let eq = lx.b.compare(a.value, b.value, CompareDir::Eq)?;
    let dims: Vec<i64> = (0..a.shape.len() as i64).collect();
    Ok(vec![lx.b.reduce_and(eq, &dims)?])
}

fn slice_dim(lx: &mut Lower, v: V, dim: usize, i: i64) -> Result<V> {
    let shape = lx.shape(v);
    let mut start = vec![0; shape.len()];
    let mut limit = shape.clone();
    start[dim] = i;
    limit[dim] = i + 1;
    Ok(lx.b.slice(v, &start, &limit, &vec![1; shape.len()])?)
}

fn linalg_cross(lx: &mut Lower, args: &Args) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let dim = args.int_or(2, -1)?;
    let out = result_type(&[&a, &b]);
    if out == DType::Bool {
        return Err(not_for("linalg_cross", out));
    }
    if a.shape.len() != b.shape.len() {
        bail!(
            Runtime,
            "{}: linalg.cross: inputs must have the same number of dimensions.",
            lx.op
        );
    }
    let shape = broadcast_shape(lx, &[&a, &b])?;
    let d = crate::args::norm_dim(lx.op, dim, shape.len())?;
    if a.shape[d] != 3 || b.shape[d] != 3 {
        bail!(
            Runtime,
            "{}: linalg.cross: inputs dimension {} must have length 3. Got {} and {}",
            lx.op,
            dim,
            a.shape[d],
            b.shape[d]
        );
    }
    // The CPU rounds each product to f16/bf16 before subtracting. Computed
    // in f32 with explicit rounding: left in f16, the XLA CPU backend may
    // fuse a product into the subtraction (an FMA) on CPUs with f16 math.
    let half = match out {
        DType::F16 => Some((5, 10)),
        DType::BF16 => Some((8, 7)),
        _ => None,
    };
    let v = prepare(lx, &[&a, &b], out)?;
    let v = match half {
        Some(_) => vec![lx.cast(v[0], DType::F32)?, lx.cast(v[1], DType::F32)?],
        None => v,
    };
    let mut parts = vec![];
    for i in 0..3 {
        let (j, k) = ((i + 1) % 3, (i + 2) % 3);
        let aj = slice_dim(lx, v[0], d, j)?;
        let bk = slice_dim(lx, v[1], d, k)?;
        let ak = slice_dim(lx, v[0], d, k)?;
        let bj = slice_dim(lx, v[1], d, j)?;
        let mut p = lx.b.mul(aj, bk)?;
        let mut q = lx.b.mul(ak, bj)?;
        if let Some((e, m)) = half {
            p = lx.b.reduce_precision(p, e, m)?;
            q = lx.b.reduce_precision(q, e, m)?;
        }
        parts.push(lx.b.sub(p, q)?);
    }
    let r = lx.b.concatenate(&parts, d as i64)?;
    Ok(vec![lx.cast(r, out)?])
}

/// The sign bit of a float value as bool (read from its bits, so -0.0 and
/// NaNs with the bit set count as negative).
pub(crate) fn float_sign_bit(lx: &mut Lower, x: Value) -> Result<Value> {
    let it = match lx.dtype(x) {
        DType::F64 => DType::I64,
        DType::F32 => DType::I32,
        _ => DType::I16,
    };
    let bits = lx.b.bitcast_convert(x, it)?;
    let zero = lx.full_like(bits, 0.0)?;
    Ok(lx.b.compare(bits, zero, CompareDir::Lt)?)
}

/// The sign bit as bool: -0.0 and NaNs with the bit set count as negative.
fn signbit(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    let x = t.value;
    let r = match t.dtype {
        DType::Bool => lx.full(DType::Bool, 0.0, &t.shape)?,
        d if d.is_float() => float_sign_bit(lx, x)?,
        d if d.is_signed() => {
            let zero = lx.full(d, 0.0, &t.shape)?;
            lx.b.compare(x, zero, CompareDir::Lt)?
        }
        _ => lx.full(DType::Bool, 0.0, &t.shape)?,
    };
    Ok(vec![r])
}

fn heaviside(lx: &mut Lower, args: &Args) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    if a.dtype != b.dtype {
        bail!(
            Runtime,
            "{}: heaviside is not yet implemented for tensors with different dtypes",
            lx.op
        );
    }
    let out = result_type(&[&a, &b]);
    let v = prepare(lx, &[&a, &b], out)?;
    let shape = lx.shape(v[0]);
    let zero = lx.full(out, 0.0, &shape)?;
    let z = lx.b.compare(v[0], zero, CompareDir::Eq)?;
    let pos = lx.b.compare(v[0], zero, CompareDir::Gt)?;
    let pos = lx.cast(pos, out)?;
    Ok(vec![lx.b.select(z, v[1], pos)?])
}

/// The next representable value after `a` towards `b`, by stepping the bits.
fn nextafter(lx: &mut Lower, args: &Args) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let out = result_type(&[&a, &b]);
    let it = match out {
        DType::F64 => DType::I64,
        DType::F32 => DType::I32,
        DType::F16 | DType::BF16 => DType::I16,
        d => return Err(not_for("nextafter_cpu", d)),
    };
    let v = prepare(lx, &[&a, &b], out)?;
    let (x, y) = (v[0], v[1]);
    let shape = lx.shape(x);
    let e = &mut E { lx };
    let bits = e.lx.b.bitcast_convert(x, it)?;
    let one = e.lx.full(it, 1.0, &shape)?;
    let up = e.lx.b.add(bits, one)?;
    let down = e.lx.b.sub(bits, one)?;
    // Away from zero when (x < y) == (x > 0).
    let lt = e.cmp(x, y, CompareDir::Lt)?;
    let zero = e.c(x, 0.0)?;
    let gt0 = e.cmp(x, zero, CompareDir::Gt)?;
    let away = e.cmp(lt, gt0, CompareDir::Eq)?;
    let r = e.sel(away, up, down)?;
    let r = e.lx.b.bitcast_convert(r, out)?;
    // From zero: the smallest subnormal with the sign of y.
    let tiny_bits = e.lx.full(it, 1.0, &shape)?;
    let tiny = e.lx.b.bitcast_convert(tiny_bits, out)?;
    let ntiny = e.lx.b.neg(tiny)?;
    let sign = e.sel(lt, tiny, ntiny)?;
    let xz = e.cmp(x, zero, CompareDir::Eq)?;
    let r = e.sel(xz, sign, r)?;
    let eq = e.cmp(x, y, CompareDir::Eq)?;
    let r = e.sel(eq, y, r)?;
    let xn = e.cmp(x, x, CompareDir::Ne)?;
    let yn = e.cmp(y, y, CompareDir::Ne)?;
    let n = e.or(xn, yn)?;
    let sum = e.add(x, y)?; // NaN
    Ok(vec![e.sel(n, sum, r)?])
}

/// Applies `f` to tensor argument 0 in the compute dtype of its float type.
fn unary_f(lx: &mut Lower, args: &Args, f: impl FnOnce(&mut E, V) -> Result<V>) -> R {
    let t = args.tensor(0)?;
    let out = float_of(t.dtype);
    let x = lx.cast(t.value, wide(out))?;
    let y = f(&mut E { lx }, x)?;
    Ok(vec![lx.cast(y, out)?])
}

/// -x log x; 0 at 0, -inf below 0.
fn entr(lx: &mut Lower, args: &Args) -> R {
    unary_f(lx, args, |e, x| {
        let l = e.lx.b.log(x)?;
        let p = e.mul(x, l)?;
        let r = e.lx.b.neg(p)?;
        let z = e.cmpc(x, 0.0, CompareDir::Eq)?;
        let r = e.selc(z, 0.0, r)?;
        let n = e.cmpc(x, 0.0, CompareDir::Lt)?;
        let r = e.selc(n, f64::NEG_INFINITY, r)?;
        let nan = e.cmp(x, x, CompareDir::Ne)?;
        e.sel(nan, x, r)
    })
}

/// x * log1p(y), 0 where x == 0 unless y is NaN.
fn xlog1py(lx: &mut Lower, args: &Args) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let out = float_of(result_type(&[&a, &b]));
    let v = prepare(lx, &[&a, &b], wide(out))?;
    let e = &mut E { lx };
    let (x, y) = (v[0], v[1]);
    let l = e.lx.b.log_plus_one(y)?;
    let p = e.mul(x, l)?;
    let z = e.cmpc(x, 0.0, CompareDir::Eq)?;
    let r = e.selc(z, 0.0, p)?;
    let yn = e.cmp(y, y, CompareDir::Ne)?;
    let r = e.sel(yn, y, r)?;
    Ok(vec![lx.cast(r, out)?])
}

/// log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given.
fn logit(lx: &mut Lower, args: &Args) -> R {
    let eps = match args.get(1) {
        Arg::Float(f) => Some(*f),
        Arg::Int(i) => Some(*i as f64),
        _ => None,
    };
    unary_f(lx, args, |e, x| {
        let mut x = x;
        if let Some(eps) = eps {
            let lo = e.c(x, eps)?;
            let hi = e.c(x, 1.0 - eps)?;
            // clamp keeping NaN
            let c = e.lx.b.max(x, lo)?;
            let c = e.lx.b.min(c, hi)?;
            let n = e.cmp(x, x, CompareDir::Ne)?;
            x = e.sel(n, x, c)?;
        }
        let d = e.rsubc(1.0, x)?;
        let q = e.div(x, d)?;
        Ok(e.lx.b.log(q)?)
    })
}

/// logit_backward(grad_output, self, eps): grad / (x (1 - x)); outside
/// [eps, 1 - eps] 0 (NaN outside [0, 1] without eps).
fn logit_backward(lx: &mut Lower, args: &Args) -> R {
    let (g, x) = (args.operand(0)?, args.operand(1)?);
    let eps = match args.get(2) {
        Arg::Float(f) => Some(*f),
        _ => None,
    };
    let out = x.dtype;
    let v = prepare(lx, &[&g, &x], wide(out))?;
    let e = &mut E { lx };
    let (g, x) = (v[0], v[1]);
    let d = e.rsubc(1.0, x)?;
    let d = e.mul(x, d)?;
    let r = e.div(g, d)?;
    let (lo, hi, fill) = match eps {
        Some(eps) if eps >= 0.0 => (eps, 1.0 - eps, 0.0),
        _ => (0.0, 1.0, f64::NAN),
    };
    let a = e.cmpc(x, lo, CompareDir::Lt)?;
    let b = e.cmpc(x, hi, CompareDir::Gt)?;
    let o = e.or(a, b)?;
    let r = e.selc(o, fill, r)?;
    Ok(vec![lx.cast(r, out)?])
}

/// An operand as a flat list of values of `dtype`.
fn flat(lx: &mut Lower, o: &Operand, dtype: DType) -> Result<V> {
    let v = lx.cast(o.value, dtype)?;
    let n: i64 = o.shape.iter().product();
    Ok(lx.b.reshape(v, &[n])?)
}

/// isin(elements, test_elements, assume_unique, invert): any-equal over the
/// flattened test elements.
fn isin(lx: &mut Lower, args: &Args) -> R {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let invert = args.bool_or(3, false)?;
    let ct = result_type(&[&a, &b]);
    let x = lx.cast(a.value, ct)?;
    let t = flat(lx, &b, ct)?;
    let n = lx.shape(t)[0];
    let mut full = a.shape.clone();
    full.push(n);
    let r = a.shape.len() as i64;
    let dims: Vec<i64> = (0..r).collect();
    let xe = lx.b.broadcast_in_dim(x, &full, &dims)?;
    let te = lx.b.broadcast_in_dim(t, &full, &[r])?;
    let eq = lx.b.compare(xe, te, CompareDir::Eq)?;
    let mut any = lx.b.reduce_or(eq, &[r])?;
    if invert {
        any = lx.b.not(any)?;
    }
    Ok(vec![any])
}

/// Counts boundaries before each value: !(x <= b) (left) or !(x < b) (right),
/// which puts NaN last as CPU's binary search does,
/// over the last dim of `seq` (`batched`) or all of a 1-D `seq`.
fn search(lx: &mut Lower, seq: &Operand, x: &Operand, right: bool, int32: bool, sorter: Option<V>) -> Result<V> {
    let ct = result_type(&[seq, x]);
    let mut s = lx.cast(seq.value, ct)?;
    let xv = lx.cast(x.value, ct)?;
    let m = *seq.shape.last().unwrap_or(&1);
    let sr = seq.shape.len();
    if let Some(idx) = sorter {
        // CPU raises rather than reading outside the sequence.
        let lo = super::misc2::cmp(lx, idx, 0.0, CompareDir::Lt)?;
        let hi = super::misc2::cmp(lx, idx, m as f64, CompareDir::Ge)?;
        let bad = lx.b.or(lo, hi)?;
        let bad = super::indexing::any(lx, bad)?;
        lx.check_runtime(bad, format!("{}: torch.searchsorted(): sorter index out of range", lx.op));
        s = take_last(lx, s, idx)?;
    }
    let (full, sdims, xdims): (Vec<i64>, Vec<i64>, Vec<i64>) = if sr <= 1 {
        let mut full = x.shape.clone();
        full.push(m);
        let r = x.shape.len() as i64;
        let s1 = lx.b.reshape(s, &[m])?;
        s = s1;
        (full, vec![r], (0..r).collect())
    } else {
        // seq (..., M), x (..., K) → (..., K, M)
        if seq.shape[..sr - 1] != x.shape[..x.shape.len().saturating_sub(1)] || x.shape.len() != sr {
            bail!(
                Runtime,
                "{}: torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and input value tensor must match, but we got boundaries tensor {:?} and input value tensor {:?}",
                lx.op,
                seq.shape,
                x.shape
            );
        }
        let k = x.shape[sr - 1];
        let mut full = seq.shape[..sr - 1].to_vec();
        full.push(k);
        full.push(m);
        let lead: Vec<i64> = (0..sr as i64 - 1).collect();
        let mut sd = lead.clone();
        sd.push(sr as i64);
        let mut xd = lead;
        xd.push(sr as i64 - 1);
        (full, sd, xd)
    };
    let se = lx.b.broadcast_in_dim(s, &full, &sdims)?;
    let xe = lx.b.broadcast_in_dim(xv, &full, &xdims)?;
    let c = if right {
        let lt = lx.b.compare(xe, se, CompareDir::Lt)?;
        lx.b.not(lt)?
    } else {
        let le = lx.b.compare(xe, se, CompareDir::Le)?;
        lx.b.not(le)?
    };
    let od = if int32 { DType::I32 } else { DType::I64 };
    let c = lx.cast(c, od)?;
    let last = full.len() as i64 - 1;
    Ok(lx.b.reduce_sum(c, &[last])?)
}

/// bucketize(self, boundaries, *, out_int32, right).
fn bucketize(lx: &mut Lower, args: &Args) -> R {
    let x = args.operand(0)?;
    let bnd = args.operand(1)?;
    if bnd.shape.len() != 1 {
        bail!(
            Runtime,
            "{}: boundaries tensor must be 1 dimension, but got dim({})",
            lx.op,
            bnd.shape.len()
        );
    }
    let int32 = args.bool_or(2, false)?;
    let right = args.bool_or(3, false)?;
    Ok(vec![search(lx, &bnd, &x, right, int32, None)?])
}

/// searchsorted(sorted_sequence, self, *, out_int32, right, side, sorter).
fn searchsorted(lx: &mut Lower, args: &Args) -> R {
    let seq = args.operand(0)?;
    let x = args.operand(1)?;
    let int32 = args.bool_or(2, false)?;
    let mut right = args.bool_or(3, false)?;
    if let Some(side) = args.opt_str(4) {
        right = side == "right";
    }
    let sorter = args.opt_tensor(5).map(|t| t.value);
    Ok(vec![search(lx, &seq, &x, right, int32, sorter)?])
}

/// `s[..., idx[..., j]]` along the last dim, as a one-hot select and sum.
fn take_last(lx: &mut Lower, s: V, idx: V) -> Result<V> {
    let shape = lx.shape(s);
    let r = shape.len();
    let m = shape[r - 1];
    let mut full = shape.clone();
    full.push(m); // (..., j, i)
    let lead: Vec<i64> = (0..r as i64 - 1).collect();
    let mut sd = lead.clone();
    sd.push(r as i64);
    let mut id = lead;
    id.push(r as i64 - 1);
    let se = lx.b.broadcast_in_dim(s, &full, &sd)?;
    let idx = lx.cast(idx, DType::I64)?;
    let ie = lx.b.broadcast_in_dim(idx, &full, &id)?;
    let io = lx.b.iota(DType::I64, &full, r as i64)?;
    let hit = lx.b.compare(ie, io, CompareDir::Eq)?;
    let dt = lx.dtype(s);
    let zero = lx.full(dt, 0.0, &full)?;
    let v = lx.b.select(hit, se, zero)?;
    Ok(lx.b.reduce_sum(v, &[r as i64])?)
}
