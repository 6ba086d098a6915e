//! uint8 bilinear and bicubic resampling (plain and antialiased), in the
//! fixed point the CPU uses, so image pipelines (torchvision's `Resize` on
//! uint8 tensors) give the CPU's bytes rather than a float result rounded
//! once.
//!
//! The CPU (UpSampleKernel.cpp, after Pillow) resamples one dim at a time,
//! width first, skipping a dim whose size does not change. Per dim the
//! weights are computed in f64, scaled to int16 at the largest precision `p`
//! under which the largest weight fits, and every output byte is
//! `clamp((sum w_int * x + 2^(p-1)) >> p, 0, 255)`: each pass rounds to a
//! byte. Here each pass is an int32 contraction with the `[out, in]` matrix
//! of the int16 weights, so the arithmetic is exact and equal to the CPU's.
use stablehlo::{DType, Value};

use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::resize::apply_matrix;

/// The resampling filter of one uint8 op.
#[derive(Copy, Clone)]
pub(super) struct Filter {
    pub cubic: bool,
    pub antialias: bool,
}

/// Resamples the last two dims of the uint8 `x` from `ins` to `outs`.
pub(super) fn upsample_u8(
    lx: &mut Lower,
    x: Value,
    ins: &[i64],
    outs: &[i64],
    align_corners: bool,
    scales: &[Option<f64>],
    filter: Filter,
) -> Result<Value> {
    let rank = lx.shape(x).len();
    let n = ins.len();
    let mut v = lx.cast(x, DType::I32)?;
    // Width (the last dim) first, then outwards, as the CPU does.
    for i in (0..n).rev() {
        if ins[i] == outs[i] {
            continue;
        }
        let (weights, precision) = int16_weights(ins[i], outs[i], align_corners, scales[i], filter);
        // An int32 contraction: the integer weights are exact as f64.
        let r = apply_matrix(lx, v, rank - n + i, &weights, outs[i], ins[i], false)?;
        let shape = lx.shape(r);
        let half = lx.b.splat_i64(DType::I32, 1 << precision.saturating_sub(1), &shape)?;
        let bits = lx.b.splat_i64(DType::I32, precision as i64, &shape)?;
        let sum = lx.b.add(r, half)?;
        let shifted = lx.b.shift_right_arithmetic(sum, bits)?;
        let lo = lx.b.splat_i64(DType::I32, 0, &shape)?;
        let hi = lx.b.splat_i64(DType::I32, 255, &shape)?;
        v = lx.b.clamp(lo, shifted, hi)?;
    }
    lx.cast(v, DType::U8)
}

/// `area_pixel_compute_scale` in f64.
fn scale_of(inp: i64, out: i64, align_corners: bool, scale: Option<f64>) -> f64 {
    if align_corners {
        if out > 1 {
            (inp - 1) as f64 / (out - 1) as f64
        } else {
            0.0
        }
    } else {
        match scale {
            Some(s) if s > 0.0 => 1.0 / s,
            _ => inp as f64 / out as f64,
        }
    }
}

/// The triangle filter, or the cubic convolution with `a` (-0.5 for
/// antialiasing, as PIL; -0.75 otherwise, as OpenCV and the float path).
fn filter_at(filter: Filter, x: f64) -> f64 {
    let x = x.abs();
    if !filter.cubic {
        return if x < 1.0 { 1.0 - x } else { 0.0 };
    }
    let a = if filter.antialias { -0.5 } else { -0.75 };
    if x < 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    } else {
        0.0
    }
}

