//! p-norm distances: `_pdist_forward(self [N, M], p)` (the upper triangle of
//! the pairwise distances of the rows, row-major) and `_cdist_forward(x1
//! [.., P, M], x2 [.., R, M], p, compute_mode)` (batch dims broadcast), with
//! their backwards. Distances are computed from the explicit differences (no
//! matmul trick), so p = 2 is as accurate as CPU's direct kernel.
//!
//! The per-element backward term follows ATen's DistanceOpsKernel: p = 0
//! gives 0; p = 1 `g sign(d)`; p < 2 `sign(d) |d|^(p-1) g / dist^(p-1)` (0
//! when dist = 0, or d = 0 with p < 1); p = 2 `g d / dist`; p = inf
//! `g sign(d) (|d| == dist)`; else `d |d|^(p-2) g / dist^(p-1)`.
use stablehlo::{CompareDir, DType, Value};

use super::{add_rows, c, compute_type, take_rows, tname};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

type R = Result<Vec<Value>>;

/// The p-norm of `diff` over its last dim (compute type).
fn norm_last(lx: &mut Lower, diff: Value, p: f64) -> Result<Value> {
    let last = lx.shape(diff).len() as i64 - 1;
    let b = &mut *lx.b;
    Ok(if p == 0.0 {
        let z = b.splat_like(diff, 0.0)?;
        let nz = b.compare(diff, z, CompareDir::Ne)?;
        let dt = b.dtype(diff);
        let f = b.convert(nz, dt)?;
        b.reduce_sum(f, &[last])?
    } else if p.is_infinite() {
        let a = b.abs(diff)?;
        b.reduce_max(a, &[last])?
    } else if p == 1.0 {
        let a = b.abs(diff)?;
        b.reduce_sum(a, &[last])?
    } else if p == 2.0 {
        let sq = b.mul(diff, diff)?;
        let s = b.reduce_sum(sq, &[last])?;
        b.sqrt(s)?
    } else {
        let a = b.abs(diff)?;
        let pv = b.splat_like(a, p)?;
        let ap = b.pow(a, pv)?;
        let s = b.reduce_sum(ap, &[last])?;
        let ip = b.splat_like(s, 1.0 / p)?;
        b.pow(s, ip)?
    })
}

/// d(dist)/d(diff) times `g`, elementwise (all of one shape, compute type).
fn grad_term(lx: &mut Lower, d: Value, g: Value, dist: Value, p: f64) -> Result<Value> {
    if p == 0.0 {
        return c(lx, d, 0.0);
    }
    let sg = lx.b.sign(d)?;
    if p == 1.0 {
        return Ok(lx.b.mul(g, sg)?);
    }
    let ad = lx.b.abs(d)?;
    if p.is_infinite() {
        let hit = lx.b.compare(ad, dist, CompareDir::Eq)?;
        let t = lx.b.mul(g, sg)?;
        let z = c(lx, t, 0.0)?;
        return Ok(lx.b.select(hit, t, z)?);
    }
    let zero = c(lx, d, 0.0)?;
    let mut bad = lx.b.compare(dist, zero, CompareDir::Eq)?;
    let t = if p == 2.0 {
        let t = lx.b.mul(g, d)?;
        lx.b.div(t, dist)?
    } else {
        let pm1 = c(lx, d, p - 1.0)?;
        let den = lx.b.pow(dist, pm1)?;
        let num = if p < 2.0 {
            if p < 1.0 {
                let dz = lx.b.compare(d, zero, CompareDir::Eq)?;
                bad = lx.b.or(bad, dz)?;
            }
            let a = lx.b.pow(ad, pm1)?;
            lx.b.mul(sg, a)?
        } else {
            let pm2 = c(lx, d, p - 2.0)?;
            let a = lx.b.pow(ad, pm2)?;
            lx.b.mul(d, a)?
        };
        let t = lx.b.mul(num, g)?;
        lx.b.div(t, den)?
    };
    Ok(lx.b.select(bad, zero, t)?)
}

