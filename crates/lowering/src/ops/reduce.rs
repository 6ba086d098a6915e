//! Reductions: sum, mean, prod, max/min (+ indices), amax/amin, argmax/argmin,
//! var/std (+ mean), logsumexp, all/any, norms, cumsum/cumprod.
//!
//! One table row serves every overload of an op; the overload name (from
//! `lx.op`) says where the dims/keepdim/dtype arguments are. Half-precision
//! inputs accumulate in float32, like PyTorch's CPU kernels.
//!
//! - `reduce/sum.rs`: sum, nansum, prod, mean;
//! - `reduce/extrema.rs`: max/min, amax/amin, aminmax, argmax/argmin;
//! - `reduce/moments.rs`: var/std (+ mean);
//! - `reduce/logsumexp.rs`: logsumexp;
//! - `reduce/logical.rs`: all/any, count_nonzero;
//! - `reduce/norm.rs`: norm, linalg_vector_norm;
//! - `reduce/scan.rs`: cumsum/cumprod;
//! - here: the table and the dims/keepdim/dtype helpers the files (and
//!   other families) share.
use stablehlo::{DType, Value};

use crate::args::{norm_dim, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::dtypes;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

mod extrema;
mod logical;
mod logsumexp;
mod moments;
mod norm;
mod scan;
mod sum;

pub(crate) use extrema::{arg_reduce, reduce_extreme};
pub(crate) use norm::vector_norm;

pub const OPS: &[OpEntry] = &[
    op!("sum", |lx, a| sum::sum_like(lx, a, false, false)),
    op!("nansum", |lx, a| sum::sum_like(lx, a, true, false)),
    op!("mean", sum::mean),
    op!("prod", |lx, a| sum::sum_like(lx, a, false, true)),
    op!("max", |lx, a| extrema::max_min(lx, a, true)),
    op!("min", |lx, a| extrema::max_min(lx, a, false)),
    op!("amax", |lx, a| extrema::amax_amin(lx, a, true)),
    op!("amin", |lx, a| extrema::amax_amin(lx, a, false)),
    op!("aminmax", extrema::aminmax),
    op!("argmax", |lx, a| extrema::arg_max_min(lx, a, true)),
    op!("argmin", |lx, a| extrema::arg_max_min(lx, a, false)),
    op!("var", |lx, a| Ok(vec![moments::moments(lx, a, false)?.0])),
    op!("std", |lx, a| Ok(vec![moments::moments(lx, a, true)?.0])),
    op!("var_mean", |lx, a| moments::moments(lx, a, false).map(|(v, m)| vec![v, m])),
    op!("std_mean", |lx, a| moments::moments(lx, a, true).map(|(v, m)| vec![v, m])),
    op!("logsumexp", logsumexp::logsumexp),
    op!("all", |lx, a| logical::all_any(lx, a, true)),
    op!("any", |lx, a| logical::all_any(lx, a, false)),
    op!("count_nonzero", logical::count_nonzero),
    op!("norm", norm::norm, static),
    op!("linalg_vector_norm", norm::linalg_vector_norm, static),
    op!("cumsum", |lx, a| scan::scan(lx, a, false)),
    op!("cumprod", |lx, a| scan::scan(lx, a, true)),
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
