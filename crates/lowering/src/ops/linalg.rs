//! (to be filled) linalg ops.
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[];