fn check_p(lx: &Lower, what: &str, p: f64) -> Result<()> {
    // NaN fails too.
    if p.is_nan() || p < 0.0 {
        bail!(Runtime, "{}: {what} only supports non-negative p values", lx.op);
    }
    Ok(())
}

/// The row pairs (i, j), i < j, of `n` rows in row-major order, as two i64
/// vectors of length n(n-1)/2. Computed from the pair number k: row i is the
/// largest with start(i) = i(2n-i-1)/2 <= k (an f64 square-root estimate,
/// corrected by one step each way).
fn pairs(lx: &mut Lower, n: i64) -> Result<(Value, Value)> {
    let np = n * (n - 1) / 2;
    let k = lx.b.iota(DType::I64, &[np], 0)?;
    let kf = lx.b.convert(k, DType::F64)?;
    let m = (2 * n - 1) as f64;
    let e8 = c(lx, kf, -8.0)?;
    let t = lx.b.mul(kf, e8)?;
    let mm = c(lx, t, m * m)?;
    let t = lx.b.add(t, mm)?;
    let z = c(lx, t, 0.0)?;
    let t = lx.b.max(t, z)?;
    let t = lx.b.sqrt(t)?;
    let mv = c(lx, t, m)?;
    let t = lx.b.sub(mv, t)?;
    let h = c(lx, t, 0.5)?;
    let t = lx.b.mul(t, h)?;
    let t = lx.b.floor(t)?;
    let mut i = lx.b.convert(t, DType::I64)?;
    let start = |lx: &mut Lower, i: Value| -> Result<Value> {
        let two_n1 = lx.b.splat_i64(DType::I64, 2 * n - 1, &[np])?;
        let a = lx.b.sub(two_n1, i)?;
        let a = lx.b.mul(i, a)?;
        let two = lx.b.splat_i64(DType::I64, 2, &[np])?;
        Ok(lx.b.div(a, two)?)
    };
    let one = lx.b.splat_i64(DType::I64, 1, &[np])?;
    // i too large: step down; i too small: step up.
    let s = start(lx, i)?;
    let hi = lx.b.compare(s, k, CompareDir::Gt)?;
    let dn = lx.b.sub(i, one)?;
    i = lx.b.select(hi, dn, i)?;
    let up = lx.b.add(i, one)?;
    let s = start(lx, up)?;
    let lo = lx.b.compare(s, k, CompareDir::Le)?;
    i = lx.b.select(lo, up, i)?;
    let s = start(lx, i)?;
    let j = lx.b.sub(k, s)?;
    let j = lx.b.add(j, i)?;
    let j = lx.b.add(j, one)?;
    Ok((i, j))
}

/// _pdist_forward(self, p=2) -> Tensor [N(N-1)/2]
pub(super) fn pdist_forward(lx: &mut Lower, args: &Args) -> R {
    let x = args.tensor(0)?.clone();
    let p = args.float_or(1, 2.0)?;
    if x.shape.len() != 2 {
        bail!(Runtime, "{}: pdist only supports 2D tensors, got: {}D", lx.op, x.shape.len());
    }
    if !x.dtype.is_float() {
        bail!(Runtime, "{}: pdist only supports floating-point dtypes", lx.op);
    }
    check_p(lx, "pdist", p)?;
    let (n, m) = (x.shape[0], x.shape[1]);
    let np = n * (n - 1) / 2;
    let ct = compute_type(x.dtype);
    if np == 0 || m == 0 {
        let z = lx.full(ct, 0.0, &[np.max(0)])?;
        return Ok(vec![lx.cast(z, x.dtype)?]);
    }
    let xv = lx.cast(x.value, ct)?;
    let (i, j) = pairs(lx, n)?;
    let a = take_rows(lx, xv, i)?;
    let b = take_rows(lx, xv, j)?;
    let d = lx.b.sub(a, b)?;
    let r = norm_last(lx, d, p)?;
    Ok(vec![lx.cast(r, x.dtype)?])
}

