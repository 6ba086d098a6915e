//! `linalg_polar` (torch.linalg.polar): A = U H from the thin SVD
//! A = W diag(s) V^H, as the CPU computes it: U = W V^H (orthonormal
//! columns), H = V diag(s) V^H (Hermitian positive semidefinite). Both are
//! unique where A has full column rank, so they match LAPACK's even though
//! singular vectors are only defined up to sign.
use stablehlo::Value;

use super::svd::svd_tall;
use super::{from_batch, mm_nh, scale_cols, to3};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

/// linalg_polar(A) -> (U, H)
pub(super) fn linalg_polar(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let a = args.tensor(0)?;
    super::check_matrix(lx, a, "A")?;
    let r = a.shape.len();
    let (m, n) = (a.shape[r - 2], a.shape[r - 1]);
    if m < n {
        bail!(Runtime, "linalg.polar: input must have at least as many rows as columns, but got {m} by {n} matrices");
    }
    let (a3, batch) = to3(lx.b, a.value)?;
    let (w, s, v) = svd_tall(lx.b, a3, false, true)?;
    let u = mm_nh(lx.b, w, v)?;
    let vs = scale_cols(lx.b, v, s)?;
    let h = mm_nh(lx.b, vs, v)?;
    Ok(vec![from_batch(lx.b, u, &batch)?, from_batch(lx.b, h, &batch)?])
}
