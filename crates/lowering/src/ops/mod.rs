//! Op families. Each file exports `OPS: &[OpEntry]`, its rows of the table.
use crate::table::OpEntry;

mod activation;
mod asserts;
mod attention;
mod cholesky;
pub(crate) mod complex;
pub(crate) mod complex_inverse;
mod conv;
mod core;
mod coverage;
pub(crate) mod dynamic;
mod elementwise;
mod factory;
mod fft;
mod amp;
mod foreach;
mod group_norm;
mod indexing;
mod lapack_dtypes;
mod linalg;
mod linalg_lu;
mod linalg_orth;
mod losses;
mod misc;
mod misc2;
mod nn;
pub(crate) mod optim;
mod pool;
mod random;
mod reduce;
mod resize;
mod resize_u8;
mod samplers;
mod sampling;
mod selection;
mod shape;
mod special;
mod special_fns;
mod unfold_backward;
mod windows;

pub(crate) const FAMILIES: &[&[OpEntry]] = &[
    core::OPS,
    conv::OPS,
    elementwise::OPS,
    activation::OPS,
    reduce::OPS,
    nn::OPS,
    group_norm::OPS,
    pool::OPS,
    resize::OPS,
    sampling::OPS,
    linalg::OPS,
    linalg_lu::OPS,
    linalg_orth::OPS,
    shape::OPS,
    indexing::OPS,
    factory::OPS,
    random::OPS,
    samplers::OPS,
    foreach::OPS,
    amp::OPS,
    optim::OPS,
    dynamic::OPS,
    selection::OPS,
    coverage::OPS,
    special::OPS,
    special_fns::OPS,
    misc::OPS,
    misc2::OPS,
    unfold_backward::OPS,
    attention::OPS,
    cholesky::OPS,
    complex::OPS,
    fft::OPS,
    losses::OPS,
    windows::OPS,
    asserts::OPS,
];