/// _pdist_backward(grad, self, p, pdist) -> grad_self [N, M]
pub(super) fn pdist_backward(lx: &mut Lower, args: &Args) -> R {
    let g = args.tensor(0)?.clone();
    let x = args.tensor(1)?.clone();
    let p = args.float(2)?;
    let dist = args.tensor(3)?.clone();
    check_p(lx, "pdist", p)?;
    if x.shape.len() != 2 {
        bail!(Runtime, "{}: pdist only supports 2D tensors, got: {}D", lx.op, x.shape.len());
    }
    let (n, m) = (x.shape[0], x.shape[1]);
    let np = n * (n - 1) / 2;
    let ct = compute_type(x.dtype);
    if np == 0 || m == 0 || p == 0.0 {
        let z = lx.full(ct, 0.0, &x.shape)?;
        return Ok(vec![lx.cast(z, x.dtype)?]);
    }
    let xv = lx.cast(x.value, ct)?;
    let (i, j) = pairs(lx, n)?;
    let a = take_rows(lx, xv, i)?;
    let b = take_rows(lx, xv, j)?;
    let d = lx.b.sub(a, b)?;
    let gv = lx.cast(g.value, ct)?;
    let gv = lx.b.broadcast_in_dim(gv, &[np, m], &[0])?;
    let dv = lx.cast(dist.value, ct)?;
    let dv = lx.b.broadcast_in_dim(dv, &[np, m], &[0])?;
    let t = grad_term(lx, d, gv, dv, p)?;
    let nt = lx.b.neg(t)?;
    let upd = lx.b.concatenate(&[t, nt], 0)?;
    let idx = lx.b.concatenate(&[i, j], 0)?;
    let zeros = lx.full(ct, 0.0, &[n, m])?;
    let r = add_rows(lx, zeros, idx, upd)?;
    Ok(vec![lx.cast(r, x.dtype)?])
}

/// Checks of cdist's inputs; returns the broadcast batch shape.
fn cdist_shapes(lx: &Lower, x1: &crate::args::TensorArg, x2: &crate::args::TensorArg, p: f64) -> Result<Vec<i64>> {
    for (name, t) in [("X1", x1), ("X2", x2)] {
        if t.shape.len() < 2 {
            bail!(Runtime, "{}: cdist only supports at least 2D tensors, {name} got: {}D", lx.op, t.shape.len());
        }
        if !t.dtype.is_float() {
            bail!(Runtime, "{}: cdist only supports floating-point dtypes, {name} got: {}", lx.op, tname(t.dtype));
        }
    }
    let (c1, c2) = (x1.shape[x1.shape.len() - 1], x2.shape[x2.shape.len() - 1]);
    if c1 != c2 {
        bail!(Runtime, "{}: X1 and X2 must have the same number of columns. X1: {c1} X2: {c2}", lx.op);
    }
    check_p(lx, "cdist", p)?;
    let b1 = &x1.shape[..x1.shape.len() - 2];
    let b2 = &x2.shape[..x2.shape.len() - 2];
    match stablehlo::broadcast_shapes(b1, b2) {
        Ok(s) => Ok(s),
        Err(_) => bail!(
            Runtime,
            "{}: The size of the batch dimensions of X1 {:?} and X2 {:?} must match (broadcastable)",
            lx.op,
            b1,
            b2
        ),
    }
}

