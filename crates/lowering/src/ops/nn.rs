//! Neural-network ops and the backward ops autograd calls for them: softmax /
//! log_softmax, nll_loss (1d and 2d), mse_loss, layer and batch norm,
//! embedding's dense backward, dropout.
//!
//! Half-precision inputs compute in float32 and round once at the end.
use stablehlo::{CompareDir, DType, RngAlgorithm, ScatterDims, Value};

use crate::args::{norm_dim, Arg, Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::dtypes;
use crate::error::Result;
use crate::op;
use crate::ops::elementwise::prepare;
use crate::ops::reduce::{acc, overload, reduce_extreme, unreduce};
use crate::promote::result_type;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("_softmax", |lx, a| softmax_impl(lx, a, false)),
    op!("_log_softmax", |lx, a| softmax_impl(lx, a, true)),
    op!("_softmax_backward_data", |lx, a| softmax_backward_impl(lx, a, false)),
    op!("_log_softmax_backward_data", |lx, a| softmax_backward_impl(lx, a, true)),
    op!("nll_loss_forward", nll_loss_forward),
    op!("nll_loss2d_forward", nll_loss_forward),
    op!("nll_loss_backward", nll_loss_backward),
    op!("nll_loss2d_backward", nll_loss_backward),
    op!("mse_loss", mse_loss),
    op!("mse_loss_backward", mse_loss_backward),
    op!("native_layer_norm", native_layer_norm),
    op!("native_layer_norm_backward", native_layer_norm_backward),
    op!("native_batch_norm", native_batch_norm),
    op!("_native_batch_norm_legit", native_batch_norm),
    op!("_native_batch_norm_legit_no_training", native_batch_norm),
    op!("native_batch_norm_backward", native_batch_norm_backward),
    op!("embedding_dense_backward", embedding_dense_backward),
    op!("native_dropout", native_dropout),
    op!("native_dropout_backward", native_dropout_backward),
];

pub(super) fn float_only(lx: &Lower, d: DType) -> Result<()> {
    if !d.is_float() {
        bail!(NotImplemented, "{}: not implemented for '{}'", lx.op, dtypes::name(d));
    }
    Ok(())
}

/// A constant like `v` holding `x`.
fn k(lx: &mut Lower, v: Value, x: f64) -> Result<Value> {
    lx.full_like(v, x)
}

/// Sum over `dims`, broadcast back to the full shape.
fn sum_back(lx: &mut Lower, v: Value, dims: &[i64]) -> Result<Value> {
    let shape = lx.shape(v);
    let s = lx.b.reduce_sum(v, dims)?;
    unreduce(lx, s, &shape, dims)
}

/// Mean over `dims`, broadcast back to the full shape.
fn mean_back(lx: &mut Lower, v: Value, dims: &[i64]) -> Result<Value> {
    let shape = lx.shape(v);
    let n: i64 = dims.iter().map(|&d| shape[d as usize]).product();
    let s = sum_back(lx, v, dims)?;
    let nv = k(lx, s, n as f64)?;
    Ok(lx.b.div(s, nv)?)
}

/// `v` (one value per element of the dims not in `dims`) broadcast to `shape`.
pub(super) fn along(lx: &mut Lower, v: Value, shape: &[i64], dims: &[i64]) -> Result<Value> {
    let n = lx.shape(v).iter().product::<i64>();
    let kept: Vec<i64> = (0..shape.len() as i64).filter(|d| !dims.contains(d)).collect();
    let kept_shape: Vec<i64> = kept.iter().map(|&d| shape[d as usize]).collect();
    debug_assert_eq!(n, kept_shape.iter().product::<i64>());
    let v = lx.b.reshape(v, &kept_shape)?;
    unreduce(lx, v, shape, dims)
}

// ----- softmax -----

