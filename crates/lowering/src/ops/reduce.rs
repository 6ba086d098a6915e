//! Reductions: sum, mean, prod, max/min (+ indices), amax/amin, argmax/argmin,
//! var/std (+ mean), logsumexp, all/any, norms, cumsum/cumprod.
//!
//! One table row serves every overload of an op; the overload name (from
//! `lx.op`) says where the dims/keepdim/dtype arguments are. Half-precision
//! inputs accumulate in float32, like PyTorch's CPU kernels.
use stablehlo::{Builder, CompareDir, DType, Value};

use crate::args::{norm_dim, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::dtypes;
use crate::error::Result;
use crate::op;
use crate::ops::elementwise::prepare;
use crate::promote::result_type;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("sum", |lx, a| sum_like(lx, a, false, false)),
    op!("nansum", |lx, a| sum_like(lx, a, true, false)),
    op!("mean", mean),
    op!("prod", |lx, a| sum_like(lx, a, false, true)),
    op!("max", |lx, a| max_min(lx, a, true)),
    op!("min", |lx, a| max_min(lx, a, false)),
    op!("amax", |lx, a| amax_amin(lx, a, true)),
    op!("amin", |lx, a| amax_amin(lx, a, false)),
    op!("aminmax", aminmax),
    op!("argmax", |lx, a| arg_max_min(lx, a, true)),
    op!("argmin", |lx, a| arg_max_min(lx, a, false)),
    op!("var", |lx, a| Ok(vec![moments(lx, a, false)?.0])),
    op!("std", |lx, a| Ok(vec![moments(lx, a, true)?.0])),
    op!("var_mean", |lx, a| moments(lx, a, false).map(|(v, m)| vec![v, m])),
    op!("std_mean", |lx, a| moments(lx, a, true).map(|(v, m)| vec![v, m])),
    op!("logsumexp", logsumexp),
    op!("all", |lx, a| all_any(lx, a, true)),
    op!("any", |lx, a| all_any(lx, a, false)),
    op!("count_nonzero", count_nonzero),
    op!("norm", norm, static),
    op!("linalg_vector_norm", linalg_vector_norm, static),
    op!("cumsum", |lx, a| scan(lx, a, false)),
    op!("cumprod", |lx, a| scan(lx, a, true)),
];

/// The overload of "aten::name.overload" ("" for the default one).
pub(crate) fn overload(op: &str) -> &str {
    let n = op.strip_prefix("aten::").unwrap_or(op);
    n.split_once('.').map(|(_, o)| o).unwrap_or("")
}

/// The dtype half-precision values accumulate in.
pub(crate) fn acc(d: DType) -> DType {
    match d {
        DType::BF16 | DType::F16 => DType::F32,
        d => d,
    }
}

/// Normalized, sorted dims to reduce. `None` (and `[]` when `empty_is_all`)
/// means every dim. Rank-0 tensors accept dim 0/-1 and reduce nothing.
pub(crate) fn reduce_dims(lx: &Lower, dims: Option<Vec<i64>>, rank: usize, empty_is_all: bool) -> Result<Vec<i64>> {
    let dims = match dims {
        None => return Ok((0..rank as i64).collect()),
        Some(d) if d.is_empty() && empty_is_all => return Ok((0..rank as i64).collect()),
        Some(d) => d,
    };
    let mut out = Vec::with_capacity(dims.len());
    for d in dims {
        let n = norm_dim(lx.op, d, rank)? as i64;
        if out.contains(&n) {
            bail!(Runtime, "{}: dim {n} appears multiple times in the list of dims", lx.op);
        }
        out.push(n);
    }
    if rank == 0 {
        return Ok(vec![]);
    }
    out.sort_unstable();
    Ok(out)
}

/// The shape of a reduction's result.
pub(crate) fn reduced_shape(shape: &[i64], dims: &[i64], keepdim: bool) -> Vec<i64> {
    let mut out = Vec::new();
    for (i, &s) in shape.iter().enumerate() {
        if dims.contains(&(i as i64)) {
            if keepdim {
                out.push(1);
            }
        } else {
            out.push(s);
        }
    }
    out
}

/// Reshapes a reduction result (reduced dims dropped) to keep them as 1s.
pub(crate) fn keep(lx: &mut Lower, v: Value, shape: &[i64], dims: &[i64], keepdim: bool) -> Result<Value> {
    if !keepdim {
        return Ok(v);
    }
    Ok(lx.b.reshape(v, &reduced_shape(shape, dims, true))?)
}

