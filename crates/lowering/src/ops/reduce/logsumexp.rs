//! logsumexp, and the stable log-sum-exp value other ops reuse.
use stablehlo::{CompareDir, DType, Value};

use super::{acc, keep, reduce_dims, unreduce};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;

/// The shift: an infinite maximum becomes 0, so that x - m stays defined.
fn finite_or_zero(lx: &mut Lower, m: Value) -> Result<Value> {
    let am = lx.b.abs(m)?;
    let inf = lx.full_like(m, f64::INFINITY)?;
    let is_inf = lx.b.compare(am, inf, CompareDir::Eq)?;
    let zero = lx.full_like(m, 0.0)?;
    Ok(lx.b.select(is_inf, zero, m)?)
}

/// log(sum(exp(x - m))) + m over `dims` of an accumulation-dtype `x`, with
/// infinite maxima replaced by 0 (as PyTorch does). For complex `x` the
/// shift is the largest real part, as the CPU computes it.
pub(crate) fn logsumexp_value(lx: &mut Lower, x: Value, dims: &[i64]) -> Result<Value> {
    let shape = lx.shape(x);
    let complex = lx.dtype(x).is_complex();
    let re = if complex { lx.b.real(x)? } else { x };
    // Only for range: a NaN the plain max drops reaches the sum through x - m.
    let m = lx.b.reduce_max(re, dims)?;
    let m = finite_or_zero(lx, m)?;
    let m = if complex {
        let zero = lx.full_like(m, 0.0)?;
        lx.b.complex(m, zero)?
    } else {
        m
    };
    let mb = unreduce(lx, m, &shape, dims)?;
    let d = lx.b.sub(x, mb)?;
    let e = lx.b.exp(d)?;
    let s = lx.b.reduce_sum(e, dims)?;
    let l = lx.b.log(s)?;
    Ok(lx.b.add(l, m)?)
}

pub(super) fn logsumexp(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let out = if t.dtype.is_float() || t.dtype.is_complex() { t.dtype } else { DType::F32 };
    let dims = reduce_dims(lx, args.opt_ints(1)?, t.shape.len(), true)?;
    let keepdim = args.bool_or(2, false)?;
    let x = if out.is_complex() { t.value } else { lx.cast(t.value, acc(out))? };
    let r = logsumexp_value(lx, x, &dims)?;
    let r = lx.cast(r, out)?;
    Ok(vec![keep(lx, r, &t.shape, &dims, keepdim)?])
}
