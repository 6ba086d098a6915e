//! (to be filled) factory ops.
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[];
