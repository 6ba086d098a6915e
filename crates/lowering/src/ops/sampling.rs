//! Distances, sliding-block and sampling ops: `_pdist_forward`/`_cdist_forward`
//! and their backwards (`distance`), `im2col`/`col2im` (`fold`),
//! `grid_sampler_2d/3d` and backwards (`grid`),
//! `fractional_max_pool2d/3d` and backwards (`fracpool`), and the random
//! `multinomial` and `rrelu_with_noise` (`draw`).
//!
//! Shared here: row gathers and scatter-adds over a `[rows, ...]` table with
//! i64 row indices, which the submodules build their lookups from.
use stablehlo::{DType, GatherDims, ScatterDims, Value};

use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

mod distance;
mod draw;
mod fold;
mod fracpool;
mod grid;

pub const OPS: &[OpEntry] = &[
    op!("_pdist_forward", distance::pdist_forward),
    op!("_pdist_backward", distance::pdist_backward),
    op!("_cdist_forward", distance::cdist_forward),
    op!("_cdist_backward", distance::cdist_backward),
    op!("im2col", fold::im2col),
    op!("col2im", fold::col2im),
    op!("grid_sampler_2d", grid::grid_sampler),
    op!("grid_sampler_3d", grid::grid_sampler),
    op!("grid_sampler_2d_backward", grid::grid_sampler_backward),
    op!("grid_sampler_3d_backward", grid::grid_sampler_backward),
    op!("fractional_max_pool2d", fracpool::fractional_max_pool),
    op!("fractional_max_pool3d", fracpool::fractional_max_pool),
    op!("fractional_max_pool2d_backward", fracpool::fractional_max_pool_backward),
    op!("fractional_max_pool3d_backward", fracpool::fractional_max_pool_backward),
    op!("multinomial", draw::multinomial),
    op!("rrelu_with_noise", draw::rrelu_with_noise),
    op!("rrelu_with_noise_functional", draw::rrelu_with_noise),
];

/// Rows `idx` (i64 of any shape S) of `table` (`[R, rest..]`) → `[S.., rest..]`.
/// Indices must lie in `[0, R)` (the runtime clamps others).
pub(crate) fn take_rows(lx: &mut Lower, table: Value, idx: Value) -> Result<Value> {
    let tshape = lx.shape(table);
    let s = lx.shape(idx).len() as i64;
    let rest = tshape.len() as i64 - 1;
    let mut slice = tshape.clone();
    slice[0] = 1;
    let dims = GatherDims {
        offset_dims: (s..s + rest).collect(),
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0],
        index_vector_dim: s,
        ..Default::default()
    };
    Ok(lx.b.gather(table, idx, &dims, &slice, false)?)
}

/// `table` (`[R, rest..]`) with `upd` (`[S.., rest..]`) added at rows `idx`
/// (i64 of shape S); duplicate rows accumulate.
pub(crate) fn add_rows(lx: &mut Lower, table: Value, idx: Value, upd: Value) -> Result<Value> {
    let s = lx.shape(idx).len() as i64;
    let rest = lx.shape(table).len() as i64 - 1;
    let dims = ScatterDims {
        update_window_dims: (s..s + rest).collect(),
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: s,
        ..Default::default()
    };
    Ok(lx.b.scatter(table, idx, upd, &dims, |b, l, r| Ok(vec![b.add(l[0], r[0])?]))?)
}

/// A constant like `v` (same dtype and shape).
pub(crate) fn c(lx: &mut Lower, like: Value, x: f64) -> Result<Value> {
    lx.full_like(like, x)
}

/// The dtype float math runs in: f64 stays, everything else computes in f32.
pub(crate) fn compute_type(d: DType) -> DType {
    if d == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// The short dtype name PyTorch prints ("Float", "Long", ...).
pub(crate) fn tname(d: DType) -> &'static str {
    super::elementwise::type_name(d)
}
