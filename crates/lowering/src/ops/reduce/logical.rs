//! Boolean and counting reductions: all, any, count_nonzero.
use stablehlo::{DType, Value};

use super::{keep, overload, reduce_dims};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;

/// all/any: bool results (uint8 for uint8 inputs).
pub(super) fn all_any(lx: &mut Lower, args: &Args, is_all: bool) -> Result<Vec<Value>> {
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
pub(super) fn count_nonzero(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
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