/// Broadcasts a reduction result (reduced dims dropped) back to `shape`.
pub(crate) fn unreduce(lx: &mut Lower, v: Value, shape: &[i64], dims: &[i64]) -> Result<Value> {
    let kept: Vec<i64> = (0..shape.len() as i64).filter(|d| !dims.contains(d)).collect();
    Ok(lx.b.broadcast_in_dim(v, shape, &kept)?)
}

/// Number of elements the reduction over `dims` combines.
fn count(shape: &[i64], dims: &[i64]) -> i64 {
    dims.iter().map(|&d| shape[d as usize]).product()
}

fn not_float(lx: &Lower, what: &str, d: DType) -> Result<()> {
    if !d.is_float() {
        bail!(Runtime, "{}: {what}. Got: {}", lx.op, dtypes::name(d));
    }
    Ok(())
}

/// (dims, keepdim, dtype) from `(self, dim?, keepdim, dtype)` or, for the
/// full-reduction overloads listed in `full`, from `(self, dtype)`.
fn dims_keep_dtype(args: &Args, full: &[&str], op: &str) -> Result<(Option<Vec<i64>>, bool, Option<DType>)> {
    if full.contains(&overload(op)) {
        Ok((None, false, args.opt_dtype(1)?))
    } else {
        Ok((args.opt_ints(1)?, args.bool_or(2, false)?, args.opt_dtype(3)?))
    }
}

/// Sum-like reductions: integers and bool give int64 unless `dtype` says.
fn sum_like(lx: &mut Lower, args: &Args, nan_to_zero: bool, product: bool) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let (dims, keepdim, dtype) = if product && !matches!(overload(lx.op), "" | "out") {
        (Some(vec![args.int(1)?]), args.bool_or(2, false)?, args.opt_dtype(3)?)
    } else {
        dims_keep_dtype(args, if nan_to_zero { &[] } else { &["", "out"] }, lx.op)?
    };
    let out = dtype.unwrap_or(if t.dtype.is_float() { t.dtype } else { DType::I64 });
    let dims = reduce_dims(lx, dims, t.shape.len(), true)?;
    let x = lx.cast(t.value, out)?;
    let mut x = lx.cast(x, acc(out))?;
    if nan_to_zero && out.is_float() {
        let nan = lx.b.compare(x, x, CompareDir::Ne)?;
        let zero = lx.full_like(x, 0.0)?;
        x = lx.b.select(nan, zero, x)?;
    }
    let r = if product { lx.b.reduce_prod(x, &dims)? } else { lx.b.reduce_sum(x, &dims)? };
    let r = lx.cast(r, out)?;
    Ok(vec![keep(lx, r, &t.shape, &dims, keepdim)?])
}

fn mean(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let (dims, keepdim, dtype) = dims_keep_dtype(args, &["", "dtype_out"], lx.op)?;
    let out = dtype.unwrap_or(t.dtype);
    not_float(
        lx,
        "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype",
        out,
    )?;
    let dims = reduce_dims(lx, dims, t.shape.len(), true)?;
    let x = lx.cast(t.value, out)?;
    let x = lx.cast(x, acc(out))?;
    let s = lx.b.reduce_sum(x, &dims)?;
    let n = lx.full_like(s, count(&t.shape, &dims) as f64)?;
    let m = lx.b.div(s, n)?;
    let m = lx.cast(m, out)?;
    Ok(vec![keep(lx, m, &t.shape, &dims, keepdim)?])
}

/// The lowest (`max`) or highest value of a dtype, as a rank-0 constant.
fn extreme(b: &mut Builder, d: DType, lowest: bool) -> Value {
    if d.is_float() {
        return b.constant_f64(d, if lowest { f64::NEG_INFINITY } else { f64::INFINITY });
    }
    let (lo, hi): (i64, i64) = match d {
        DType::Bool => (0, 1),
        DType::U8 => (0, u8::MAX as i64),
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::U32 => (0, u32::MAX as i64),
        DType::U64 => (0, -1),
        _ => (i64::MIN, i64::MAX),
    };
    b.constant_i64(d, if lowest { lo } else { hi })
}

