//! PyTorch refuses to write through a view in which several elements share
//! one memory location (an `expand`ed tensor): the result would depend on
//! the order of the writes. Its CPU and CUDA kernels check this in
//! TensorIterator, so for the ops that go through it: pointwise ops (their
//! out= and in-place forms), copy_, where's out=, and the random in-place
//! fills; a few kernels check their result themselves (mm, addmm, cat,
//! sort, gather). fill_, zero_, reductions, bmm and index_put_ do not.
//! Ops reach the engine without TensorIterator, so it checks that set here.
use crate::call::{Call, CallValue, TensorRef};
use crate::error::{EngineError, Result};

/// Ops outside PyTorch's `pointwise` tag whose kernels check too (by name
/// without overload).
const ALSO_CHECKED: &[&str] = &[
    "aten::copy_",
    "aten::normal_",
    "aten::uniform_",
    "aten::bernoulli_",
    "aten::random_",
    "aten::exponential_",
    "aten::geometric_",
    "aten::log_normal_",
    "aten::cauchy_",
    // These check their result explicitly (assert_no_internal_overlap).
    "aten::mm",
    "aten::addmm",
    "aten::cat",
    "aten::sort",
    "aten::gather",
];
const ALSO_CHECKED_OVERLOADS: &[&str] = &["aten::where.self_out"];

/// The CPU's error when `call` would write through such a view. This runs
/// for every op, so it looks for the rare part first (a written view with a
/// stride-0 dimension); only then does the op's name matter.
pub fn check(call: &Call) -> Result<()> {
    let overlapping_write = call
        .args
        .iter()
        .any(|a| a.write != 0 && matches!(&a.value, CallValue::Tensor(t) if has_internal_overlap(t)));
    if overlapping_write && (call.pointwise || is_also_checked(call.op)) {
        return Err(EngineError::runtime(
            "unsupported operation: more than one element of the written-to tensor refers to a single memory \
             location. Please clone() the tensor before performing the operation."
                .to_string(),
        ));
    }
    Ok(())
}

fn is_also_checked(op: &str) -> bool {
    let name = op.split('.').next().unwrap_or(op);
    ALSO_CHECKED.contains(&name) || ALSO_CHECKED_OVERLOADS.contains(&op)
}

/// PyTorch's `has_internal_overlap` == YES: a dimension of more than one
/// element with stride 0. (Other overlapping layouts are "too hard" to
/// tell, and PyTorch lets them through too.)
fn has_internal_overlap(t: &TensorRef) -> bool {
    t.sizes.iter().zip(t.strides.iter()).any(|(&size, &stride)| size > 1 && stride == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_fills_and_copies_are_checked_by_name_and_other_ops_only_when_pointwise() {
        for op in ["aten::copy_", "aten::bernoulli_.float", "aten::random_.from", "aten::where.self_out"] {
            assert!(is_also_checked(op), "{op}");
        }
        for op in ["aten::fill_.Scalar", "aten::zero_", "aten::index_put_", "aten::sum.IntList_out", "aten::where.self"] {
            assert!(!is_also_checked(op), "{op}");
        }
    }
}
