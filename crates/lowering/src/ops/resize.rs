//! Resampling and border padding over the last 1-3 dims: upsample_nearest /
//! _upsample_nearest_exact / upsample_linear1d / bilinear2d / bicubic2d / trilinear3d
//! (+ backward), reflection_pad and replication_pad (+ backward).
//!
//! Every one is separable: along each spatial dim the output is either a
//! gather of the input (nearest, pads: an index map computed here, with the
//! CPU's float32 source-index arithmetic) or a linear map (interpolation: a
//! constant `[out, in]` weight matrix). Backward passes contract grad_output
//! with the transposed matrix of each dim (index maps become one-hot matrices).
use stablehlo::{DType, GatherDims, Value};

use crate::args::{Arg, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::ops::reduce::acc;
use crate::ops::resize_u8::{upsample_u8, Filter};
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("upsample_nearest1d", |lx, a| upsample(lx, a, 1, Kind::Nearest, false)),
    op!("upsample_nearest2d", |lx, a| upsample(lx, a, 2, Kind::Nearest, false)),
    op!("upsample_nearest3d", |lx, a| upsample(lx, a, 3, Kind::Nearest, false)),
    op!("_upsample_nearest_exact1d", |lx, a| upsample(lx, a, 1, Kind::NearestExact, false)),
    op!("_upsample_nearest_exact2d", |lx, a| upsample(lx, a, 2, Kind::NearestExact, false)),
    op!("_upsample_nearest_exact3d", |lx, a| upsample(lx, a, 3, Kind::NearestExact, false)),
    op!("upsample_linear1d", |lx, a| upsample(lx, a, 1, Kind::Linear, false)),
    op!("upsample_bilinear2d", |lx, a| upsample(lx, a, 2, Kind::Linear, false)),
    op!("upsample_trilinear3d", |lx, a| upsample(lx, a, 3, Kind::Linear, false)),
    op!("upsample_bicubic2d", |lx, a| upsample(lx, a, 2, Kind::Cubic, false)),
    op!("upsample_bicubic2d_backward", |lx, a| upsample(lx, a, 2, Kind::Cubic, true)),
    op!("_upsample_bilinear2d_aa", |lx, a| upsample(lx, a, 2, Kind::LinearAa, false)),
    op!("_upsample_bicubic2d_aa", |lx, a| upsample(lx, a, 2, Kind::CubicAa, false)),
    op!("_upsample_bilinear2d_aa_backward", |lx, a| upsample(lx, a, 2, Kind::LinearAa, true)),
    op!("_upsample_bicubic2d_aa_backward", |lx, a| upsample(lx, a, 2, Kind::CubicAa, true)),
    op!("upsample_nearest1d_backward", |lx, a| upsample(lx, a, 1, Kind::Nearest, true)),
    op!("upsample_nearest2d_backward", |lx, a| upsample(lx, a, 2, Kind::Nearest, true)),
    op!("upsample_nearest3d_backward", |lx, a| upsample(lx, a, 3, Kind::Nearest, true)),
    op!("_upsample_nearest_exact1d_backward", |lx, a| upsample(lx, a, 1, Kind::NearestExact, true)),
    op!("_upsample_nearest_exact2d_backward", |lx, a| upsample(lx, a, 2, Kind::NearestExact, true)),
    op!("_upsample_nearest_exact3d_backward", |lx, a| upsample(lx, a, 3, Kind::NearestExact, true)),
    op!("upsample_linear1d_backward", |lx, a| upsample(lx, a, 1, Kind::Linear, true)),
    op!("upsample_bilinear2d_backward", |lx, a| upsample(lx, a, 2, Kind::Linear, true)),
    op!("upsample_trilinear3d_backward", |lx, a| upsample(lx, a, 3, Kind::Linear, true)),
    op!("reflection_pad1d", |lx, a| border_pad(lx, a, 1, true, false)),
    op!("reflection_pad2d", |lx, a| border_pad(lx, a, 2, true, false)),
    op!("reflection_pad3d", |lx, a| border_pad(lx, a, 3, true, false)),
    op!("replication_pad1d", |lx, a| border_pad(lx, a, 1, false, false)),
    op!("replication_pad2d", |lx, a| border_pad(lx, a, 2, false, false)),
    op!("replication_pad3d", |lx, a| border_pad(lx, a, 3, false, false)),
    op!("reflection_pad1d_backward", |lx, a| border_pad(lx, a, 1, true, true)),
    op!("reflection_pad2d_backward", |lx, a| border_pad(lx, a, 2, true, true)),
    op!("reflection_pad3d_backward", |lx, a| border_pad(lx, a, 3, true, true)),
    op!("replication_pad1d_backward", |lx, a| border_pad(lx, a, 1, false, true)),
    op!("replication_pad2d_backward", |lx, a| border_pad(lx, a, 2, false, true)),
    op!("replication_pad3d_backward", |lx, a| border_pad(lx, a, 3, false, true)),
];

