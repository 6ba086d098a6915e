//! max_unpool2d/3d: values scattered to their saved flat indices.
use stablehlo::{CompareDir, DType, ScatterDims, Value};

use super::expand;
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

/// max_unpool{2,3}d(self, indices, output_size[, stride, padding]): zeros of
/// the output size with each value written at its per-plane flat index.
pub(super) fn max_unpool(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
    let x = args.tensor(0)?.clone();
    let ind = args.tensor(1)?.clone();
    let out = expand(lx, args.ints(2)?, n, &[], "output_size")?;
    let rank = x.shape.len();
    if (rank != n + 1 && rank != n + 2) || ind.shape != x.shape || out.len() != n {
        bail!(Runtime, "{}: expected input and indices of the same {}D or {}D shape and {} output sizes, got {:?}, {:?}, {:?}", lx.op, n + 1, n + 2, n, x.shape, ind.shape, out);
    }
    let lead = rank - n;
    let planes: i64 = x.shape[..lead].iter().product();
    let p_in: i64 = x.shape[lead..].iter().product();
    let p_out: i64 = out.iter().product();
    let v = lx.b.reshape(x.value, &[planes * p_in])?;
    let iv = lx.cast(ind.value, DType::I64)?;
    let iv = lx.b.reshape(iv, &[planes, p_in])?;
    let zero = lx.full(DType::I64, 0.0, &[planes, p_in])?;
    let lim = lx.full(DType::I64, p_out as f64, &[planes, p_in])?;
    let lo = lx.b.compare(iv, zero, CompareDir::Lt)?;
    let hi = lx.b.compare(iv, lim, CompareDir::Ge)?;
    let bad = lx.b.or(lo, hi)?;
    let bad = lx.b.reduce_or(bad, &[0, 1])?;
    lx.check_runtime(bad, format!("{}: Found an invalid max index (output size {:?})", lx.op, out));
    let base = lx.b.iota(DType::I64, &[planes, p_in], 0)?;
    let base = lx.b.mul(base, lim)?;
    let flat = lx.b.add(base, iv)?;
    let flat = lx.b.reshape(flat, &[planes * p_in, 1])?;
    let zeros = lx.full(x.dtype, 0.0, &[planes * p_out])?;
    let dims = ScatterDims::points_1d();
    let r = lx.b.scatter(zeros, flat, v, &dims, |_, _, r| Ok(vec![r[0]]))?;
    let mut oshape = x.shape[..lead].to_vec();
    oshape.extend(&out);
    Ok(vec![lx.b.reshape(r, &oshape)?])
}
