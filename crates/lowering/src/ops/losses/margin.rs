//! multi_margin_loss and multilabel_margin_loss (forward and backward), as
//! dense masks over the (nframe, dim) input instead of the CPU's loops.
use stablehlo::{CompareDir, DType, Value};

use super::{float_only, R};
use crate::args::{Arg, Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::elementwise::{cmp, k};

/// (nframe, dim) of a margin loss input: 0-d and 1-d inputs are one frame.
fn frames(lx: &Lower, x: &TensorArg) -> Result<(i64, i64)> {
    let ok = match x.shape.len() {
        0 => true,
        1 => x.shape[0] != 0,
        2 => x.shape[1] != 0,
        _ => false,
    };
    if !ok {
        bail!(Runtime, "{}: Expected non-empty vector or matrix with optional 0-dim batch size, but got: {:?}", lx.op, x.shape);
    }
    Ok(match x.shape.len() {
        0 => (1, 1),
        1 => (1, x.shape[0]),
        _ => (x.shape[0], x.shape[1]),
    })
}

fn literal(args: &Args, i: usize, def: f64) -> f64 {
    match args.get(i) {
        Arg::Scalar(s) => s.literal,
        Arg::Int(v) => *v as f64,
        Arg::Float(f) => *f,
        _ => def,
    }
}

/// The per-frame quantities of multi_margin_loss over x: (N, C).
struct Multi {
    n: i64,
    c: i64,
    /// i1 (N, C): the target class.
    onehot: Value,
    /// `margin - x[target] + x` (N, C).
    z: Value,
    /// i1 (N, C): a non-target class with z > 0.
    active: Value,
    /// weight[target] broadcast to (N, C), when weighted.
    wt: Option<Value>,
    p: i64,
}

/// (grad?, self, target, p, margin, weight?, reduction) from `first` = self.
fn multi_setup(lx: &mut Lower, args: &Args, first: usize) -> Result<Multi> {
    let x = args.tensor(first)?.clone();
    let t = args.tensor(first + 1)?.clone();
    float_only("multi_margin_loss_cpu_kernel", x.dtype)?;
    let p = literal(args, first + 2, 1.0);
    if p != 1.0 && p != 2.0 {
        bail!(Runtime, "{}: only p == 1 and p == 2 supported", lx.op);
    }
    let margin = literal(args, first + 3, 1.0);
    let (n, c) = frames(lx, &x)?;
    let tn: i64 = t.shape.iter().product();
    if t.shape.len() > 1 || tn != n {
        bail!(Runtime, "{}: inconsistent target size, got: {:?}", lx.op, t.shape);
    }
    let xv = lx.b.reshape(x.value, &[n, c])?;
    let tv = lx.cast(t.value, DType::I64)?;
    let tv = lx.b.reshape(tv, &[n])?;
    let lo = lx.b.splat_i64(DType::I64, 0, &[n])?;
    let hi = lx.b.splat_i64(DType::I64, c, &[n])?;
    let a = lx.b.compare(tv, lo, CompareDir::Lt)?;
    let b = lx.b.compare(tv, hi, CompareDir::Ge)?;
    let bad = lx.b.or(a, b)?;
    let bad = lx.b.reduce_or(bad, &[0])?;
    lx.check_runtime(bad, format!("{}: target out of range", lx.op));
    let cls = lx.b.iota(DType::I64, &[n, c], 1)?;
    let tb = lx.b.broadcast_in_dim(tv, &[n, c], &[0])?;
    let onehot = lx.b.compare(cls, tb, CompareDir::Eq)?;
    let zeros = k(lx, xv, 0.0)?;
    let picked = lx.b.select(onehot, xv, zeros)?;
    let xt = lx.b.reduce_sum(picked, &[1])?;
    let xt = lx.b.broadcast_in_dim(xt, &[n, c], &[0])?;
    let m = k(lx, xv, margin)?;
    let z = lx.b.sub(m, xt)?;
    let z = lx.b.add(z, xv)?;
    let pos = cmp(lx, z, zeros, CompareDir::Gt)?;
    let other = lx.b.not(onehot)?;
    let active = lx.b.and(pos, other)?;
    let wt = match args.opt_tensor(first + 4) {
        Some(w) => {
            if w.shape.iter().product::<i64>() != c {
                bail!(Runtime, "{}: weight tensor should be defined either for all {c} classes or no classes", lx.op);
            }
            let wv = lx.cast(w.value, x.dtype)?;
            let wv = lx.b.reshape(wv, &[c])?;
            let wb = lx.b.broadcast_in_dim(wv, &[n, c], &[1])?;
            let ws = lx.b.select(onehot, wb, zeros)?;
            let ws = lx.b.reduce_sum(ws, &[1])?;
            Some(lx.b.broadcast_in_dim(ws, &[n, c], &[0])?)
        }
        None => None,
    };
    Ok(Multi { n, c, onehot, z, active, wt, p: p as i64 })
}

/// multi_margin_loss(self, target, p=1, margin=1, weight?, reduction=mean)
pub(super) fn multi_margin_loss(lx: &mut Lower, args: &Args) -> R {
    let m = multi_setup(lx, args, 0)?;
    let reduction = args.int_or(5, 1)?;
    let target_dims = args.tensor(1)?.shape.len();
    let mut h = if m.p == 1 { m.z } else { lx.b.mul(m.z, m.z)? };
    if let Some(w) = m.wt {
        h = lx.b.mul(h, w)?;
    }
    let zeros = k(lx, h, 0.0)?;
    let h = lx.b.select(m.active, h, zeros)?;
    let s = lx.b.reduce_sum(h, &[1])?;
    let cv = k(lx, s, m.c as f64)?;
    let per = lx.b.div(s, cv)?;
    let out = if reduction == 0 && target_dims > 0 {
        per
    } else {
        let s = lx.b.reduce_sum(per, &[0])?;
        if reduction == 1 {
            let nv = k(lx, s, m.n as f64)?;
            lx.b.div(s, nv)?
        } else {
            s
        }
    };
    Ok(vec![out])
}

/// Multiplies a (N, C) gradient by grad_output: per frame when unreduced
/// and 1-d, else by its single value. Returns it in the input's shape.
fn times_grad_output(lx: &mut Lower, gi: Value, g: &TensorArg, reduction: i64, x: &TensorArg) -> Result<Value> {
    let shape = lx.shape(gi);
    let gv = lx.cast(g.value, x.dtype)?;
    let gb = if reduction == 0 && !g.shape.is_empty() {
        let gv = lx.b.reshape(gv, &[shape[0]])?;
        lx.b.broadcast_in_dim(gv, &shape, &[0])?
    } else {
        let gv = lx.b.reshape(gv, &[])?;
        lx.b.broadcast_in_dim(gv, &shape, &[])?
    };
    let r = lx.b.mul(gi, gb)?;
    Ok(lx.b.reshape(r, &x.shape)?)
}

/// multi_margin_loss_backward(grad_output, self, target, p, margin, weight?, reduction)
pub(super) fn multi_margin_loss_backward(lx: &mut Lower, args: &Args) -> R {
    let m = multi_setup(lx, args, 1)?;
    let reduction = args.int_or(6, 1)?;
    let scale = if reduction == 1 { 1.0 / (m.n * m.c) as f64 } else { 1.0 / m.c as f64 };
    let g = k(lx, m.z, scale)?;
    let mut h = if m.p == 1 {
        g
    } else {
        let two = k(lx, g, 2.0)?;
        let t = lx.b.mul(two, g)?;
        lx.b.mul(t, m.z)?
    };
    if let Some(w) = m.wt {
        h = lx.b.mul(h, w)?;
    }
    let zeros = k(lx, h, 0.0)?;
    let gd = lx.b.select(m.active, h, zeros)?;
    let gt = lx.b.reduce_sum(gd, &[1])?;
    let gt = lx.b.neg(gt)?;
    let gt = lx.b.broadcast_in_dim(gt, &[m.n, m.c], &[0])?;
    let gi = lx.b.select(m.onehot, gt, gd)?;
    let x = args.tensor(1)?.clone();
    Ok(vec![times_grad_output(lx, gi, args.tensor(0)?, reduction, &x)?])
}

/// The (N, J, D) masks of multilabel_margin_loss: `hit[i, j, d]` (target j of
/// frame i is class d, j before the first negative target) and the active
/// hinge terms, given is_target (N, D) as i1.
struct Multilabel {
    n: i64,
    c: i64,
    hit: Value,
    /// `1 - x[t_j] + x[d] > 0` for valid j and non-target d, (N, J, D).
    active: Value,
    /// The hinge values `1 - x[t_j] + x[d]`, (N, J, D).
    z: Value,
}

/// (self, target) at `first`; `is_target` given (backward) or computed.
fn multilabel_setup(lx: &mut Lower, args: &Args, first: usize, is_target: Option<Value>) -> Result<(Multilabel, Value)> {
    let x = args.tensor(first)?.clone();
    let t = args.tensor(first + 1)?.clone();
    float_only("multilabel_margin_loss_forward_out_frame", x.dtype)?;
    let (n, c) = frames(lx, &x)?;
    let tn: i64 = t.shape.iter().product();
    let ok = if x.shape.len() <= 1 { t.shape.len() <= 1 && tn == c } else { t.shape == [n, c] };
    if !ok {
        bail!(Runtime, "{}: inconsistent size {:?} for argument #2 'target'", lx.op, t.shape);
    }
    let xv = lx.b.reshape(x.value, &[n, c])?;
    let tv = lx.cast(t.value, DType::I64)?;
    let tv = lx.b.reshape(tv, &[n, c])?;
    let m1 = lx.b.splat_i64(DType::I64, -1, &[n, c])?;
    let cc = lx.b.splat_i64(DType::I64, c, &[n, c])?;
    let a = lx.b.compare(tv, m1, CompareDir::Lt)?;
    let b = lx.b.compare(tv, cc, CompareDir::Ge)?;
    let bad = lx.b.or(a, b)?;
    let bad = lx.b.reduce_or(bad, &[0, 1])?;
    lx.check_runtime(bad, format!("{}: argument #2 'target' is out of range", lx.op));
    // Targets count up to the first negative one.
    let zero = lx.b.splat_i64(DType::I64, 0, &[n, c])?;
    let neg = lx.b.compare(tv, zero, CompareDir::Lt)?;
    let pos = lx.b.iota(DType::I64, &[n, c], 1)?;
    let stop = lx.b.select(neg, pos, cc)?;
    let first_neg = lx.b.reduce_min(stop, &[1])?;
    let first_neg = lx.b.broadcast_in_dim(first_neg, &[n, c], &[0])?;
    let valid = lx.b.compare(pos, first_neg, CompareDir::Lt)?;
    let s3 = [n, c, c];
    let t3 = lx.b.broadcast_in_dim(tv, &s3, &[0, 1])?;
    let d3 = lx.b.iota(DType::I64, &s3, 2)?;
    let eq = lx.b.compare(t3, d3, CompareDir::Eq)?;
    let v3 = lx.b.broadcast_in_dim(valid, &s3, &[0, 1])?;
    let hit = lx.b.and(eq, v3)?;
    let is_target = match is_target {
        Some(it) => it,
        None => lx.b.reduce_or(hit, &[1])?,
    };
    let x3 = lx.b.broadcast_in_dim(xv, &s3, &[0, 2])?;
    let zeros3 = k(lx, x3, 0.0)?;
    let picked = lx.b.select(hit, x3, zeros3)?;
    let xt = lx.b.reduce_sum(picked, &[2])?;
    let xt3 = lx.b.broadcast_in_dim(xt, &s3, &[0, 1])?;
    let one = k(lx, x3, 1.0)?;
    let z = lx.b.sub(one, xt3)?;
    let z = lx.b.add(z, x3)?;
    let posz = cmp(lx, z, zeros3, CompareDir::Gt)?;
    let it3 = lx.b.broadcast_in_dim(is_target, &s3, &[0, 2])?;
    let not_t = lx.b.not(it3)?;
    let active = lx.b.and(posz, not_t)?;
    let active = lx.b.and(active, v3)?;
    Ok((Multilabel { n, c, hit, active, z }, is_target))
}

/// multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target)
pub(super) fn multilabel_margin_loss_forward(lx: &mut Lower, args: &Args) -> R {
    let x = args.tensor(0)?.clone();
    let t = args.tensor(1)?.clone();
    let reduction = args.int(2)?;
    let (m, is_target) = multilabel_setup(lx, args, 0, None)?;
    let zeros = k(lx, m.z, 0.0)?;
    let h = lx.b.select(m.active, m.z, zeros)?;
    let s = lx.b.reduce_sum(h, &[1, 2])?;
    let cv = k(lx, s, m.c as f64)?;
    let per = lx.b.div(s, cv)?;
    let out = if reduction == 0 && t.shape.len() > 1 {
        per
    } else {
        let s = lx.b.reduce_sum(per, &[0])?;
        if reduction == 1 {
            let nv = k(lx, s, m.n as f64)?;
            lx.b.div(s, nv)?
        } else {
            s
        }
    };
    let it = lx.cast(is_target, x.dtype)?;
    let it = lx.b.reshape(it, &t.shape)?;
    Ok(vec![out, it])
}

/// multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target)
pub(super) fn multilabel_margin_loss_backward(lx: &mut Lower, args: &Args) -> R {
    let x = args.tensor(1)?.clone();
    let reduction = args.int(3)?;
    let (n, c) = frames(lx, &x)?;
    let it = args.tensor(4)?.clone();
    let itv = lx.b.reshape(it.value, &[n, c])?;
    let itv = lx.cast(itv, DType::Bool)?;
    let (m, _) = multilabel_setup(lx, args, 1, Some(itv))?;
    let scale = if reduction == 1 { 1.0 / (n * c) as f64 } else { 1.0 / c as f64 };
    let af = lx.cast(m.active, x.dtype)?;
    // +g for each active (j, d) at d, -g for each at t_j.
    let plus = lx.b.reduce_sum(af, &[1])?;
    let per_j = lx.b.reduce_sum(af, &[2])?;
    let s3 = [n, c, c];
    let pj = lx.b.broadcast_in_dim(per_j, &s3, &[0, 1])?;
    let zeros3 = k(lx, pj, 0.0)?;
    let at_t = lx.b.select(m.hit, pj, zeros3)?;
    let minus = lx.b.reduce_sum(at_t, &[1])?;
    let cnt = lx.b.sub(plus, minus)?;
    let g = k(lx, cnt, scale)?;
    let gi = lx.b.mul(cnt, g)?;
    Ok(vec![times_grad_output(lx, gi, args.tensor(0)?, reduction, &x)?])
}
