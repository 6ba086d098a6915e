//! The memory layout of a pointwise op's new output: TensorIterator's rule.
//!
//! On the CPU and CUDA the output of a pointwise op (PyTorch tags them
//! `pointwise`: relu, abs, where, ...) is laid out like its inputs: a
//! channels-last image stays channels-last, a transposed matrix gives a
//! transposed result. Code relies on that: `y.permute(0, 2, 3, 1).view(n, -1, c)`
//! after a channels-last `relu` works only if `y` is channels-last.
//! (Structured ops, such as add and mul, get this from PyTorch itself, which
//! allocates their output before calling the `.out` kernel.)
//!
//! TensorIterator (aten/src/ATen/TensorIterator.cpp) decides in two steps:
//! - fast set-up: when every input has the output's shape, and all are
//!   contiguous, or all channels-last, or all non-overlapping and dense with
//!   equal strides, the output takes that layout;
//! - otherwise it orders the dims from fastest to slowest by comparing the
//!   inputs' strides (first input first, skipping broadcast dims) and lays
//!   the output out densely in that order.
//!
//! Convolutions, batch norm, pooling and 2-D/3-D resampling are not
//! pointwise, but their CPU and CUDA kernels give a channels-last output for
//! a channels-last input (a convolution also for a channels-last weight):
//! a `model.to(memory_format=torch.channels_last)` network stays
//! channels-last from layer to layer.
use crate::call::{Call, CallValue, TensorRef};
use crate::transfer::contiguous_strides;

/// The strides of a new output of `shape` from a pointwise `call`, or None
/// when they are the contiguous ones.
pub fn pointwise_strides(call: &Call, shape: &[i64]) -> Option<Vec<i64>> {
    if !may_be_permuted(shape) {
        return None;
    }
    strides_after(read_tensors(call, shape), shape)
}

/// Whether an output of `shape` can have a layout other than contiguous
/// (checked first: this runs for every new output of every op).
fn may_be_permuted(shape: &[i64]) -> bool {
    shape.len() >= 2 && !shape.contains(&0)
}

/// The tensors `call` reads that can broadcast to `shape`, in argument order.
fn read_tensors<'c, 'a>(call: &'c Call<'a>, shape: &[i64]) -> Vec<&'c TensorRef<'a>> {
    call.args
        .iter()
        .filter(|a| a.write == 0)
        .filter_map(|a| match &a.value {
            CallValue::Tensor(t) => Some(t),
            _ => None,
        })
        .filter(|t| t.sizes.len() <= shape.len())
        .collect()
}

/// TensorIterator's layout for an output of `shape` computed from `inputs`
/// (the first decides ties), or None when it is the contiguous one.
fn strides_after(inputs: Vec<&TensorRef<'_>>, shape: &[i64]) -> Option<Vec<i64>> {
    if inputs.is_empty() {
        return None;
    }
    let strides = match fast_setup(&inputs, shape) {
        Some(s) => s,
        None => dense_strides(shape, &fastest_first(&inputs, shape)),
    };
    (strides != contiguous_strides(shape)).then_some(strides)
}

/// Ops PyTorch does not tag `pointwise` whose CPU and CUDA kernels still
/// lay their outputs out by TensorIterator's rule: they run on
/// TensorIterator (`rsub(x, y)`, `floor_divide`, `hardswish`, `complex`,
/// `polar`, `huber_loss` without reduction, both of `native_dropout`'s
/// results), or allocate with `empty_like`'s preserved layout, which is the
/// same rule for one input (`flip`). A transposed input then gives a
/// transposed result, as on the CPU. (`complex` and `polar` reach the
/// engine only as their out= forms, through upstream's composite kernels;
/// the out= forms listed restride an out= they resize, as TensorIterator
/// does.)
const UNTAGGED_POINTWISE_OPS: &[&str] = &[
    "aten::rsub.Tensor",
    "aten::floor_divide",
    "aten::floor_divide.out",
    "aten::hardswish",
    "aten::hardswish.out",
    "aten::complex.out",
    "aten::polar.out",
    "aten::huber_loss",
    "aten::huber_loss.out",
    "aten::native_dropout",
    "aten::flip",
];

/// TensorIterator's layout for one of `UNTAGGED_POINTWISE_OPS`; None for
/// other ops.
pub fn untagged_pointwise_strides(call: &Call, shape: &[i64]) -> Option<Vec<i64>> {
    if !may_be_permuted(shape) || !UNTAGGED_POINTWISE_OPS.contains(&call.op) {
        return None;
    }
    let mut inputs = read_tensors(call, shape);
    if call.op.starts_with("aten::rsub") {
        // rsub(x, y) runs as sub(y, x): y comes first.
        inputs.reverse();
    }
    strides_after(inputs, shape)
}

/// Ops whose output is channels-last when their input is (and which
/// argument decides; a convolution also follows its weight, argument 1).
const CHANNELS_LAST_OPS: &[&str] = &[
    "aten::convolution_overrideable",
    "aten::native_batch_norm",
    "aten::_native_batch_norm_legit",
    "aten::_native_batch_norm_legit.no_stats",
    "aten::_native_batch_norm_legit_no_training",
    "aten::max_pool2d_with_indices",
    "aten::max_pool3d_with_indices",
    "aten::avg_pool2d",
    "aten::avg_pool3d",
    "aten::_adaptive_avg_pool2d",
    "aten::_adaptive_avg_pool3d",
    "aten::adaptive_max_pool2d",
    "aten::upsample_nearest2d",
    "aten::_upsample_nearest_exact2d",
    "aten::upsample_bilinear2d",
    "aten::upsample_bicubic2d",
    "aten::_upsample_bilinear2d_aa",
    "aten::_upsample_bicubic2d_aa",
    "aten::upsample_nearest3d",
    "aten::upsample_trilinear3d",
];