#[derive(Copy, Clone, PartialEq, Eq)]
enum Kind {
    Nearest,
    NearestExact,
    Linear,
    Cubic,
    /// Antialiased (separable filter, support scaled when downsampling).
    LinearAa,
    CubicAa,
}

impl Kind {
    fn interpolates(self) -> bool {
        !matches!(self, Kind::Nearest | Kind::NearestExact)
    }
}

/// How one spatial dim maps input to output.
enum Map {
    /// Output `j` is input `idx[j]`.
    Index(Vec<i64>),
    /// Row-major `[out, in]` weights.
    Matrix(Vec<f64>),
}

fn opt_float(args: &Args, i: usize) -> Option<f64> {
    match args.get(i) {
        Arg::Float(v) => Some(*v),
        Arg::Int(v) => Some(*v as f64),
        _ => None,
    }
}

/// Gathers `idx` along `dim` of `v`.
fn take(lx: &mut Lower, v: Value, dim: usize, idx: &[i64]) -> Result<Value> {
    let shape = lx.shape(v);
    let rank = shape.len();
    let iv = lx.b.constant_tensor_i64(DType::I64, &[idx.len() as i64, 1], idx)?;
    let dims = GatherDims {
        offset_dims: (0..rank as i64).filter(|&d| d != dim as i64).collect(),
        collapsed_slice_dims: vec![dim as i64],
        start_index_map: vec![dim as i64],
        index_vector_dim: 1,
        ..Default::default()
    };
    let mut sizes = shape.clone();
    sizes[dim] = 1;
    Ok(lx.b.gather(v, iv, &dims, &sizes, false)?)
}

/// Contracts `dim` of `v` with the `[out, in]` matrix `m`: forward maps in -> out,
/// backward (transposed) out -> in. The dim stays in place.
pub(super) fn apply_matrix(lx: &mut Lower, v: Value, dim: usize, m: &[f64], out: i64, inp: i64, backward: bool) -> Result<Value> {
    let rank = lx.shape(v).len() as i64;
    let dt = lx.dtype(v);
    let mv = lx.b.constant_tensor_f64(dt, &[out, inp], m)?;
    let mc = if backward { 0 } else { 1 };
    let r = lx.b.dot_general(v, mv, &[], &[], &[dim as i64], &[mc], None)?;
    let d = dim as i64;
    let mut perm: Vec<i64> = (0..d).collect();
    perm.push(rank - 1);
    perm.extend(d..rank - 1);
    Ok(lx.b.transpose(r, &perm)?)
}

fn one_hot(idx: &[i64], inp: i64) -> Vec<f64> {
    let mut m = vec![0.0; idx.len() * inp as usize];
    for (j, &i) in idx.iter().enumerate() {
        m[j * inp as usize + i as usize] += 1.0;
    }
    m
}

/// Applies per-dim maps to the last `maps.len()` dims of `v` (forward), or
/// their transposes (backward, `sizes` are the input sizes).
fn apply(lx: &mut Lower, mut v: Value, maps: &[Map], ins: &[i64], outs: &[i64], backward: bool) -> Result<Value> {
    let n = maps.len();
    let rank = lx.shape(v).len();
    for (i, m) in maps.iter().enumerate() {
        let dim = rank - n + i;
        v = match (m, backward) {
            (Map::Index(idx), false) => take(lx, v, dim, idx)?,
            (Map::Index(idx), true) => {
                let oh = one_hot(idx, ins[i]);
                apply_matrix(lx, v, dim, &oh, outs[i], ins[i], true)?
            }
            (Map::Matrix(w), b) => apply_matrix(lx, v, dim, w, outs[i], ins[i], b)?,
        };
    }
    Ok(v)
}