/// (value as acc dtype in at least rank 1, dim, original shape).
fn softmax_input(lx: &mut Lower, t: &TensorArg, dim: i64) -> Result<(Value, i64)> {
    float_only(lx, t.dtype)?;
    let d = norm_dim(lx.op, dim, t.shape.len())? as i64;
    let v = if t.shape.is_empty() { lx.b.reshape(t.value, &[1])? } else { t.value };
    Ok((lx.cast(v, acc(t.dtype))?, d))
}

fn softmax_impl(lx: &mut Lower, args: &Args, log: bool) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let out = if args.bool_or(2, false)? { DType::F32 } else { t.dtype };
    let (x, d) = softmax_input(lx, &t, args.int(1)?)?;
    let shape = lx.shape(x);
    let m = reduce_extreme(lx, x, &[d], true)?;
    let mb = unreduce(lx, m, &shape, &[d])?;
    let z = lx.b.sub(x, mb)?;
    let e = lx.b.exp(z)?;
    let s = sum_back(lx, e, &[d])?;
    let r = if log {
        let l = lx.b.log(s)?;
        lx.b.sub(z, l)?
    } else {
        lx.b.div(e, s)?
    };
    let r = lx.cast(r, out)?;
    Ok(vec![lx.b.reshape(r, &t.shape)?])
}

/// (grad_output, output, dim, input_dtype)
fn softmax_backward_impl(lx: &mut Lower, args: &Args, log: bool) -> Result<Vec<Value>> {
    let g = args.tensor(0)?.clone();
    let y = args.tensor(1)?.clone();
    // As PyTorch's meta function: only float grads of a half_to_float
    // softmax (input_dtype float16) come back as float16.
    let out = match args.opt_dtype(3)? {
        Some(DType::F16) if g.dtype == DType::F32 => DType::F16,
        _ => g.dtype,
    };
    let (gv, d) = softmax_input(lx, &g, args.int(2)?)?;
    let (yv, _) = softmax_input(lx, &y, args.int(2)?)?;
    let yv = lx.cast(yv, lx.dtype(gv))?;
    let r = if log {
        let s = sum_back(lx, gv, &[d])?;
        let p = lx.b.exp(yv)?;
        let ps = lx.b.mul(p, s)?;
        lx.b.sub(gv, ps)?
    } else {
        let gy = lx.b.mul(gv, yv)?;
        let s = sum_back(lx, gy, &[d])?;
        let diff = lx.b.sub(gv, s)?;
        lx.b.mul(yv, diff)?
    };
    let r = lx.cast(r, out)?;
    Ok(vec![lx.b.reshape(r, &g.shape)?])
}

// ----- nll_loss -----

/// What the nll_loss forward and backward share.
struct Nll {
    /// Class dimension of the input.
    cdim: i64,
    /// Input shape (rank >= 1).
    shape: Vec<i64>,
    /// i1, input shape: the element holds the target class (not ignored).
    onehot: Value,
    /// Per-target weight in the acc dtype (0 where ignored), target shape.
    wt: Value,
    /// Per-target weight broadcast to the input shape.
    wb: Value,
    acc: DType,
}

