//! (to be filled) reduce ops.
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[];
