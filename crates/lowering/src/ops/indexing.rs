//! (to be filled) indexing ops.
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[];
