//! (to be filled) shape ops.
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[];
