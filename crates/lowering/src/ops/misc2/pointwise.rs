//! Float pointwise ops: angle and frexp.
use stablehlo::{CompareDir, DType};

use super::{cmp, R};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::ops::elementwise::float_of;

/// angle: pi for negatives, 0 otherwise, NaN kept (complex: the argument).
pub(super) fn angle(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if t.dtype.is_complex() {
        return Ok(vec![crate::ops::complex::angle(lx, t.value)?]);
    }
    let out = float_of(t.dtype);
    let x = lx.cast(t.value, out)?;
    let neg = cmp(lx, x, 0.0, CompareDir::Lt)?;
    let pi = lx.full_like(x, std::f64::consts::PI)?;
    let z = lx.full_like(x, 0.0)?;
    let r = lx.b.select(neg, pi, z)?;
    let nan = lx.b.compare(x, x, CompareDir::Ne)?;
    Ok(vec![lx.b.select(nan, x, r)?])
}

/// frexp(self) -> (mantissa in [0.5, 1), int32 exponent).
pub(super) fn frexp(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if !t.dtype.is_float() {
        bail!(
            Runtime,
            "{}: torch.frexp() only supports floating-point dtypes",
            lx.op
        );
    }
    // Read off the bits: the XLA CPU plugin treats subnormal operands of
    // float arithmetic as zero, so a log2 and rescaling saw 1e-310 as 0.
    let wide = if t.dtype == DType::F64 { DType::F64 } else { DType::F32 };
    let x = if t.dtype == DType::BF16 {
        // bfloat16 is float32's top half: widen by the bits (a convert
        // would flush its subnormals).
        let b16 = lx.b.bitcast_convert(t.value, DType::I16)?;
        let b32 = lx.b.convert(b16, DType::I32)?;
        let s16 = lx.b.splat_i64(DType::I32, 16, &t.shape)?;
        let b32 = lx.b.shift_left(b32, s16)?;
        lx.b.bitcast_convert(b32, DType::F32)?
    } else {
        lx.cast(t.value, wide)?
    };
    let (it, mbits, bias): (DType, i64, i64) = if wide == DType::F64 { (DType::I64, 52, 1023) } else { (DType::I32, 23, 127) };
    let shape = lx.shape(x);
    let ic = |lx: &mut Lower, v: i64| lx.b.splat_i64(it, v, &shape);
    let bits = lx.b.bitcast_convert(x, it)?;
    let sh = ic(lx, mbits)?;
    let emask = ic(lx, (1 << (if wide == DType::F64 { 11 } else { 8 })) - 1)?;
    let fmask = ic(lx, (1i64 << mbits) - 1)?;
    let sign = ic(lx, if wide == DType::F64 { i64::MIN } else { i32::MIN as i64 })?;
    let sign = lx.b.and(bits, sign)?;
    let expf = lx.b.shift_right_logical(bits, sh)?;
    let expf = lx.b.and(expf, emask)?;
    let frac = lx.b.and(bits, fmask)?;
    // Subnormal: p = the top set bit of frac (read from frac as a float,
    // which is exact and normal), value = 2^(p + 2 - bias - mbits) * 0.1f.
    let ff = lx.b.convert(frac, wide)?;
    let fbits = lx.b.bitcast_convert(ff, it)?;
    let p = lx.b.shift_right_logical(fbits, sh)?;
    let p = lx.b.and(p, emask)?;
    let bias_v = ic(lx, bias)?;
    let p = lx.b.sub(p, bias_v)?;
    let shift = lx.b.sub(sh, p)?;
    let fracn = lx.b.shift_left(frac, shift)?;
    let fracn = lx.b.and(fracn, fmask)?;
    let zero = ic(lx, 0)?;
    let sub = lx.b.compare(expf, zero, CompareDir::Eq)?;
    let fz = lx.b.compare(frac, zero, CompareDir::Eq)?;
    let is_zero = lx.b.and(sub, fz)?;
    let frac = lx.b.select(sub, fracn, frac)?;
    let e_sub = ic(lx, 2 - bias - mbits)?;
    let e_sub = lx.b.add(p, e_sub)?;
    let e_norm = ic(lx, 1 - bias)?;
    let e_norm = lx.b.add(expf, e_norm)?;
    let e = lx.b.select(sub, e_sub, e_norm)?;
    // Mantissa in [0.5, 1): the exponent field of 0.5 (bias - 1).
    let half_exp = ic(lx, (bias - 1) << mbits)?;
    let mb = lx.b.or(sign, half_exp)?;
    let mb = lx.b.or(mb, frac)?;
    let m = lx.b.bitcast_convert(mb, wide)?;
    // Zero, inf and NaN: (x, 0).
    let top = ic(lx, if wide == DType::F64 { 2047 } else { 255 })?;
    let special = lx.b.compare(expf, top, CompareDir::Eq)?;
    let special = lx.b.or(special, is_zero)?;
    let m = lx.b.select(special, x, m)?;
    let e = lx.b.select(special, zero, e)?;
    Ok(vec![lx.cast(m, t.dtype)?, lx.cast(e, DType::I32)?])
}
