//! native_layer_norm and its backward.
use stablehlo::Value;

use super::norm::{moments, norm_dx, normalize, param, rsqrt_eps, stats_dtype};
use super::{along, float_only};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::reduce::acc;

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
pub(super) fn native_layer_norm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
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
pub(super) fn native_layer_norm_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    lx.honor_output_mask(args, 7);
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