/// x1 and x2 expanded to `batch` and the differences `[batch.., P, R, M]`.
fn cdist_diff(lx: &mut Lower, x1: &crate::args::TensorArg, x2: &crate::args::TensorArg, batch: &[i64], ct: DType) -> Result<Value> {
    let (p, r, m) = (x1.shape[x1.shape.len() - 2], x2.shape[x2.shape.len() - 2], x1.shape[x1.shape.len() - 1]);
    let nb = batch.len() as i64;
    let a = lx.cast(x1.value, ct)?;
    let mut s1 = batch.to_vec();
    s1.extend([p, m]);
    let a = lx.expand(a, &s1)?;
    let b = lx.cast(x2.value, ct)?;
    let mut s2 = batch.to_vec();
    s2.extend([r, m]);
    let b = lx.expand(b, &s2)?;
    let mut full = batch.to_vec();
    full.extend([p, r, m]);
    let bd: Vec<i64> = (0..nb).collect();
    let da: Vec<i64> = bd.iter().copied().chain([nb, nb + 2]).collect();
    let db: Vec<i64> = bd.iter().copied().chain([nb + 1, nb + 2]).collect();
    let a = lx.b.broadcast_in_dim(a, &full, &da)?;
    let b = lx.b.broadcast_in_dim(b, &full, &db)?;
    Ok(lx.b.sub(a, b)?)
}

/// _cdist_forward(x1, x2, p, compute_mode) -> [batch.., P, R]
pub(super) fn cdist_forward(lx: &mut Lower, args: &Args) -> R {
    let x1 = args.tensor(0)?.clone();
    let x2 = args.tensor(1)?.clone();
    let p = args.float(2)?;
    let batch = cdist_shapes(lx, &x1, &x2, p)?;
    let (pr, rr, m) = (x1.shape[x1.shape.len() - 2], x2.shape[x2.shape.len() - 2], x1.shape[x1.shape.len() - 1]);
    let ct = compute_type(x1.dtype);
    let mut out = batch.clone();
    out.extend([pr, rr]);
    if out.iter().product::<i64>() == 0 || m == 0 {
        let z = lx.full(ct, 0.0, &out)?;
        return Ok(vec![lx.cast(z, x1.dtype)?]);
    }
    let d = cdist_diff(lx, &x1, &x2, &batch, ct)?;
    let r = norm_last(lx, d, p)?;
    Ok(vec![lx.cast(r, x1.dtype)?])
}

/// _cdist_backward(grad, x1, x2, p, cdist) -> grad_x1, of x1 expanded to the
/// broadcast batch shape (autograd sums it back), as on CPU.
pub(super) fn cdist_backward(lx: &mut Lower, args: &Args) -> R {
    let g = args.tensor(0)?.clone();
    let x1 = args.tensor(1)?.clone();
    let x2 = args.tensor(2)?.clone();
    let p = args.float(3)?;
    let dist = args.tensor(4)?.clone();
    let batch = cdist_shapes(lx, &x1, &x2, p)?;
    let (pr, rr, m) = (x1.shape[x1.shape.len() - 2], x2.shape[x2.shape.len() - 2], x1.shape[x1.shape.len() - 1]);
    let ct = compute_type(x1.dtype);
    if pr == 0 || rr == 0 || m == 0 || batch.iter().product::<i64>() == 0 {
        let z = lx.full(ct, 0.0, &x1.shape)?;
        return Ok(vec![lx.cast(z, x1.dtype)?]);
    }
    let mut gshape = batch.clone();
    gshape.extend([pr, rr]);
    let mut s1 = batch.clone();
    s1.extend([pr, m]);
    if p == 0.0 {
        let z = lx.full(ct, 0.0, &s1)?;
        return Ok(vec![lx.cast(z, x1.dtype)?]);
    }
    let d = cdist_diff(lx, &x1, &x2, &batch, ct)?;
    let full = lx.shape(d);
    let nb = batch.len() as i64;
    let keep: Vec<i64> = (0..nb + 2).collect();
    let gv = lx.cast(g.value, ct)?;
    let gv = lx.expand(gv, &gshape)?;
    let gv = lx.b.broadcast_in_dim(gv, &full, &keep)?;
    let dv = lx.cast(dist.value, ct)?;
    let dv = lx.expand(dv, &gshape)?;
    let dv = lx.b.broadcast_in_dim(dv, &full, &keep)?;
    let t = grad_term(lx, d, gv, dv, p)?;
    let r = lx.b.reduce_sum(t, &[nb + 1])?;
    Ok(vec![lx.cast(r, x1.dtype)?])
}