/// (self, target, weight?, reduction, ignore_index, ...)
fn nll_setup(lx: &mut Lower, args: &Args, first: usize) -> Result<Nll> {
    let x = args.tensor(first)?.clone();
    let t = args.tensor(first + 1)?.clone();
    let w = args.opt_tensor(first + 2).cloned();
    let ignore = args.int(first + 4)?;
    float_only(lx, x.dtype)?;
    let rank = x.shape.len();
    if rank == 0 {
        bail!(Value, "{}: input tensor should be 1D or 2D (or ND for nll_loss2d), got 0D", lx.op);
    }
    let cdim = if rank == 1 { 0 } else { 1 };
    let c = x.shape[cdim];
    let mut tshape = x.shape.clone();
    tshape.remove(cdim);
    if t.shape != tshape {
        bail!(
            Value,
            "{}: Expected input batch_size ({}) to match target batch_size ({}) (input {:?}, target {:?})",
            lx.op,
            x.shape[0],
            t.shape.first().copied().unwrap_or(1),
            x.shape,
            t.shape
        );
    }
    if let Some(w) = &w {
        if w.shape != [c] {
            bail!(Runtime, "{}: weight tensor should be defined either for all {c} classes or no classes but got weight tensor of shape: {:?}", lx.op, w.shape);
        }
    }
    let a = acc(x.dtype);
    let tgt = lx.cast(t.value, DType::I64)?;
    let ig = lx.b.splat_i64(DType::I64, ignore, &tshape)?;
    let valid = lx.b.compare(tgt, ig, CompareDir::Ne)?;
    let zero = lx.b.splat_i64(DType::I64, 0, &tshape)?;
    let cc = lx.b.splat_i64(DType::I64, c, &tshape)?;
    let lo = lx.b.compare(tgt, zero, CompareDir::Lt)?;
    let hi = lx.b.compare(tgt, cc, CompareDir::Ge)?;
    let oob = lx.b.or(lo, hi)?;
    let bad = lx.b.and(oob, valid)?;
    let all: Vec<i64> = (0..tshape.len() as i64).collect();
    let bad = lx.b.reduce_or(bad, &all)?;
    lx.check(bad, format!("{}: Target is out of bounds (number of classes {c}).", lx.op));
    let cdim = cdim as i64;
    let cls = lx.b.iota(DType::I64, &x.shape, cdim)?;
    let tb = along(lx, tgt, &x.shape, &[cdim])?;
    let vb = along(lx, valid, &x.shape, &[cdim])?;
    let hit = lx.b.compare(cls, tb, CompareDir::Eq)?;
    let onehot = lx.b.and(hit, vb)?;
    let wfull = match &w {
        Some(w) => {
            let wv = lx.cast(w.value, a)?;
            lx.b.broadcast_in_dim(wv, &x.shape, &[cdim])?
        }
        None => lx.full(a, 1.0, &x.shape)?,
    };
    let zeros = lx.full(a, 0.0, &x.shape)?;
    let wsel = lx.b.select(onehot, wfull, zeros)?;
    let wt = lx.b.reduce_sum(wsel, &[cdim])?;
    let wb = unreduce(lx, wt, &x.shape, &[cdim])?;
    Ok(Nll { cdim, shape: x.shape.clone(), onehot, wt, wb, acc: a })
}

/// nll_loss_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight)
fn nll_loss_forward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let dt = args.tensor(0)?.dtype;
    let n = nll_setup(lx, args, 0)?;
    let x = lx.cast(args.tensor(0)?.value, n.acc)?;
    let zeros = lx.full(n.acc, 0.0, &n.shape)?;
    let picked = lx.b.select(n.onehot, x, zeros)?;
    let picked = lx.b.reduce_sum(picked, &[n.cdim])?;
    let wx = lx.b.mul(picked, n.wt)?;
    let loss = lx.b.neg(wx)?;
    let all: Vec<i64> = (0..lx.shape(loss).len() as i64).collect();
    let (out, total) = match args.int(3)? {
        0 => (loss, lx.b.constant_f64(n.acc, 0.0)),
        r => {
            let s = lx.b.reduce_sum(loss, &all)?;
            let tw = lx.b.reduce_sum(n.wt, &all)?;
            (if r == 1 { lx.b.div(s, tw)? } else { s }, tw)
        }
    };
    Ok(vec![lx.cast(out, dt)?, lx.cast(total, dt)?])
}

/// nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
fn nll_loss_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let dt = args.tensor(1)?.dtype;
    let n = nll_setup(lx, args, 1)?;
    let g = lx.cast(args.tensor(0)?.value, n.acc)?;
    let reduction = args.int(4)?;
    let g = match reduction {
        0 => along(lx, g, &n.shape, &[n.cdim])?,
        r => {
            let g = lx.b.reshape(g, &[])?;
            let g = if r == 1 {
                let tw = lx.cast(args.tensor(6)?.value, n.acc)?;
                let tw = lx.b.reshape(tw, &[])?;
                lx.b.div(g, tw)?
            } else {
                g
            };
            lx.expand(g, &n.shape)?
        }
    };
    let gw = lx.b.mul(g, n.wb)?;
    let gw = lx.b.neg(gw)?;
    let zeros = lx.full(n.acc, 0.0, &n.shape)?;
    let r = lx.b.select(n.onehot, gw, zeros)?;
    Ok(vec![lx.cast(r, dt)?])
}

// ----- mse_loss -----

fn reduction_of(lx: &mut Lower, v: Value, reduction: i64) -> Result<Value> {
    let all: Vec<i64> = (0..lx.shape(v).len() as i64).collect();
    Ok(match reduction {
        0 => v,
        1 => {
            let n: i64 = lx.shape(v).iter().product();
            let s = lx.b.reduce_sum(v, &all)?;
            let nv = k(lx, s, n as f64)?;
            lx.b.div(s, nv)?
        }
        _ => lx.b.reduce_sum(v, &all)?,
    })
}

/// mse_loss(self, target, reduction=mean)
fn mse_loss(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let a = args.operand(0)?;
    let b = args.operand(1)?;
    let dt = result_type(&[&a, &b]);
    float_only(lx, dt)?;
    let v = prepare(lx, &[&a, &b], dt)?;
    let x = lx.cast(v[0], acc(dt))?;
    let y = lx.cast(v[1], acc(dt))?;
    let d = lx.b.sub(x, y)?;
    let d2 = lx.b.mul(d, d)?;
    let r = reduction_of(lx, d2, args.int_or(2, 1)?)?;
    Ok(vec![lx.cast(r, dt)?])
}

/// mse_loss_backward(grad_output, self, target, reduction)
fn mse_loss_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let g = args.operand(0)?;
    let a = args.operand(1)?;
    let b = args.operand(2)?;
    let dt = result_type(&[&g, &a, &b]);
    float_only(lx, dt)?;
    let v = prepare(lx, &[&g, &a, &b], dt)?;
    let ac = acc(dt);
    let (g, x, y) = (lx.cast(v[0], ac)?, lx.cast(v[1], ac)?, lx.cast(v[2], ac)?);
    let d = lx.b.sub(x, y)?;
    let n: i64 = lx.shape(d).iter().product();
    let scale = if args.int(3)? == 1 { 2.0 / n as f64 } else { 2.0 };
    let s = k(lx, d, scale)?;
    let d = lx.b.mul(d, s)?;
    let r = lx.b.mul(d, g)?;
    Ok(vec![lx.cast(r, dt)?])
}

// ----- layer norm, batch norm -----

/// The dtype of a norm's saved statistics: the acc dtype when parameters of
/// another dtype make it a mixed-precision norm, else the input's.
fn stats_dtype(x: DType, params: &[Option<&TensorArg>]) -> DType {
    if params.iter().flatten().any(|p| p.dtype != x) {
        acc(x)
    } else {
        x
    }
}

/// A parameter spanning `dims` of `shape`, broadcast to `shape` in dtype `a`.
fn param(lx: &mut Lower, p: Option<&TensorArg>, shape: &[i64], dims: &[i64], a: DType) -> Result<Option<Value>> {
    let Some(p) = p else { return Ok(None) };
    let v = lx.cast(p.value, a)?;
    let want: Vec<i64> = dims.iter().map(|&d| shape[d as usize]).collect();
    let v = lx.b.reshape(v, &want)?;
    Ok(Some(lx.b.broadcast_in_dim(v, shape, dims)?))
}

