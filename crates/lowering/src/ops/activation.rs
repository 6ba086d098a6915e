//! (to be filled) activation ops.
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[];
