//! nll_loss (1d and 2d, with class weights and ignore_index) and its
//! backward, sharing one setup that builds the target one-hot mask.
use stablehlo::{CompareDir, DType, Value};

use super::{along, float_only};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::{ErrorKind, Result};
use crate::ops::reduce::{acc, unreduce};

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
    let (bad, _, target) = crate::ops::indexing::first_flagged(lx, bad, tgt)?;
    // As the CPU's kernel, which checks target by target, quote the first.
    lx.check_quoting(ErrorKind::Index, bad, &[target], format!("{}: Target {{0}} is out of bounds (number of classes {c}).", lx.op))?;
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
pub(super) fn nll_loss_forward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
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
pub(super) fn nll_loss_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
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