pub(super) fn rsqrt_eps(lx: &mut Lower, v: Value, eps: f64) -> Result<Value> {
    let e = k(lx, v, eps)?;
    let ve = lx.b.add(v, e)?;
    Ok(lx.b.rsqrt(ve)?)
}

/// (mean, biased variance), both broadcast back over `dims`.
pub(super) fn moments(lx: &mut Lower, x: Value, dims: &[i64]) -> Result<(Value, Value)> {
    let m = mean_back(lx, x, dims)?;
    let d = lx.b.sub(x, m)?;
    let d2 = lx.b.mul(d, d)?;
    Ok((m, mean_back(lx, d2, dims)?))
}

/// (x - mean) * rstd * w + b, with w/b spanning `pdims`.
#[allow(clippy::too_many_arguments)]
fn normalize(
    lx: &mut Lower,
    x: Value,
    mean: Value,
    rstd: Value,
    w: Option<&TensorArg>,
    b: Option<&TensorArg>,
    pdims: &[i64],
) -> Result<Value> {
    let (shape, a) = (lx.shape(x), lx.dtype(x));
    let d = lx.b.sub(x, mean)?;
    let mut y = lx.b.mul(d, rstd)?;
    if let Some(wv) = param(lx, w, &shape, pdims, a)? {
        y = lx.b.mul(y, wv)?;
    }
    if let Some(bv) = param(lx, b, &shape, pdims, a)? {
        y = lx.b.add(y, bv)?;
    }
    Ok(y)
}

/// The input gradient of a norm over `dims` with saved statistics:
/// `scale * (g - mean(g) - xhat * mean(g * xhat))`.
pub(super) fn norm_dx(lx: &mut Lower, g: Value, xhat: Value, scale: Value, dims: &[i64]) -> Result<Value> {
    let mg = mean_back(lx, g, dims)?;
    let gx = lx.b.mul(g, xhat)?;
    let mgx = mean_back(lx, gx, dims)?;
    let t1 = lx.b.sub(g, mg)?;
    let t2 = lx.b.mul(xhat, mgx)?;
    let t3 = lx.b.sub(t1, t2)?;
    Ok(lx.b.mul(scale, t3)?)
}

fn ln_dims(lx: &Lower, shape: &[i64], ns: &[i64]) -> Result<(usize, Vec<i64>)> {
    let rank = shape.len();
    if ns.is_empty() || ns.len() > rank || shape[rank - ns.len()..] != *ns {
        let want: Vec<String> = ns.iter().map(|d| d.to_string()).collect();
        bail!(
            Runtime,
            "{}: Given normalized_shape={ns:?}, expected input with shape [*, {}], but got input of size{shape:?}",
            lx.op,
            want.join(", ")
        );
    }
    let axis = rank - ns.len();
    Ok((axis, (axis as i64..rank as i64).collect()))
}

/// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
fn native_layer_norm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    float_only(lx, t.dtype)?;
    let (w, b) = (args.opt_tensor(2), args.opt_tensor(3));
    let (axis, dims) = ln_dims(lx, &t.shape, &args.ints(1)?)?;
    let x = lx.cast(t.value, acc(t.dtype))?;
    let (mean, var) = moments(lx, x, &dims)?;
    let rstd = rsqrt_eps(lx, var, args.float(4)?)?;
    let y = normalize(lx, x, mean, rstd, w, b, &dims)?;
    let sd = stats_dtype(t.dtype, &[w, b]);
    let mut stat_shape = t.shape[..axis].to_vec();
    stat_shape.resize(t.shape.len(), 1);
    let mut out = vec![lx.cast(y, t.dtype)?];
    for s in [mean, rstd] {
        let s = lx.b.slice(s, &vec![0; t.shape.len()], &stat_shape, &[])?;
        out.push(lx.cast(s, sd)?);
    }
    Ok(out)
}

/// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
/// weight?, bias?, output_mask) -> (grad_input, grad_weight, grad_bias)
fn native_layer_norm_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(1)?.clone();
    let (w, b) = (args.opt_tensor(5), args.opt_tensor(6));
    let (axis, dims) = ln_dims(lx, &t.shape, &args.ints(2)?)?;
    let a = acc(t.dtype);
    let x = lx.cast(t.value, a)?;
    let g = lx.cast(args.tensor(0)?.value, a)?;
    let mut st = vec![];
    for i in [3, 4] {
        let v = lx.cast(args.tensor(i)?.value, a)?;
        st.push(along(lx, v, &t.shape, &dims)?);
    }
    let xc = lx.b.sub(x, st[0])?;
    let xhat = lx.b.mul(xc, st[1])?;
    let gw = match param(lx, w, &t.shape, &dims, a)? {
        Some(wv) => lx.b.mul(g, wv)?,
        None => g,
    };
    let dx = norm_dx(lx, gw, xhat, st[1], &dims)?;
    let outer: Vec<i64> = (0..axis as i64).collect();
    let gxh = lx.b.mul(g, xhat)?;
    let dw = lx.b.reduce_sum(gxh, &outer)?;
    let db = lx.b.reduce_sum(g, &outer)?;
    let wdt = w.map(|w| w.dtype).unwrap_or(t.dtype);
    let bdt = b.map(|b| b.dtype).unwrap_or(wdt);
    Ok(vec![lx.cast(dx, t.dtype)?, lx.cast(dw, wdt)?, lx.cast(db, bdt)?])
}

/// native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
/// and _native_batch_norm_legit(.no_stats) / _no_training: (out, save_mean, save_invstd
/// [, new running_mean, new running_var where given and mutated]).
fn native_batch_norm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let name = lx.op.strip_prefix("aten::").unwrap_or(lx.op);
    let no_training = name.starts_with("_native_batch_norm_legit_no_training");
    let no_stats = overload(lx.op).starts_with("no_stats");
    // _native_batch_norm_legit declares running_mean/var mutated, so the engine
    // takes their new values after the returns. native_batch_norm mutates them
    // too (on CPU) without saying so in its schema; the values are produced
    // for it as well, for an engine that writes them back.
    let updates = !no_training && !no_stats;
    let t = args.tensor(0)?.clone();
    float_only(lx, t.dtype)?;
    let (w, b) = (args.opt_tensor(1), args.opt_tensor(2));
    let (rm, rv, i) = if no_stats { (None, None, 3) } else { (args.opt_tensor(3), args.opt_tensor(4), 5) };
    let training = !no_training && args.bool_or(i, false)?;
    let (momentum, eps) = (args.float(i + 1)?, args.float(i + 2)?);
    if t.shape.len() < 2 {
        let r = t.shape.len().max(1) as i64;
        bail!(Index, "{}: Dimension out of range (expected to be in range of [{}, {}], but got 1)", lx.op, -r, r - 1);
    }
    let dims: Vec<i64> = (0..t.shape.len() as i64).filter(|&d| d != 1).collect();
    let a = acc(t.dtype);
    let x = lx.cast(t.value, a)?;
    let c = t.shape[1];
    let (mean, var) = if training {
        moments(lx, x, &dims)?
    } else {
        let (Some(m), Some(v)) = (param(lx, rm, &t.shape, &[1], a)?, param(lx, rv, &t.shape, &[1], a)?) else {
            bail!(Runtime, "{}: running_mean and running_var must be defined in evaluation mode", lx.op);
        };
        (m, v)
    };
    let invstd = rsqrt_eps(lx, var, eps)?;
    let y = normalize(lx, x, mean, invstd, w, b, &[1])?;
    let mut limit = vec![1; t.shape.len()];
    limit[1] = c;
    let per_channel = |lx: &mut Lower, v: Value| -> Result<Value> {
        let s = lx.b.slice(v, &vec![0; limit.len()], &limit, &[])?;
        Ok(lx.b.reshape(s, &[c])?)
    };
    let mut out = vec![lx.cast(y, t.dtype)?];
    if training {
        let sd = stats_dtype(t.dtype, &[w, b, rm, rv]);
        for s in [mean, invstd] {
            let s = per_channel(lx, s)?;
            out.push(lx.cast(s, sd)?);
        }
    } else {
        let sd = rm.map(|r| r.dtype).unwrap_or(a);
        out.push(lx.full(sd, 0.0, &[0])?);
        out.push(lx.full(sd, 0.0, &[0])?);
    }
    if updates {
        // New running stats: (1 - momentum) * old + momentum * batch stat
        // (the variance unbiased); unchanged in evaluation mode.
        let n: i64 = dims.iter().map(|&d| t.shape[d as usize]).product();
        for (r, stat, f) in [(rm, mean, 1.0), (rv, var, n as f64 / (n - 1).max(1) as f64)] {
            let Some(r) = r else { continue };
            if !training {
                out.push(r.value);
                continue;
            }
            let s = per_channel(lx, stat)?;
            let old = lx.cast(r.value, a)?;
            let (mf, m1) = (k(lx, s, momentum * f)?, k(lx, s, 1.0 - momentum)?);
            let o = lx.b.mul(old, m1)?;
            let nw = lx.b.mul(s, mf)?;
            let v = lx.b.add(o, nw)?;
            out.push(lx.cast(v, r.dtype)?);
        }
    }
    Ok(out)
}

