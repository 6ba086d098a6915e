//! var/std (and var_mean/std_mean) over all their overloads.
use stablehlo::Value;

use super::{acc, count, keep, overload, reduce_dims, unreduce};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

/// var/std(/_mean) over all their overloads. Returns (var or std, mean).
pub(super) fn moments(lx: &mut Lower, args: &Args, sqrt: bool) -> Result<(Value, Value)> {
    let t = args.tensor(0)?.clone();
    if !t.dtype.is_float() && !t.dtype.is_complex() {
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
    // Complex numbers: squared magnitudes |d|², so the variance is real.
    let (d2, a) = match a.complex_part() {
        Some(part) => {
            let (re, im) = (lx.b.real(d)?, lx.b.imag(d)?);
            let (re2, im2) = (lx.b.mul(re, re)?, lx.b.mul(im, im)?);
            (lx.b.add(re2, im2)?, part)
        }
        None => (lx.b.mul(d, d)?, a),
    };
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
    let v = lx.cast(v, t.dtype.complex_part().unwrap_or(t.dtype))?;
    let mean = lx.cast(mean, t.dtype)?;
    Ok((keep(lx, v, &t.shape, &dims, keepdim)?, keep(lx, mean, &t.shape, &dims, keepdim)?))
}
