//! Small activations and per-slice ops: glu, hardshrink/softshrink (and the
//! shared shrink backward), _prelu_kernel, renorm.
use stablehlo::{CompareDir, DType, Value};

use super::{float_only, R};
use crate::args::{norm_dim, Arg, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::elementwise::{broadcast_shape, cmp, k, prepare, type_name, wide};
use crate::ops::reduce::{acc, unreduce};
use crate::promote::promote_types;

/// Sigmoid as PyTorch's glu writes it: `1 / (1 + exp(-x))`.
fn sigmoid(lx: &mut Lower, x: Value) -> Result<Value> {
    let one = k(lx, x, 1.0)?;
    let nx = lx.b.neg(x)?;
    let e = lx.b.exp(nx)?;
    let d = lx.b.add(one, e)?;
    Ok(lx.b.div(one, d)?)
}

/// The two halves of `v` along `dim` (whose size must be even).
fn halves(lx: &mut Lower, v: Value, shape: &[i64], dim: i64) -> Result<(Value, Value, usize)> {
    if shape.is_empty() {
        bail!(Runtime, "{}: glu does not support scalars because halving size must be even", lx.op);
    }
    let d = norm_dim(lx.op, dim, shape.len())?;
    if shape[d] % 2 != 0 {
        bail!(Runtime, "{}: Halving dimension must be even, but dimension {d} is size {}", lx.op, shape[d]);
    }
    let h = shape[d] / 2;
    let zeros = vec![0; shape.len()];
    let ones = vec![1; shape.len()];
    let mut mid = shape.to_vec();
    mid[d] = h;
    let mut start = zeros.clone();
    start[d] = h;
    let a = lx.b.slice(v, &zeros, &mid, &ones)?;
    let b = lx.b.slice(v, &start, shape, &ones)?;
    Ok((a, b, d))
}

/// glu(self, dim=-1): `a * sigmoid(b)` for the halves a, b of self along dim.
pub(super) fn glu(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?.clone();
    float_only("glu", t.dtype)?;
    let x = lx.cast(t.value, wide(t.dtype))?;
    let (a, b, _) = halves(lx, x, &t.shape, args.int_or(1, -1)?)?;
    let s = sigmoid(lx, b)?;
    let r = lx.b.mul(a, s)?;
    Ok(vec![lx.cast(r, t.dtype)?])
}

/// glu_jvp(glu, x, dx, dim): forward-mode AD through glu,
/// `sigmoid(b) * da + glu * (1 - sigmoid(b)) * db` for the halves of x and dx.
pub(super) fn glu_jvp(lx: &mut Lower, args: &Args) -> R {
    let (y, t, dt) = (args.tensor(0)?.clone(), args.tensor(1)?.clone(), args.tensor(2)?.clone());
    float_only("glu_jvp", t.dtype)?;
    if dt.shape != t.shape {
        bail!(Runtime, "{}: the tangent's shape {:?} differs from the input's {:?}", lx.op, dt.shape, t.shape);
    }
    let c = wide(t.dtype);
    let (x, dx, glu) = (lx.cast(t.value, c)?, lx.cast(dt.value, c)?, lx.cast(y.value, c)?);
    let dim = args.int(3)?;
    let (_, b, _) = halves(lx, x, &t.shape, dim)?;
    let (da, db, _) = halves(lx, dx, &t.shape, dim)?;
    let s = sigmoid(lx, b)?;
    let one = k(lx, s, 1.0)?;
    let oms = lx.b.sub(one, s)?;
    let left = lx.b.mul(s, da)?;
    let right = lx.b.mul(glu, oms)?;
    let right = lx.b.mul(right, db)?;
    let r = lx.b.add(left, right)?;
    Ok(vec![lx.cast(r, t.dtype)?])
}

/// glu_backward(grad_output, self, dim): `[g * s, g * a * s * (1 - s)]`.
pub(super) fn glu_backward(lx: &mut Lower, args: &Args) -> R {
    let g = args.tensor(0)?.clone();
    let t = args.tensor(1)?.clone();
    float_only("glu_backward", t.dtype)?;
    let c = wide(t.dtype);
    let x = lx.cast(t.value, c)?;
    let gv = lx.cast(g.value, c)?;
    let (a, b, d) = halves(lx, x, &t.shape, args.int(2)?)?;
    let s = sigmoid(lx, b)?;
    let ga = lx.b.mul(gv, s)?;
    let one = k(lx, s, 1.0)?;
    let oms = lx.b.sub(one, s)?;
    let p = lx.b.mul(oms, s)?;
    let p = lx.b.mul(p, a)?;
    let gb = lx.b.mul(p, gv)?;
    let r = lx.b.concatenate(&[ga, gb], d as i64)?;
    Ok(vec![lx.cast(r, t.dtype)?])
}

/// Scalar argument `i` (default `def`) as a value like `like`.
fn lambd(lx: &mut Lower, args: &Args, i: usize, like: Value, def: f64) -> Result<Value> {
    match args.get(i) {
        Arg::None => k(lx, like, def),
        _ => {
            let s = args.operand(i)?;
            let v = lx.cast(s.value, lx.dtype(like))?;
            let shape = lx.shape(like);
            lx.expand(v, &shape)
        }
    }
}

/// True where `-l <= x <= l`.
fn inside(lx: &mut Lower, x: Value, l: Value) -> Result<Value> {
    let nl = lx.b.neg(l)?;
    let a = cmp(lx, x, nl, CompareDir::Ge)?;
    let b = cmp(lx, x, l, CompareDir::Le)?;
    Ok(lx.b.and(a, b)?)
}

/// hardshrink(self, lambd=0.5): 0 where `-l <= x <= l`, else x.
pub(super) fn hardshrink(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?.clone();
    float_only("hardshrink_cpu", t.dtype)?;
    let l = lambd(lx, args, 1, t.value, 0.5)?;
    let m = inside(lx, t.value, l)?;
    let z = k(lx, t.value, 0.0)?;
    Ok(vec![lx.b.select(m, z, t.value)?])
}

/// softshrink(self, lambd=0.5): `x - l` above l, `x + l` below -l, NaN kept, else 0.
pub(super) fn softshrink(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?.clone();
    float_only("softshrink_cpu", t.dtype)?;
    let lit = match args.get(1) {
        Arg::Scalar(s) => s.literal,
        _ => 0.5,
    };
    if lit.is_nan() || lit < 0.0 {
        bail!(
            Runtime,
            "{}: lambda must be in range [0, inf] for input dtype {}, but found {lit}",
            lx.op,
            type_name(t.dtype)
        );
    }
    let c = wide(t.dtype);
    let x = lx.cast(t.value, c)?;
    let l = k(lx, x, lit)?;
    let nl = k(lx, x, -lit)?;
    let sub = lx.b.sub(x, l)?;
    let add = lx.b.add(x, l)?;
    let zero = k(lx, x, 0.0)?;
    let lt = cmp(lx, x, nl, CompareDir::Lt)?;
    let r = lx.b.select(lt, add, zero)?;
    let gt = cmp(lx, x, l, CompareDir::Gt)?;
    let r = lx.b.select(gt, sub, r)?;
    let nan = cmp(lx, x, x, CompareDir::Ne)?;
    let r = lx.b.select(nan, x, r)?;
    Ok(vec![lx.cast(r, t.dtype)?])
}

/// hardshrink_backward / softshrink_backward(grad, self, lambd): 0 where
/// `-l <= x <= l`, else grad.
pub(super) fn shrink_backward(lx: &mut Lower, args: &Args) -> R {
    let g = args.tensor(0)?.clone();
    let x = args.tensor(1)?.clone();
    let out = promote_types(g.dtype, x.dtype);
    let go = args.operand(0)?;
    let xo = args.operand(1)?;
    let v = prepare(lx, &[&go, &xo], out)?;
    let l = lambd(lx, args, 2, v[1], 0.5)?;
    let m = inside(lx, v[1], l)?;
    let z = k(lx, v[0], 0.0)?;
    Ok(vec![lx.b.select(m, z, v[0])?])
}

/// (self, weight[, grad]) of the prelu kernels, broadcast, in the compute dtype.
fn prelu_operands(lx: &mut Lower, args: &Args, idx: &[usize]) -> Result<(Vec<Value>, DType)> {
    let ops: Vec<_> = idx.iter().map(|&i| args.operand(i)).collect::<Result<_>>()?;
    let dt = ops[0].dtype;
    for o in &ops[1..] {
        if o.dtype != dt {
            bail!(Runtime, "{}: expected scalar type {} but found {}", lx.op, type_name(dt), type_name(o.dtype));
        }
    }
    float_only("prelu_cpu", dt)?;
    let refs: Vec<_> = ops.iter().collect();
    broadcast_shape(lx, &refs)?;
    Ok((prepare(lx, &refs, wide(dt))?, dt))
}

/// _prelu_kernel(self, weight): `x > 0 ? x : w * x` (weight already broadcastable).
pub(super) fn prelu(lx: &mut Lower, args: &Args) -> R {
    let (v, dt) = prelu_operands(lx, args, &[0, 1])?;
    let (x, w) = (v[0], v[1]);
    let zero = k(lx, x, 0.0)?;
    let pos = cmp(lx, x, zero, CompareDir::Gt)?;
    let wx = lx.b.mul(w, x)?;
    let r = lx.b.select(pos, x, wx)?;
    Ok(vec![lx.cast(r, dt)?])
}

/// _prelu_kernel_backward(grad_output, self, weight) -> (grad_self, grad_weight),
/// both of the broadcast shape (autograd sums grad_weight down).
pub(super) fn prelu_backward(lx: &mut Lower, args: &Args) -> R {
    let (v, dt) = prelu_operands(lx, args, &[1, 2, 0])?;
    let (x, w, g) = (v[0], v[1], v[2]);
    let zero = k(lx, x, 0.0)?;
    let pos = cmp(lx, x, zero, CompareDir::Gt)?;
    let wg = lx.b.mul(w, g)?;
    let gx = lx.b.select(pos, g, wg)?;
    let xg = lx.b.mul(x, g)?;
    let gw = lx.b.select(pos, zero, xg)?;
    Ok(vec![lx.cast(gx, dt)?, lx.cast(gw, dt)?])
}

fn literal(args: &Args, i: usize) -> Option<f64> {
    match args.get(i) {
        Arg::Scalar(s) => Some(s.literal),
        Arg::Float(f) => Some(*f),
        Arg::Int(v) => Some(*v as f64),
        _ => None,
    }
}

/// renorm(self, p, dim, maxnorm): each slice along `dim` whose p-norm exceeds
/// maxnorm is scaled by `maxnorm / (norm + 1e-7)`.
pub(super) fn renorm(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?.clone();
    let p = literal(args, 1).unwrap_or(2.0);
    let maxnorm = literal(args, 3).unwrap_or(0.0);
    if t.shape.len() < 2 {
        bail!(Runtime, "{}: renorm: input needs at least 2 dimensions, got {} dimensions", lx.op, t.shape.len());
    }
    if p.is_nan() || p <= 0.0 {
        bail!(Runtime, "{}: renorm: non-positive-norm not supported", lx.op);
    }
    if maxnorm.is_nan() || maxnorm < 0.0 {
        bail!(Runtime, "{}: renorm: expected maxnorm to be >= 0 but got {maxnorm}", lx.op);
    }
    if !t.dtype.is_complex() {
        float_only("renorm_out", t.dtype)?;
    }
    let d = norm_dim(lx.op, args.int(2)?, t.shape.len())? as i64;
    let dims: Vec<i64> = (0..t.shape.len() as i64).filter(|&i| i != d).collect();
    let a = acc(t.dtype.complex_part().unwrap_or(t.dtype));
    // A complex slice's norm is its moduli's.
    let x = if t.dtype.is_complex() { crate::ops::complex::abs(lx, t.value)? } else { t.value };
    let x = lx.cast(x, a)?;
    let norm = crate::ops::reduce::vector_norm(lx, x, p, &dims, a)?;
    let mx = k(lx, norm, maxnorm)?;
    let eps = k(lx, norm, 1e-7)?;
    let ne = lx.b.add(norm, eps)?;
    let q = lx.b.div(mx, ne)?;
    let one = k(lx, norm, 1.0)?;
    let over = cmp(lx, norm, mx, CompareDir::Gt)?;
    let f = lx.b.select(over, q, one)?;
    // The factor is stored in self's dtype (its real part type for complex,
    // where the norm is real), then multiplied in opmath.
    let f = lx.cast(f, t.dtype.complex_part().unwrap_or(t.dtype))?;
    let f = lx.cast(f, wide(t.dtype))?;
    let f = unreduce(lx, f, &t.shape, &dims)?;
    let xv = lx.cast(t.value, wide(t.dtype))?;
    let r = lx.b.mul(xv, f)?;
    Ok(vec![lx.cast(r, t.dtype)?])
}