/// Channels-last strides for an output of `shape` from one of
/// `CHANNELS_LAST_OPS` whose input (or a convolution's weight) is
/// channels-last; None otherwise.
pub fn channels_last_strides_of(call: &Call, shape: &[i64]) -> Option<Vec<i64>> {
    if channels_last_order(shape.len()).is_none() || !CHANNELS_LAST_OPS.contains(&call.op) {
        return None;
    }
    let suggests = |i: usize| match call.args.get(i).map(|a| &a.value) {
        Some(CallValue::Tensor(t)) => t.sizes.len() == shape.len() && is_channels_last(t) && !t.is_contiguous(),
        _ => false,
    };
    let conv = call.op == "aten::convolution_overrideable";
    if suggests(0) || (conv && suggests(1)) {
        channels_last_strides(shape)
    } else {
        None
    }
}

/// TensorIterator's fast set-up: Some(strides) when it applies.
fn fast_setup(inputs: &[&TensorRef], shape: &[i64]) -> Option<Vec<i64>> {
    if inputs.iter().any(|t| t.sizes != shape) {
        return None;
    }
    if inputs.iter().all(|t| t.is_contiguous()) {
        return Some(contiguous_strides(shape));
    }
    if inputs.iter().all(|t| is_channels_last(t)) {
        return channels_last_strides(shape);
    }
    let first = inputs[0];
    if inputs.iter().all(|t| t.is_non_overlapping_and_dense() && t.strides == first.strides) {
        return Some(first.strides.to_vec());
    }
    None
}

/// TensorIterator's `reorder_dimensions`: the dims, fastest first.
fn fastest_first(inputs: &[&TensorRef], shape: &[i64]) -> Vec<usize> {
    let n = shape.len();
    // Each input's strides broadcast to `shape` (0 where it is broadcast).
    let strides: Vec<Vec<i64>> = inputs
        .iter()
        .map(|t| {
            let lead = n - t.sizes.len();
            (0..n)
                .map(|d| {
                    if d < lead {
                        return 0;
                    }
                    let k = d - lead;
                    if t.sizes[k] == 1 && shape[d] != 1 {
                        0
                    } else {
                        t.strides[k]
                    }
                })
                .collect()
        })
        .collect();
    // >0: swap dim0 (now before dim1) and dim1; <0: keep; 0: undecided.
    let should_swap = |d0: usize, d1: usize| -> i32 {
        for s in &strides {
            let (s0, s1) = (s[d0], s[d1]);
            if s0 == 0 || s1 == 0 {
                continue;
            }
            if s0 < s1 {
                return -1;
            }
            if s0 > s1 {
                return 1;
            }
            // Equal strides: the smaller dim goes first.
            if shape[d0] > shape[d1] {
                return 1;
            }
        }
        0
    };
    let mut perm: Vec<usize> = (0..n).rev().collect();
    // An insertion sort that tolerates undecided comparisons, as ATen's.
    for i in 1..n {
        let mut d1 = i;
        for d0 in (0..i).rev() {
            let c = should_swap(perm[d0], perm[d1]);
            if c > 0 {
                perm.swap(d0, d1);
                d1 = d0;
            } else if c < 0 {
                break;
            }
        }
    }
    perm
}

/// Dense strides laying out dims in `fastest_first` order.
fn dense_strides(shape: &[i64], fastest_first: &[usize]) -> Vec<i64> {
    let mut strides = vec![0; shape.len()];
    let mut next = 1;
    for &d in fastest_first {
        strides[d] = next;
        next *= shape[d];
    }
    strides
}

/// Dims from fastest to slowest in channels-last order (4-D and 5-D).
fn channels_last_order(ndim: usize) -> Option<&'static [usize]> {
    match ndim {
        4 => Some(&[1, 3, 2, 0]),
        5 => Some(&[1, 4, 3, 2, 0]),
        _ => None,
    }
}

fn is_channels_last(t: &TensorRef) -> bool {
    let Some(order) = channels_last_order(t.sizes.len()) else { return false };
    let mut expected = 1;
    for &d in order {
        if t.sizes[d] != 1 {
            if t.strides[d] != expected {
                return false;
            }
            expected *= t.sizes[d];
        }
    }
    true
}

fn channels_last_strides(shape: &[i64]) -> Option<Vec<i64>> {
    channels_last_order(shape.len()).map(|order| dense_strides(shape, order))
}

/// The order (slowest dim first) in which a value of this layout is
/// stored: the permutation that turns it into its storage order.
pub fn storage_order(strides: &[i64], shape: &[i64]) -> Vec<i64> {
    let mut dims: Vec<usize> = (0..shape.len()).collect();
    // Stable: among equal strides (size-1 dims) keep the logical order.
    dims.sort_by(|&a, &b| strides[b].cmp(&strides[a]));
    dims.into_iter().map(|d| d as i64).collect()
}
