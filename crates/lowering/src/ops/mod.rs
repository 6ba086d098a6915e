//! Op families. Each file exports `OPS: &[OpEntry]`.
use crate::table::OpEntry;

mod elementwise;

pub(crate) const FAMILIES: &[&[OpEntry]] = &[elementwise::OPS];