/// Max (or min) over `dims` that propagates NaN like PyTorch. (XLA CPU's
/// `reduce` with a `maximum` body drops NaNs, so floats use an explicit
/// compare-and-select body.)
pub(crate) fn reduce_extreme(lx: &mut Lower, v: Value, dims: &[i64], is_max: bool) -> Result<Value> {
    let dt = lx.dtype(v);
    if !dt.is_float() {
        return Ok(if is_max { lx.b.reduce_max(v, dims)? } else { lx.b.reduce_min(v, dims)? });
    }
    let init = extreme(lx.b, dt, is_max);
    Ok(lx.b.reduce(&[v], &[init], dims, |b, l, r| {
        let better = b.compare(l[0], r[0], if is_max { CompareDir::Gt } else { CompareDir::Lt })?;
        let nan = b.compare(l[0], l[0], CompareDir::Ne)?;
        let take_l = b.or(better, nan)?;
        Ok(vec![b.select(take_l, l[0], r[0])?])
    })?[0])
}

/// (values, int64 indices) of the max/min along `dim`, NaN counting as the
/// extreme and ties going to the first occurrence (as on CPU).
pub(crate) fn arg_reduce(lx: &mut Lower, x: Value, dim: i64, is_max: bool) -> Result<(Value, Value)> {
    let shape = lx.shape(x);
    let dt = lx.dtype(x);
    let idx = lx.b.iota(DType::I64, &shape, dim)?;
    let init_v = extreme(lx.b, dt, is_max);
    let init_i = lx.b.constant_i64(DType::I64, i64::MAX);
    let float = dt.is_float();
    let r = lx.b.reduce(&[x, idx], &[init_v, init_i], &[dim], |b, l, r| {
        let (lv, li, rv, ri) = (l[0], l[1], r[0], r[1]);
        let better = b.compare(lv, rv, if is_max { CompareDir::Gt } else { CompareDir::Lt })?;
        let eq = b.compare(lv, rv, CompareDir::Eq)?;
        let first = b.compare(li, ri, CompareDir::Lt)?;
        let take_l = if float {
            let lnan = b.compare(lv, lv, CompareDir::Ne)?;
            let rnan = b.compare(rv, rv, CompareDir::Ne)?;
            let not_rnan = b.not(rnan)?;
            let l_only = b.and(lnan, not_rnan)?;
            let both = b.and(lnan, rnan)?;
            let tie = b.or(eq, both)?;
            let tie_l = b.and(tie, first)?;
            let t = b.or(better, l_only)?;
            b.or(t, tie_l)?
        } else {
            let tie_l = b.and(eq, first)?;
            b.or(better, tie_l)?
        };
        Ok(vec![b.select(take_l, lv, rv)?, b.select(take_l, li, ri)?])
    })?;
    Ok((r[0], r[1]))
}

fn empty_dim(lx: &Lower, name: &str, shape: &[i64], dims: &[i64]) -> Result<()> {
    if let Some(d) = dims.iter().find(|&&d| shape[d as usize] == 0) {
        bail!(Index, "{}: {name}(): Expected reduction dim {d} to have non-zero size.", lx.op);
    }
    if dims.is_empty() && shape.contains(&0) {
        bail!(
            Runtime,
            "{}: {name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.",
            lx.op
        );
    }
    Ok(())
}

/// max/min: full reduction, `.dim` (values, indices), or elementwise `.other`.
fn max_min(lx: &mut Lower, args: &Args, is_max: bool) -> Result<Vec<Value>> {
    let name = if is_max { "max" } else { "min" };
    let t = args.tensor(0)?.clone();
    match overload(lx.op) {
        "other" | "out" => {
            let a = args.operand(0)?;
            let o = args.operand(1)?;
            let dtype = result_type(&[&a, &o]);
            let v = prepare(lx, &[&a, &o], dtype)?;
            Ok(vec![if is_max { lx.b.max(v[0], v[1])? } else { lx.b.min(v[0], v[1])? }])
        }
        "" | "unary_out" => {
            if t.shape.contains(&0) {
                empty_dim(lx, name, &t.shape, &[])?;
            }
            let dims: Vec<i64> = (0..t.shape.len() as i64).collect();
            let r = reduce_extreme(lx, t.value, &dims, is_max)?;
            Ok(vec![r])
        }
        _ => {
            let dim = norm_dim(lx.op, args.int(1)?, t.shape.len())? as i64;
            let keepdim = args.bool_or(2, false)?;
            let (v, i) = dim_reduce(lx, &t.value, &t.shape, Some(dim), keepdim, is_max, name)?;
            Ok(vec![v, i])
        }
    }
}

