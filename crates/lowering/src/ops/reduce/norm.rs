//! Vector norms: norm (all its overloads) and linalg_vector_norm.
use stablehlo::{DType, Value};

use super::{acc, keep, overload, reduce_dims, reduce_extreme};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::dtypes;
use crate::error::Result;

/// The p-norm of `x` over `dims`, computed in `out`'s accumulation dtype.
pub(crate) fn vector_norm(lx: &mut Lower, x: Value, p: f64, dims: &[i64], out: DType) -> Result<Value> {
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
    if !t.dtype.is_float() && !t.dtype.is_complex() {
        bail!(Runtime, "{}: {what}. Got {}", lx.op, dtypes::name(t.dtype));
    }
    // A complex tensor's norm is that of its magnitudes, in the part dtype.
    let part = |d: DType| d.complex_part().unwrap_or(d);
    let out = part(dtype.unwrap_or(t.dtype));
    let value = match dtype.filter(|d| d.is_complex()) {
        Some(d) => lx.cast(t.value, d)?,
        None => t.value,
    };
    let value = if lx.dtype(value).is_complex() { crate::ops::complex::abs(lx, value)? } else { value };
    let dims = reduce_dims(lx, dims, t.shape.len(), true)?;
    if p < 0.0 && t.shape.contains(&0) {
        bail!(Runtime, "{}: linalg.vector_norm cannot compute the {p} norm on an empty tensor because the operation does not have an identity", lx.op);
    }
    let r = vector_norm(lx, value, p, &dims, out)?;
    Ok(vec![keep(lx, r, &t.shape, &dims, keepdim)?])
}

fn p_of(args: &Args, i: usize) -> Result<f64> {
    match args.get(i) {
        crate::args::Arg::None => Ok(2.0),
        _ => args.float(i),
    }
}

/// norm.Scalar / .ScalarOpt_dim / .ScalarOpt_dim_dtype / .ScalarOpt_dtype (+ outs).
pub(super) fn norm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
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
pub(super) fn linalg_vector_norm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let p = p_of(args, 1)?;
    let d = args.opt_dtype(4)?;
    let what = "linalg.vector_norm: Expected a floating point or complex tensor as input";
    norm_common(lx, args, p, args.opt_ints(2)?, args.bool_or(3, false)?, d, what)
}
