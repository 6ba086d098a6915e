//! Op families. Each file exports `OPS: &[OpEntry]`, its rows of the table.
use crate::table::OpEntry;

mod activation;
mod core;
mod coverage;
mod dynamic;
mod elementwise;
mod factory;
mod foreach;
mod indexing;
mod linalg;
mod nn;
mod random;
mod reduce;
mod shape;

pub(crate) const FAMILIES: &[&[OpEntry]] = &[
    core::OPS,
    elementwise::OPS,
    activation::OPS,
    reduce::OPS,
    nn::OPS,
    linalg::OPS,
    shape::OPS,
    indexing::OPS,
    factory::OPS,
    random::OPS,
    foreach::OPS,
    dynamic::OPS,
    coverage::OPS,
];
