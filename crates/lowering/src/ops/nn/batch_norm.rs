//! native_batch_norm (and _native_batch_norm_legit, .no_stats and
//! _no_training), with the running-stat updates, and its backward.
use stablehlo::Value;

use super::norm::{moments, norm_dx, normalize, param, rsqrt_eps, stats_dtype};
use super::{float_only, k};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::reduce::{acc, overload};

/// native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
/// and _native_batch_norm_legit(.no_stats) / _no_training: (out, save_mean, save_invstd
/// [, new running_mean, new running_var where given and mutated]).
pub(super) fn native_batch_norm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
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
pub(super) fn native_batch_norm_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    lx.honor_output_mask(args, 9);
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