/// native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?,
/// save_mean?, save_invstd?, train, eps, output_mask)
fn native_batch_norm_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(1)?.clone();
    let w = args.opt_tensor(2);
    let train = args.bool_or(7, true)?;
    let a = acc(t.dtype);
    let dims: Vec<i64> = (0..t.shape.len() as i64).filter(|&d| d != 1).collect();
    let x = lx.cast(t.value, a)?;
    let g = lx.cast(args.tensor(0)?.value, a)?;
    let (mi, si) = if train { (5, 6) } else { (3, 4) };
    let m = param(lx, args.opt_tensor(mi), &t.shape, &[1], a)?;
    let s = param(lx, args.opt_tensor(si), &t.shape, &[1], a)?;
    let (Some(mean), Some(s)) = (m, s) else {
        bail!(Runtime, "{}: the saved (training) or running (evaluation) statistics are undefined", lx.op);
    };
    let invstd = if train { s } else { rsqrt_eps(lx, s, args.float(8)?)? };
    let xc = lx.b.sub(x, mean)?;
    let xhat = lx.b.mul(xc, invstd)?;
    let scale = match param(lx, w, &t.shape, &[1], a)? {
        Some(wv) => lx.b.mul(wv, invstd)?,
        None => invstd,
    };
    let dx = if train { norm_dx(lx, g, xhat, scale, &dims)? } else { lx.b.mul(g, scale)? };
    let gxh = lx.b.mul(g, xhat)?;
    let dw = lx.b.reduce_sum(gxh, &dims)?;
    let db = lx.b.reduce_sum(g, &dims)?;
    let pdt = w.map(|w| w.dtype).unwrap_or(t.dtype);
    Ok(vec![lx.cast(dx, t.dtype)?, lx.cast(dw, pdt)?, lx.cast(db, pdt)?])
}

// ----- embedding, dropout -----

/// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
fn embedding_dense_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let g = args.tensor(0)?.clone();
    let idx = args.tensor(1)?.clone();
    let v = args.int(2)?;
    let pad = args.int(3)?;
    let by_freq = args.bool_or(4, false)?;
    let n: i64 = idx.shape.iter().product();
    let d = *g.shape.last().unwrap_or(&1);
    if g.shape.iter().product::<i64>() != n * d {
        bail!(Runtime, "{}: grad_output {:?} does not match indices {:?}", lx.op, g.shape, idx.shape);
    }
    let a = acc(g.dtype);
    let gv = lx.cast(g.value, a)?;
    let gv = lx.b.reshape(gv, &[n, d])?;
    let iv = lx.cast(idx.value, DType::I64)?;
    let iv = lx.b.reshape(iv, &[n])?;
    let keep = if pad >= 0 {
        let p = lx.b.splat_i64(DType::I64, pad, &[n])?;
        let ne = lx.b.compare(iv, p, CompareDir::Ne)?;
        let keep = lx.b.broadcast_in_dim(ne, &[n, d], &[0])?;
        let z = lx.full(a, 0.0, &[n, d])?;
        lx.b.select(keep, gv, z)?
    } else {
        gv
    };
    let iv2 = lx.b.reshape(iv, &[n, 1])?;
    let add = |b: &mut stablehlo::Builder, cur: &[Value], upd: &[Value]| Ok(vec![b.add(cur[0], upd[0])?]);
    let dims = ScatterDims {
        update_window_dims: vec![1],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    let zeros = lx.full(a, 0.0, &[v, d])?;
    let mut out = lx.b.scatter(zeros, iv2, keep, &dims, add)?;
    if by_freq {
        let ones = lx.full(a, 1.0, &[n])?;
        let zc = lx.full(a, 0.0, &[v])?;
        let cdims = ScatterDims {
            update_window_dims: vec![],
            inserted_window_dims: vec![0],
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: 1,
            ..Default::default()
        };
        let counts = lx.b.scatter(zc, iv2, ones, &cdims, add)?;
        let one = lx.full(a, 1.0, &[v])?;
        let counts = lx.b.max(counts, one)?;
        let cb = lx.b.broadcast_in_dim(counts, &[v, d], &[0])?;
        out = lx.b.div(out, cb)?;
    }
    Ok(vec![lx.cast(out, g.dtype)?])
}

/// native_dropout(input, p, train?) -> (output, bool mask). Keeps each element
/// with probability 1-p (uniforms from Threefry bits) and scales it by 1/(1-p).
fn native_dropout(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let p = args.float(1)?;
    let train = match args.get(2) {
        Arg::None => true,
        _ => args.bool_or(2, true)?,
    };
    let n: i64 = t.shape.iter().product();
    if !train || n == 0 {
        let ones = lx.full(DType::Bool, 1.0, &t.shape)?;
        return Ok(vec![t.value, ones]);
    }
    if !t.dtype.is_float() {
        bail!(Runtime, "{}: result type Float can't be cast to the desired output type {}", lx.op, dtypes::name(t.dtype));
    }
    let state = lx.rng_state(n as u64);
    let (_, bits) = lx.b.rng_bit_generator(RngAlgorithm::ThreeFry, state, &t.shape, DType::U32)?;
    let eight = lx.b.splat_i64(DType::U32, 8, &t.shape)?;
    let top = lx.b.shift_right_logical(bits, eight)?;
    let u = lx.b.convert(top, DType::F32)?;
    let keep_below = lx.full(DType::F32, (1.0 - p) * (1u64 << 24) as f64, &t.shape)?;
    let mask = lx.b.compare(u, keep_below, CompareDir::Lt)?;
    let scale = if p >= 1.0 { 0.0 } else { 1.0 / (1.0 - p) };
    let mf = lx.cast(mask, t.dtype)?;
    let y = lx.b.mul(t.value, mf)?;
    let s = k(lx, y, scale)?;
    Ok(vec![lx.b.mul(y, s)?, mask])
}

/// native_dropout_backward(grad_output, mask, scale)
fn native_dropout_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let g = args.tensor(0)?.clone();
    let m = args.tensor(1)?.clone();
    let mf = lx.cast(m.value, g.dtype)?;
    let mf = lx.expand(mf, &g.shape)?;
    let y = lx.b.mul(g.value, mf)?;
    let s = k(lx, y, args.float(2)?)?;
    Ok(vec![lx.b.mul(y, s)?])
}
