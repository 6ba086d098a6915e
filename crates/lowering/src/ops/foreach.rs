//! (to be filled) foreach ops.
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[];
