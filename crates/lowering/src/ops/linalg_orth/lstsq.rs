//! `linalg_lstsq` through the SVD: the minimum-norm least-squares solution
//! V diag(1/s) U^H B with singular values <= rcond * s_max dropped (what
//! gelsy/gelsd/gelss compute; gels gives the same for full-rank inputs).
//! Outputs follow the CPU's per-driver rules: residuals for m > n and a
//! driver other than gelsy (full rank assumed: the shape cannot depend on
//! values here), rank for all but gels, singular values for gelsd/gelss.
use stablehlo::{CompareDir, DType, Value};

use super::svd::svd_tall;
use super::{abs2, bc, eps, from_batch, adjoint, like, mm, mm_hn, to3};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

type R = Result<Vec<Value>>;

/// linalg_lstsq(self, b, rcond=None, *, driver=None)
/// -> (solution, residuals, rank, singular_values)
pub(super) fn linalg_lstsq(lx: &mut Lower, args: &Args) -> R {
    let (a, bt) = (args.tensor(0)?, args.tensor(1)?);
    super::check_matrix(lx, a, "A")?;
    if a.dtype != bt.dtype {
        bail!(Runtime, "torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's dtype {:?} and other's dtype {:?}", a.dtype, bt.dtype);
    }
    let rcond = match args.get(2) {
        crate::args::Arg::Float(f) => Some(*f),
        _ => None,
    };
    let driver = args.opt_str(3).unwrap_or("gelsy").to_string();
    if !matches!(driver.as_str(), "gels" | "gelsy" | "gelsd" | "gelss") {
        bail!(Runtime, "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
    }
    let ra = a.shape.len();
    let diff = ra as i64 - bt.shape.len() as i64;
    if !(0..=1).contains(&diff) {
        bail!(Runtime, "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and (input.dim() - other.dim()) <= 1");
    }
    let vector = diff == 1;
    let mut bshape = bt.shape.clone();
    if vector {
        bshape.push(1);
    }
    let (m, n) = (a.shape[ra - 2], a.shape[ra - 1]);
    let rb = bshape.len();
    if bshape[rb - 2] != m {
        bail!(Runtime, "torch.linalg.lstsq: input.size(-2) should match other.size(-{})", if vector { 1 } else { 2 });
    }
    let k = bshape[rb - 1];
    let batch = lx.b.broadcast_shapes(&a.shape[..ra - 2], &bshape[..rb - 2])?;
    let mut sa = batch.clone();
    sa.extend([m, n]);
    let mut sb = batch.clone();
    sb.extend([m, k]);
    let bv = lx.b.reshape(bt.value, &bshape)?;
    let av = lx.expand(a.value, &sa)?;
    let bv = lx.expand(bv, &sb)?;
    let (a3, _) = to3(lx.b, av)?;
    let (b3, _) = to3(lx.b, bv)?;
    let bb = lx.shape(a3)[0];
    let kk = m.min(n);
    let dt = a.dtype;
    let real_dt = dt.complex_part().unwrap_or(dt);
    // A = U diag(s) V^H with U [B, m, kk], V [B, n, kk].
    let (u, s, v) = if m >= n {
        let (u, s, v) = svd_tall(lx.b, a3, false, true)?;
        (u, s, v)
    } else {
        let at = adjoint(lx.b, a3)?;
        let (u, s, v) = svd_tall(lx.b, at, false, true)?;
        (v, s, u)
    };
    let rc = match rcond {
        _ if driver == "gels" => 0.0,
        Some(r) if r >= 0.0 => r,
        Some(_) => eps(dt),
        None => eps(dt) * (m.max(n) as f64),
    };
    let (sol, rank) = if kk == 0 || bb == 0 {
        (lx.full(dt, 0.0, &[bb, n, k])?, lx.full(DType::I64, 0.0, &[bb])?)
    } else {
        let smax = lx.b.slice(s, &[0, 0], &[bb, 1], &[1, 1])?;
        let smax = lx.b.reshape(smax, &[bb])?;
        let rcv = lx.full_like(smax, rc)?;
        let thr = lx.b.mul(smax, rcv)?;
        let thr = bc(lx.b, thr, &[bb, kk], &[0])?;
        let keep = lx.b.compare(s, thr, CompareDir::Gt)?;
        let one = lx.full_like(s, 1.0)?;
        let safe = lx.b.select(keep, s, one)?;
        let inv = lx.b.div(one, safe)?;
        let zero = lx.full_like(s, 0.0)?;
        let inv = lx.b.select(keep, inv, zero)?;
        let ub = mm_hn(lx.b, u, b3)?; // [B, kk, k]
        let inv = like(lx.b, inv, ub)?;
        let ib = bc(lx.b, inv, &[bb, kk, k], &[0, 1])?;
        let ub = lx.b.mul(ub, ib)?;
        let x = mm(lx.b, v, ub)?; // [B, n, k]
        let cnt = lx.cast(keep, DType::I64)?;
        (x, lx.b.reduce_sum(cnt, &[1])?)
    };
    let solution = from_batch(lx.b, sol, &batch)?;
    let residuals = if m > n && driver != "gelsy" {
        let ax = mm(lx.b, a3, sol)?;
        let r = lx.b.sub(ax, b3)?;
        let r2 = abs2(lx.b, r)?;
        let r2 = lx.b.reduce_sum(r2, &[1])?; // [B, k], real
        from_batch(lx.b, r2, &batch)?
    } else {
        lx.full(real_dt, 0.0, &[0])?
    };
    let solution = if vector {
        let mut s2 = batch.clone();
        s2.push(n);
        lx.b.reshape(solution, &s2)?
    } else {
        solution
    };
    let rank = if driver == "gels" {
        lx.full(DType::I64, 0.0, &[0])?
    } else {
        lx.b.reshape(rank, &batch)?
    };
    let sv = if matches!(driver.as_str(), "gelsd" | "gelss") {
        from_batch(lx.b, s, &batch)?
    } else {
        lx.full(real_dt, 0.0, &[0])?
    };
    Ok(vec![solution, residuals, rank, sv])
}
