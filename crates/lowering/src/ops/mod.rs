//! Op families. Each file exports `OPS: &[OpEntry]`, its rows of the table.
use crate::table::OpEntry;

mod activation;
mod attention;
mod cholesky;
mod conv;
mod core;
mod coverage;
mod dynamic;
mod elementwise;
mod factory;
mod foreach;
mod indexing;
mod linalg;
mod misc;
mod misc2;
mod nn;
mod pool;
mod random;
mod reduce;
mod resize;
mod selection;
mod shape;
mod special;

pub(crate) const FAMILIES: &[&[OpEntry]] = &[
    core::OPS,
    conv::OPS,
    elementwise::OPS,
    activation::OPS,
    reduce::OPS,
    nn::OPS,
    pool::OPS,
    resize::OPS,
    linalg::OPS,
    shape::OPS,
    indexing::OPS,
    factory::OPS,
    random::OPS,
    foreach::OPS,
    dynamic::OPS,
    selection::OPS,
    coverage::OPS,
    special::OPS,
    misc::OPS,
    misc2::OPS,
    attention::OPS,
    cholesky::OPS,
];
