//! (to be filled) nn ops.
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[];