/// The map of one dim for upsampling `inp` -> `out` (PyTorch's UpSample.h).
fn upsample_map(kind: Kind, inp: i64, out: i64, align: bool, scale: Option<f64>, hi: bool) -> Map {
    match kind {
        Kind::Nearest | Kind::NearestExact => {
            let s: f32 = match scale {
                Some(s) if s > 0.0 => (1.0 / s) as f32,
                _ => inp as f32 / out as f32,
            };
            let off = if kind == Kind::NearestExact { 0.5f32 } else { 0.0 };
            Map::Index((0..out).map(|j| (((j as f32 + off) * s).floor() as i64).min(inp - 1)).collect())
        }
        _ => {
            // The CPU computes in opmath: double for float64, else float.
            let r = |x: f64| if hi { x } else { x as f32 as f64 };
            let s = if align {
                if out > 1 { r((inp - 1) as f64 / (out - 1) as f64) } else { 0.0 }
            } else {
                match scale {
                    Some(s) if s > 0.0 => r(1.0 / s),
                    _ => r(inp as f64 / out as f64),
                }
            };
            let mut m = vec![0.0; (out * inp) as usize];
            if kind == Kind::Cubic {
                cubic_weights(&mut m, inp, out, s, align, r);
                return Map::Matrix(m);
            }
            if matches!(kind, Kind::LinearAa | Kind::CubicAa) {
                aa_weights(&mut m, inp, out, s, kind == Kind::CubicAa, r);
                return Map::Matrix(m);
            }
            for j in 0..out {
                let src = if align { r(s * j as f64) } else { r(r(s * r(j as f64 + 0.5)) - 0.5).max(0.0) };
                let i0 = (src as i64).min(inp - 1);
                let i1 = if i0 < inp - 1 { i0 + 1 } else { i0 };
                let l1 = r(src - i0 as f64).clamp(0.0, 1.0);
                let l0 = r(1.0 - l1);
                m[(j * inp + i0) as usize] += l0;
                m[(j * inp + i1) as usize] += l1;
            }
            Map::Matrix(m)
        }
    }
}

/// Bicubic weights along one dim (A = -0.75, indices clamped to the border).
fn cubic_weights(m: &mut [f64], inp: i64, out: i64, s: f64, align: bool, r: impl Fn(f64) -> f64) {
    let a = -0.75;
    let c1 = |x: f64| r(r(r(r(r((a + 2.0) * x) - (a + 3.0)) * x) * x) + 1.0);
    let c2 = |x: f64| r(r(r(r(r(r(a * x) - 5.0 * a) * x) + 8.0 * a) * x) - 4.0 * a);
    for j in 0..out {
        let src = if align { r(s * j as f64) } else { r(r(s * r(j as f64 + 0.5)) - 0.5) };
        let i = src.floor();
        let t = r(src - i);
        let w = [c2(r(t + 1.0)), c1(t), c1(r(1.0 - t)), c2(r(r(1.0 - t) + 1.0))];
        for (k, wk) in w.iter().enumerate() {
            let idx = (i as i64 - 1 + k as i64).clamp(0, inp - 1);
            m[(j * inp + idx) as usize] += wk;
        }
    }
}

/// Antialiased weights (UpSampleKernel.cpp's _compute_indices_min_size_weights_aa):
/// a triangle (or Keys cubic, a = -0.5) filter widened by the scale when
/// downsampling, normalized per output.
fn aa_weights(m: &mut [f64], inp: i64, out: i64, s: f64, cubic: bool, r: impl Fn(f64) -> f64) {
    let half = if cubic { 2.0 } else { 1.0 };
    let support = r(if s >= 1.0 { half * s } else { half });
    let max_interp = (support.ceil() as i64) * 2 + 1;
    let invscale = if s >= 1.0 { r(1.0 / s) } else { 1.0 };
    let filter = |x: f64| -> f64 {
        let x = x.abs();
        if cubic {
            let a = -0.5;
            if x < 1.0 {
                r(r(r(r((a + 2.0) * x) - (a + 3.0)) * x * x) + 1.0)
            } else if x < 2.0 {
                r(r(r(r(r(r(a * x) - 5.0 * a) * x) + 8.0 * a) * x) - 4.0 * a)
            } else {
                0.0
            }
        } else if x < 1.0 {
            r(1.0 - x)
        } else {
            0.0
        }
    };
    for i in 0..out {
        let center = r(s * (i as f64 + 0.5));
        let xmin = ((center - support + 0.5) as i64).max(0);
        let xsize = (((center + support + 0.5) as i64).min(inp) - xmin).clamp(0, max_interp);
        let w: Vec<f64> = (0..xsize).map(|j| filter(r(r(r((j + xmin) as f64 - center) + 0.5) * invscale))).collect();
        let total: f64 = w.iter().fold(0.0, |acc, &v| r(acc + v));
        for (j, &wj) in w.iter().enumerate() {
            let v = if total != 0.0 { r(wj / total) } else { wj };
            m[(i * inp + xmin + j as i64) as usize] += v;
        }
    }
}