/// (values, indices) over one dim (or the flattened tensor for `None`).
fn dim_reduce(
    lx: &mut Lower,
    x: &Value,
    shape: &[i64],
    dim: Option<i64>,
    keepdim: bool,
    is_max: bool,
    name: &str,
) -> Result<(Value, Value)> {
    let rank = shape.len();
    let (flat, d, dims) = match dim {
        _ if rank == 0 => (lx.b.reshape(*x, &[1])?, 0, vec![]),
        None => {
            empty_dim(lx, name, shape, &[])?;
            let n = shape.iter().product();
            (lx.b.reshape(*x, &[n])?, 0, (0..rank as i64).collect())
        }
        Some(d) => {
            empty_dim(lx, name, shape, &[d])?;
            (*x, d, vec![d])
        }
    };
    let (v, i) = arg_reduce(lx, flat, d, is_max)?;
    Ok((keep(lx, v, shape, &dims, keepdim)?, keep(lx, i, shape, &dims, keepdim)?))
}

fn amax_amin(lx: &mut Lower, args: &Args, is_max: bool) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let dims = reduce_dims(lx, args.opt_ints(1)?, t.shape.len(), true)?;
    let keepdim = args.bool_or(2, false)?;
    if t.shape.contains(&0) {
        empty_dim(lx, if is_max { "amax" } else { "amin" }, &t.shape, &dims)?;
    }
    let r = reduce_extreme(lx, t.value, &dims, is_max)?;
    Ok(vec![keep(lx, r, &t.shape, &dims, keepdim)?])
}

/// aminmax(self, *, dim?, keepdim) -> (min, max)
fn aminmax(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let dims = match args.opt_int(1)? {
        Some(d) => vec![norm_dim(lx.op, d, t.shape.len())? as i64],
        None => (0..t.shape.len() as i64).collect(),
    };
    let dims = if t.shape.is_empty() { vec![] } else { dims };
    let keepdim = args.bool_or(2, false)?;
    if t.shape.contains(&0) {
        empty_dim(lx, "aminmax", &t.shape, &dims)?;
    }
    let lo = reduce_extreme(lx, t.value, &dims, false)?;
    let hi = reduce_extreme(lx, t.value, &dims, true)?;
    Ok(vec![keep(lx, lo, &t.shape, &dims, keepdim)?, keep(lx, hi, &t.shape, &dims, keepdim)?])
}

fn arg_max_min(lx: &mut Lower, args: &Args, is_max: bool) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let dim = match args.opt_int(1)? {
        Some(d) => Some(norm_dim(lx.op, d, t.shape.len())? as i64),
        None => None,
    };
    let keepdim = args.bool_or(2, false)?;
    let name = if is_max { "argmax" } else { "argmin" };
    if t.dtype == DType::Bool {
        bail!(NotImplemented, "{}: {name}(): does not support bool input", lx.op);
    }
    let (_, i) = dim_reduce(lx, &t.value, &t.shape, dim, keepdim, is_max, name)?;
    Ok(vec![i])
}

/// var/std(/_mean) over all their overloads. Returns (var or std, mean).
fn moments(lx: &mut Lower, args: &Args, sqrt: bool) -> Result<(Value, Value)> {
    let t = args.tensor(0)?.clone();
    if !t.dtype.is_float() {
        bail!(NotImplemented, "{}: std and var only support floating point and complex dtypes", lx.op);
    }
    let (dims, correction, keepdim) = match overload(lx.op) {
        "" => (None, None, false),
        "correction" | "correction_out" => (args.opt_ints(1)?, Some(args.opt_scalar(2)), args.bool_or(3, false)?),
        _ => (args.opt_ints(1)?, None, args.bool_or(3, false)?),
    };
    let unbiased = match overload(lx.op) {
        "" => args.bool_or(1, true)?,
        "correction" | "correction_out" => true,
        _ => args.bool_or(2, true)?,
    };
    let dims = reduce_dims(lx, dims, t.shape.len(), true)?;
    let a = acc(t.dtype);
    let x = lx.cast(t.value, a)?;
    let s = lx.b.reduce_sum(x, &dims)?;
    let n = count(&t.shape, &dims) as f64;
    let nv = lx.full_like(s, n)?;
    let mean = lx.b.div(s, nv)?;
    let mb = unreduce(lx, mean, &t.shape, &dims)?;
    let d = lx.b.sub(x, mb)?;
    let d2 = lx.b.mul(d, d)?;
    let ss = lx.b.reduce_sum(d2, &dims)?;
    let c = match correction {
        Some(Some(c)) => lx.cast(c.value, a)?,
        _ => lx.b.constant_f64(a, if unbiased { 1.0 } else { 0.0 }),
    };
    let nc = lx.b.constant_f64(a, n);
    let div = lx.b.sub(nc, c)?;
    let zero = lx.b.constant_f64(a, 0.0);
    let div = lx.b.max(div, zero)?;
    let shape = lx.shape(ss);
    let div = lx.expand(div, &shape)?;
    let mut v = lx.b.div(ss, div)?;
    if sqrt {
        v = lx.b.sqrt(v)?;
    }
    let v = lx.cast(v, t.dtype)?;
    let mean = lx.cast(mean, t.dtype)?;
    Ok((keep(lx, v, &t.shape, &dims, keepdim)?, keep(lx, mean, &t.shape, &dims, keepdim)?))
}

