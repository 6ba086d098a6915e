//! (to be filled) random ops.
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[];
