//! The lowering table: op name → lowering function, built once from the
//! per-family lists in `ops/`.
use std::collections::HashMap;
use std::sync::OnceLock;

use stablehlo::{DType, Value};

use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;

pub type LowerFn = fn(&mut Lower, &Args) -> Result<Vec<Value>>;

/// One row of the table.
pub struct OpEntry {
    /// "add" (every overload and the in-place/out variants), or a full
    /// "add.Tensor" when overloads need different lowerings.
    pub name: &'static str,
    pub lower: LowerFn,
    /// The lowering reads Scalar arguments' values (e.g. arange's bounds),
    /// so they become part of the cache key instead of runtime inputs.
    pub static_scalars: bool,
    /// For ops whose output shape depends on values (nonzero,
    /// masked_select): a lowering computing that size as one rank-0 i64.
    /// The engine runs it first, reads it back (a host sync, as CUDA
    /// does), and hands it to `lower` as `Lower::dynamic_size`.
    pub size: Option<LowerFn>,
    /// When only some calls have a data-dependent shape (index with a
    /// boolean mask): whether this one does, from the dtypes of each
    /// argument's tensors. None: every call (when `size` is set).
    pub size_when: Option<SizeWhenFn>,
}

pub type SizeWhenFn = fn(arg_dtypes: &[Vec<DType>]) -> bool;

/// A row of the table: `op!("relu", relu)`, `op!("arange", arange, static)`,
/// `op!("nonzero", nonzero, size = nonzero_count)`, or with `when = f` for a
/// size that only some calls need.
#[macro_export]
macro_rules! op {
    ($name:expr, $f:expr) => {
        $crate::table::OpEntry { name: $name, lower: $f, static_scalars: false, size: None, size_when: None }
    };
    ($name:expr, $f:expr, static) => {
        $crate::table::OpEntry { name: $name, lower: $f, static_scalars: true, size: None, size_when: None }
    };
    ($name:expr, $f:expr, size = $s:expr) => {
        $crate::table::OpEntry { name: $name, lower: $f, static_scalars: false, size: Some($s), size_when: None }
    };
    ($name:expr, $f:expr, size = $s:expr, when = $w:expr) => {
        $crate::table::OpEntry { name: $name, lower: $f, static_scalars: false, size: Some($s), size_when: Some($w) }
    };
}

fn table() -> &'static HashMap<&'static str, &'static OpEntry> {
    static TABLE: OnceLock<HashMap<&'static str, &'static OpEntry>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut m = HashMap::new();
        for family in crate::ops::FAMILIES {
            for entry in family.iter() {
                m.insert(entry.name, entry);
            }
        }
        m
    })
}

/// Finds the lowering of "aten::name.overload": first by "name.overload",
/// then by "name", then with an in-place trailing underscore removed.
pub fn lookup(full_name: &str) -> Option<&'static OpEntry> {
    let name = full_name.strip_prefix("aten::").unwrap_or(full_name);
    let t = table();
    if let Some(e) = t.get(name) {
        return Some(e);
    }
    let base = name.split('.').next().unwrap_or(name);
    if let Some(e) = t.get(base) {
        return Some(e);
    }
    let overload = name.split_once('.').map(|(_, o)| o);
    let functional = base.strip_suffix('_').filter(|b| !b.ends_with('_'))?;
    if let Some(o) = overload {
        if let Some(e) = t.get(format!("{functional}.{o}").as_str()) {
            return Some(e);
        }
    }
    t.get(functional).copied()
}

/// Every op name in the table, sorted (for docs and coverage reports).
pub fn names() -> Vec<&'static str> {
    let mut v: Vec<_> = table().keys().copied().collect();
    v.sort();
    v
}

/// The op's name without "aten::", overload, or a trailing note such as
/// " (cpu -> tpu)": "aten::mul_.Tensor" -> "mul_".
pub fn base_name(full_name: &str) -> &str {
    let name = full_name.strip_prefix("aten::").unwrap_or(full_name);
    name.split(['.', ' ']).next().unwrap_or(name)
}

/// Whether an op name is in-place by PyTorch's naming convention.
pub fn is_inplace(full_name: &str) -> bool {
    let base = base_name(full_name);
    base.ends_with('_') && !base.ends_with("__")
}

/// The base name of the op's functional form: "aten::mul_.Tensor" -> "mul".
pub fn functional_name(full_name: &str) -> &str {
    let base = base_name(full_name);
    if is_inplace(base) {
        &base[..base.len() - 1]
    } else {
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_reduce_to_their_functional_base() {
        assert_eq!(base_name("aten::mul_.Tensor"), "mul_");
        assert_eq!(functional_name("aten::mul_.Tensor"), "mul");
        assert_eq!(functional_name("aten::copy_ (cpu -> tpu)"), "copy");
        assert_eq!(functional_name("aten::__ior__.Tensor"), "__ior__");
        assert_eq!(functional_name("exp.out"), "exp");
        assert!(is_inplace("aten::add_.Tensor") && !is_inplace("aten::__and__.Tensor"));
    }
}