/// log(sum(exp(x - m))) + m over `dims` of an accumulation-dtype `x`, with
/// infinite maxima replaced by 0 (as PyTorch does).
pub(crate) fn logsumexp_value(lx: &mut Lower, x: Value, dims: &[i64]) -> Result<Value> {
    let shape = lx.shape(x);
    let m = reduce_extreme(lx, x, dims, true)?;
    let am = lx.b.abs(m)?;
    let inf = lx.full_like(m, f64::INFINITY)?;
    let is_inf = lx.b.compare(am, inf, CompareDir::Eq)?;
    let zero = lx.full_like(m, 0.0)?;
    let m = lx.b.select(is_inf, zero, m)?;
    let mb = unreduce(lx, m, &shape, dims)?;
    let d = lx.b.sub(x, mb)?;
    let e = lx.b.exp(d)?;
    let s = lx.b.reduce_sum(e, dims)?;
    let l = lx.b.log(s)?;
    Ok(lx.b.add(l, m)?)
}

fn logsumexp(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let out = if t.dtype.is_float() { t.dtype } else { DType::F32 };
    let dims = reduce_dims(lx, args.opt_ints(1)?, t.shape.len(), true)?;
    let keepdim = args.bool_or(2, false)?;
    let x = lx.cast(t.value, acc(out))?;
    let r = logsumexp_value(lx, x, &dims)?;
    let r = lx.cast(r, out)?;
    Ok(vec![keep(lx, r, &t.shape, &dims, keepdim)?])
}

/// all/any: bool results (uint8 for uint8 inputs).
fn all_any(lx: &mut Lower, args: &Args, is_all: bool) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let (dims, keepdim) = match overload(lx.op) {
        "" | "all_out" => (None, false),
        "dims" | "dims_out" => (args.opt_ints(1)?, args.bool_or(2, false)?),
        _ => (Some(vec![args.int(1)?]), args.bool_or(2, false)?),
    };
    let dims = reduce_dims(lx, dims, t.shape.len(), false)?;
    let out = if t.dtype == DType::U8 { DType::U8 } else { DType::Bool };
    let x = lx.cast(t.value, DType::Bool)?;
    let r = if is_all { lx.b.reduce_and(x, &dims)? } else { lx.b.reduce_or(x, &dims)? };
    let r = lx.cast(r, out)?;
    Ok(vec![keep(lx, r, &t.shape, &dims, keepdim)?])
}

/// count_nonzero(self, dim?) / .dim_IntList(self, dims) -> int64
fn count_nonzero(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let dims = match args.get(1) {
        crate::args::Arg::None => None,
        _ => Some(args.ints(1)?),
    };
    let dims = reduce_dims(lx, dims, t.shape.len(), true)?;
    let nz = lx.cast(t.value, DType::Bool)?;
    let nz = lx.cast(nz, DType::I64)?;
    Ok(vec![lx.b.reduce_sum(nz, &dims)?])
}