/// The row-major `[out, in]` int16 weights of one dim and their precision.
fn int16_weights(inp: i64, out: i64, align_corners: bool, scale: Option<f64>, filter: Filter) -> (Vec<f64>, u32) {
    let s = scale_of(inp, out, align_corners, scale);
    let taps = if filter.cubic { 4 } else { 2 };
    let mut rows = Vec::with_capacity(out as usize);
    let mut wt_max = 0.0f64;
    for i in 0..out {
        let (start, w, m) =
            if filter.antialias { antialiased_taps(i, inp, s, taps, filter) } else { plain_taps(i, inp, s, taps, filter, align_corners) };
        wt_max = wt_max.max(m);
        rows.push((start, w));
    }
    // The largest precision under which the largest weight, doubled, still
    // fits in int16.
    let mut precision = 0u32;
    while precision < 22 && ((0.5 + wt_max * (1u64 << (precision + 1)) as f64) as i64) < (1 << 15) {
        precision += 1;
    }
    let mut m = vec![0.0f64; (out * inp) as usize];
    for (i, (start, w)) in rows.iter().enumerate() {
        for (j, &wj) in w.iter().enumerate() {
            let v = wj * (1u64 << precision) as f64;
            // Rounded half away from zero, then truncated, as the C++ casts do.
            let q = if v < 0.0 { (v - 0.5) as i64 } else { (v + 0.5) as i64 };
            m[i * inp as usize + (*start as usize) + j] += q as f64;
        }
    }
    (m, precision)
}

/// Antialiased taps of output `i` (`_compute_indices_min_size_weights_aa`):
/// the filter widened by the scale when downsampling, normalized. Returns
/// the first source index, the weights, and their maximum.
fn antialiased_taps(i: i64, inp: i64, s: f64, taps: i64, filter: Filter) -> (i64, Vec<f64>, f64) {
    let half = taps as f64 * 0.5;
    let support = if s >= 1.0 { half * s } else { half };
    let max_taps = (support.ceil() as i64) * 2 + 1;
    let center = s * (i as f64 + 0.5);
    let invscale = if s >= 1.0 { 1.0 / s } else { 1.0 };
    // `as i64` truncates toward zero, as the C++ casts do.
    let start = ((center - support + 0.5) as i64).max(0);
    let size = (((center + support + 0.5) as i64).min(inp) - start).clamp(0, max_taps);
    let mut w: Vec<f64> = (0..size).map(|j| filter_at(filter, (j as f64 + start as f64 - center + 0.5) * invscale)).collect();
    let total: f64 = w.iter().sum();
    let mut wt_max = 0.0f64;
    if total != 0.0 {
        for v in w.iter_mut() {
            *v /= total;
            wt_max = wt_max.max(*v);
        }
    }
    (start, w, wt_max)
}

/// Plain (not antialiased) taps of output `i` (`_compute_indices_min_size_weights`):
/// the float path's source index and fraction, with taps past a border
/// folded onto the border sample. The maximum is taken as the folding
/// goes, as the CPU does (it decides the precision).
fn plain_taps(i: i64, inp: i64, s: f64, taps: i64, filter: Filter, align_corners: bool) -> (i64, Vec<f64>, f64) {
    let src = if align_corners {
        s * i as f64
    } else if filter.cubic {
        s * (i as f64 + 0.5) - 0.5
    } else {
        (s * (i as f64 + 0.5) - 0.5).max(0.0)
    };
    // guard_index_and_lambda floors in float32 (floorf).
    let index = ((src as f32).floor() as i64).min(inp - 1);
    let lambda = (src - index as f64).clamp(0.0, 1.0);
    let support = taps / 2;
    let unbound_min = index - support + 1;
    let start = unbound_min.max(0);
    let size = ((index + support + 1).min(inp) - start).clamp(0, taps);
    let mut w = vec![0.0f64; taps as usize];
    let mut wt_max = 0.0f64;
    let mut k = 0usize;
    for j in 0..taps {
        let f = filter_at(filter, (j + 1 - support) as f64 - lambda);
        if unbound_min + j <= 0 {
            k = 0;
        } else if unbound_min + j >= inp - 1 {
            k = (size - 1).max(0) as usize;
        }
        w[k] += f;
        wt_max = wt_max.max(w[k]);
        k += 1;
    }
    w.truncate(size as usize);
    (start, w, wt_max)
}