/// upsample_*(self, output_size, [align_corners,] scales...) and
/// upsample_*_backward(grad_output, output_size, input_size, [align_corners,] scales...)
fn upsample(lx: &mut Lower, args: &Args, n: usize, kind: Kind, backward: bool) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let u8_filter = match kind {
        Kind::Linear | Kind::LinearAa => Some(Filter { cubic: false, antialias: kind == Kind::LinearAa }),
        Kind::Cubic | Kind::CubicAa => Some(Filter { cubic: true, antialias: kind == Kind::CubicAa }),
        _ => None,
    };
    // The CPU resamples uint8 images in 2-D only (bilinear, bicubic).
    let u8_filter = u8_filter.filter(|_| t.dtype == DType::U8 && n == 2 && !backward);
    if !t.dtype.is_float() && kind.interpolates() && u8_filter.is_none() {
        bail!(NotImplemented, "{}: not implemented for {} input", lx.op, crate::dtypes::name(t.dtype));
    }
    let outs = args.ints(1)?;
    let (ins, next) = if backward {
        let full = args.ints(2)?;
        (full[full.len() - n..].to_vec(), 3)
    } else {
        (t.shape[t.shape.len() - n..].to_vec(), 2)
    };
    if outs.len() != n || t.shape.len() < n + 1 || ins.iter().chain(&outs).any(|&s| s <= 0) {
        bail!(Runtime, "{}: bad output_size {:?} for input {:?}", lx.op, outs, t.shape);
    }
    let (align, sc) = if kind.interpolates() { (args.bool_or(next, false)?, next + 1) } else { (false, next) };
    if let Some(filter) = u8_filter {
        let scales: Vec<Option<f64>> = (0..n).map(|i| opt_float(args, sc + i)).collect();
        return Ok(vec![upsample_u8(lx, t.value, &ins, &outs, align, &scales, filter)?]);
    }
    let maps: Vec<Map> = (0..n).map(|i| upsample_map(kind, ins[i], outs[i], align, opt_float(args, sc + i), t.dtype == DType::F64)).collect();
    let a = acc(t.dtype);
    let x = if backward || kind.interpolates() { lx.cast(t.value, a)? } else { t.value };
    let y = apply(lx, x, &maps, &ins, &outs, backward)?;
    Ok(vec![lx.cast(y, t.dtype)?])
}

/// reflection/replication_pad{1,2,3}d(self, padding) and their backward
/// (grad_output, self, padding). `padding` pairs start at the last dim.
fn border_pad(lx: &mut Lower, args: &Args, n: usize, reflect: bool, backward: bool) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let x = if backward { args.tensor(1)?.clone() } else { t.clone() };
    let pad = args.ints(if backward { 2 } else { 1 })?;
    let rank = x.shape.len();
    if pad.len() != 2 * n || rank < n + 1 {
        bail!(Runtime, "{}: padding {:?} must have {} entries for input {:?}", lx.op, pad, 2 * n, x.shape);
    }
    let ins = x.shape[rank - n..].to_vec();
    let mut outs = Vec::new();
    let mut maps = Vec::new();
    for i in 0..n {
        let (lo, hi) = (pad[2 * (n - 1 - i)], pad[2 * (n - 1 - i) + 1]);
        let inp = ins[i];
        if reflect && (lo >= inp || hi >= inp) {
            bail!(Runtime, "{}: Argument #4: Padding size should be less than the corresponding input dimension, but got: padding ({}, {}) at dimension {} of input {:?}", lx.op, lo, hi, rank - n + i, x.shape);
        }
        let out = inp + lo + hi;
        if out <= 0 || inp == 0 {
            bail!(Runtime, "{}: input {:?} with padding {:?} gives an empty output", lx.op, x.shape, pad);
        }
        let idx: Vec<i64> = (0..out)
            .map(|j| {
                let s = j - lo;
                if reflect {
                    let s = s.abs();
                    if s >= inp { 2 * (inp - 1) - s } else { s }
                } else {
                    s.clamp(0, inp - 1)
                }
            })
            .collect();
        outs.push(out);
        maps.push(Map::Index(idx));
    }
    let v = if backward { lx.cast(t.value, acc(t.dtype))? } else { t.value };
    let y = apply(lx, v, &maps, &ins, &outs, backward)?;
    Ok(vec![lx.cast(y, x.dtype)?])
}