/// The p-norm of `x` over `dims`, computed in `out`'s accumulation dtype.
fn vector_norm(lx: &mut Lower, x: Value, p: f64, dims: &[i64], out: DType) -> Result<Value> {
    let x = lx.cast(x, out)?;
    let x = lx.cast(x, acc(out))?;
    let a = lx.b.abs(x)?;
    let r = if p == f64::INFINITY {
        reduce_extreme(lx, a, dims, true)?
    } else if p == f64::NEG_INFINITY {
        reduce_extreme(lx, a, dims, false)?
    } else if p == 0.0 {
        let nz = lx.cast(a, DType::Bool)?;
        let nz = lx.cast(nz, acc(out))?;
        lx.b.reduce_sum(nz, dims)?
    } else if p == 1.0 {
        lx.b.reduce_sum(a, dims)?
    } else if p == 2.0 {
        let sq = lx.b.mul(a, a)?;
        let s = lx.b.reduce_sum(sq, dims)?;
        lx.b.sqrt(s)?
    } else {
        let pv = lx.full_like(a, p)?;
        let ap = lx.b.pow(a, pv)?;
        let s = lx.b.reduce_sum(ap, dims)?;
        let inv = lx.full_like(s, 1.0 / p)?;
        lx.b.pow(s, inv)?
    };
    lx.cast(r, out)
}

fn norm_common(
    lx: &mut Lower,
    args: &Args,
    p: f64,
    dims: Option<Vec<i64>>,
    keepdim: bool,
    dtype: Option<DType>,
    what: &str,
) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    if !t.dtype.is_float() {
        bail!(Runtime, "{}: {what}. Got {}", lx.op, dtypes::name(t.dtype));
    }
    let out = dtype.unwrap_or(t.dtype);
    let dims = reduce_dims(lx, dims, t.shape.len(), true)?;
    if p < 0.0 && t.shape.contains(&0) {
        bail!(Runtime, "{}: linalg.vector_norm cannot compute the {p} norm on an empty tensor because the operation does not have an identity", lx.op);
    }
    let r = vector_norm(lx, t.value, p, &dims, out)?;
    Ok(vec![keep(lx, r, &t.shape, &dims, keepdim)?])
}

fn p_of(args: &Args, i: usize) -> Result<f64> {
    match args.get(i) {
        crate::args::Arg::None => Ok(2.0),
        _ => args.float(i),
    }
}

/// norm.Scalar / .ScalarOpt_dim / .ScalarOpt_dim_dtype / .ScalarOpt_dtype (+ outs).
fn norm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let p = p_of(args, 1)?;
    let what = "norm(): input dtype should be either floating point or complex";
    match overload(lx.op) {
        "Scalar" | "Scalar_out" | "" => norm_common(lx, args, p, None, false, None, what),
        "ScalarOpt_dtype" | "ScalarOpt_dtype_out" => {
            let d = args.opt_dtype(2)?;
            norm_common(lx, args, p, None, false, d, what)
        }
        "ScalarOpt_dim_dtype" | "dtype_out" => {
            let d = args.opt_dtype(4)?;
            norm_common(lx, args, p, args.opt_ints(2)?, args.bool_or(3, false)?, d, what)
        }
        _ => norm_common(lx, args, p, args.opt_ints(2)?, args.bool_or(3, false)?, None, what),
    }
}

/// linalg_vector_norm(self, ord=2, dim?, keepdim, *, dtype?)
fn linalg_vector_norm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let p = p_of(args, 1)?;
    let d = args.opt_dtype(4)?;
    let what = "linalg.vector_norm: Expected a floating point or complex tensor as input";
    norm_common(lx, args, p, args.opt_ints(2)?, args.bool_or(3, false)?, d, what)
}

/// Inclusive scan along one dim with a reduce_window (window = the whole dim,
/// padded in front), summing or multiplying.
fn scan(lx: &mut Lower, args: &Args, product: bool) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let dim = norm_dim(lx.op, args.int(1)?, t.shape.len())?;
    let out = args.opt_dtype(2)?.unwrap_or(if t.dtype.is_float() { t.dtype } else { DType::I64 });
    let x = lx.cast(t.value, out)?;
    if t.shape.is_empty() || t.shape[dim] <= 1 || t.shape.contains(&0) {
        return Ok(vec![x]);
    }
    let a = acc(out);
    let x = lx.cast(x, a)?;
    let n = t.shape[dim];
    let rank = t.shape.len();
    let mut window = vec![1; rank];
    window[dim] = n;
    let mut padding = vec![(0, 0); rank];
    padding[dim] = (n - 1, 0);
    let init = lx.b.constant_f64(a, if product { 1.0 } else { 0.0 });
    let r = lx.b.reduce_window(&[x], &[init], &window, &[], &[], &[], &padding, |b, l, r| {
        Ok(vec![if product { b.mul(l[0], r[0])? } else { b.add(l[0], r[0])? }])
    })?[0];
    Ok(vec![lx.cast(r, out)?])
}
