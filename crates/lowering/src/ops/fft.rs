//! torch.fft: the three ATen transforms every `torch.fft.*` function reduces
//! to (`_fft_r2c`, `_fft_c2c`, `_fft_c2r`), as `stablehlo.fft`.
//!
//! A transform over several dimensions is a sequence of one-dimensional
//! ones (the DFT is separable); a dimension that is not innermost is
//! transposed there and back. XLA's inverse transforms divide by n, so the
//! raw result is scaled back and then by torch's `normalization`
//! (0: none, 1: 1/sqrt(n), 2: 1/n, n being the signal size).
use stablehlo::{DType, FftType, Value};

use super::elementwise::type_name;
use crate::args::{norm_dim, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("_fft_r2c", r2c),
    op!("_fft_c2c", c2c),
    op!("_fft_c2r", c2r),
];

type R = Result<Vec<Value>>;

/// The transformed dimensions, normalized, in the order given (the last
/// one is the halved one of r2c/c2r).
fn dims(lx: &Lower, args: &Args, rank: usize) -> Result<Vec<usize>> {
    let dims = args.ints(1)?;
    if dims.is_empty() {
        bail!(Runtime, "{}: expected at least one dimension to transform", lx.op);
    }
    dims.iter().map(|&d| norm_dim(lx.op, d, rank)).collect()
}

/// One transform of `kind` along `dim`, producing `len` points for IRFFT.
fn along(lx: &mut Lower, v: Value, dim: usize, kind: FftType, len: i64) -> Result<Value> {
    let rank = lx.shape(v).len();
    let last = rank - 1;
    let perm: Vec<i64> = (0..rank as i64).map(|i| if i == dim as i64 { last as i64 } else if i == last as i64 { dim as i64 } else { i }).collect();
    let moved = if dim == last { v } else { lx.b.transpose(v, &perm)? };
    let length = match kind {
        FftType::Irfft => len,
        _ => lx.shape(moved)[last],
    };
    let out = lx.b.fft(moved, kind, &[length])?;
    // The swap is its own inverse.
    Ok(if dim == last { out } else { lx.b.transpose(out, &perm)? })
}

/// Multiplies by `factor` (a real number) unless it is 1.
fn scale(lx: &mut Lower, v: Value, factor: f64) -> Result<Value> {
    if factor == 1.0 {
        return Ok(v);
    }
    let k = lx.full_like(v, factor)?;
    Ok(lx.b.mul(v, k)?)
}

/// torch's normalization factor for a signal of `n` points.
fn norm_factor(lx: &Lower, mode: i64, n: i64) -> Result<f64> {
    let n = n.max(1) as f64;
    Ok(match mode {
        0 => 1.0,
        1 => 1.0 / n.sqrt(),
        2 => 1.0 / n,
        m => bail!(Runtime, "{}: unknown normalization mode {m}", lx.op),
    })
}

fn float_input(lx: &Lower, d: DType) -> Result<()> {
    if !matches!(d, DType::F32 | DType::F64) {
        bail!(Runtime, "{}: Unsupported dtype {} (tpu transforms float32 and float64, as the CPU does)", lx.op, type_name(d));
    }
    Ok(())
}

/// _fft_r2c(self, dim, normalization, onesided): real -> complex.
fn r2c(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    float_input(lx, t.dtype)?;
    let dims = dims(lx, args, t.shape.len())?;
    let (mode, onesided) = (args.int(2)?, args.bool_or(3, true)?);
    let n: i64 = dims.iter().map(|&d| t.shape[d]).product();
    let (&last, rest) = dims.split_last().expect("non-empty");
    let mut v = if onesided {
        along(lx, t.value, last, FftType::Rfft, 0)?
    } else {
        let c = lx.cast(t.value, t.dtype.complex_of())?;
        along(lx, c, last, FftType::Fft, 0)?
    };
    for &d in rest {
        v = along(lx, v, d, FftType::Fft, 0)?;
    }
    let f = norm_factor(lx, mode, n)?;
    Ok(vec![scale(lx, v, f)?])
}

/// _fft_c2c(self, dim, normalization, forward): complex -> complex.
fn c2c(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if !t.dtype.is_complex() {
        bail!(Runtime, "{}: expects a complex tensor, got {}", lx.op, type_name(t.dtype));
    }
    let dims = dims(lx, args, t.shape.len())?;
    let (mode, forward) = (args.int(2)?, args.bool_or(3, true)?);
    let n: i64 = dims.iter().map(|&d| t.shape[d]).product();
    let kind = if forward { FftType::Fft } else { FftType::Ifft };
    let mut v = t.value;
    for &d in &dims {
        v = along(lx, v, d, kind, 0)?;
    }
    // Undo XLA's 1/n of the inverse transform before torch's normalization.
    let raw = if forward { 1.0 } else { n.max(1) as f64 };
    let f = norm_factor(lx, mode, n)?;
    Ok(vec![scale(lx, v, raw * f)?])
}

/// _fft_c2r(self, dim, normalization, last_dim_size): half spectrum -> real.
fn c2r(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if !t.dtype.is_complex() {
        bail!(Runtime, "{}: expects a complex tensor, got {}", lx.op, type_name(t.dtype));
    }
    let dims = dims(lx, args, t.shape.len())?;
    let mode = args.int(2)?;
    let out_last = args.int(3)?;
    let (&last, rest) = dims.split_last().expect("non-empty");
    let half = out_last / 2 + 1;
    if out_last < 1 || t.shape[last] < half {
        bail!(
            Runtime,
            "{}: a half spectrum of {} points along dim {last} cannot give {out_last} output points (needs at least {half})",
            lx.op,
            t.shape[last]
        );
    }
    let mut v = t.value;
    if t.shape[last] > half {
        let mut limit = t.shape.clone();
        limit[last] = half;
        let rank = t.shape.len();
        v = lx.b.slice(v, &vec![0; rank], &limit, &vec![1; rank])?;
    }
    for &d in rest {
        v = along(lx, v, d, FftType::Ifft, 0)?;
    }
    v = along(lx, v, last, FftType::Irfft, out_last)?;
    let n: i64 = rest.iter().map(|&d| t.shape[d]).product::<i64>() * out_last;
    let f = norm_factor(lx, mode, n)?;
    Ok(vec![scale(lx, v, n as f64 * f)?])
}
