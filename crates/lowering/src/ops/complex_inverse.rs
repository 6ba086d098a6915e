//! Inverse trigonometric and hyperbolic functions of complex tensors:
//! asin, acos, atan, asinh, acosh, atanh. StableHLO defines none of them on
//! complex numbers, and the textbook `-i log(iz + sqrt(1 - z^2))` loses
//! every digit where its two terms cancel, so they follow Kahan ("Branch
//! Cuts for Complex Elementary Functions", 1987), which writes each real and
//! imaginary part with atan2, asinh and log1p of well-conditioned pieces
//! and puts the branch cuts where C99 (and the CPU) puts them, signed zeros
//! included. complex64 is computed in float64 and rounded once.
use stablehlo::{CompareDir, DType, Value};

use super::elementwise::k;
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;

type R = Result<Vec<Value>>;
type Parts = (Value, Value);

/// Runs `complex` on a complex argument 0, else the real lowering.
pub(crate) fn complex_or(lx: &mut Lower, args: &Args, real: fn(&mut Lower, &Args) -> R, complex: fn(&mut Lower, Parts) -> Result<Parts>) -> R {
    let t = args.tensor(0)?;
    if !t.dtype.is_complex() {
        return real(lx, args);
    }
    let (dtype, z) = (t.dtype, t.value);
    let re = lx.b.real(z)?;
    let im = lx.b.imag(z)?;
    let (re, im) = (lx.cast(re, DType::F64)?, lx.cast(im, DType::F64)?);
    let (re, im) = complex(lx, (re, im))?;
    let w = lx.b.complex(re, im)?;
    Ok(vec![lx.cast(w, dtype)?])
}

/// The principal square root of `x + iy`, as parts (Kahan's csqrt). XLA's
/// complex sqrt ignores the sign of a zero imaginary part, which decides
/// the side of every branch cut below.
fn sqrt(lx: &mut Lower, (x, y): Parts) -> Result<Parts> {
    let ax = lx.b.abs(x)?;
    let x2 = lx.b.mul(x, x)?;
    let y2 = lx.b.mul(y, y)?;
    let r2 = lx.b.add(x2, y2)?;
    let r = lx.b.sqrt(r2)?;
    let h = lx.b.add(ax, r)?;
    let half = k(lx, x, 0.5)?;
    let h = lx.b.mul(h, half)?;
    let t = lx.b.sqrt(h)?; // sqrt((|x| + |z|) / 2)
    let zero = k(lx, x, 0.0)?;
    let t_zero = lx.b.compare(t, zero, CompareDir::Eq)?;
    let one = k(lx, x, 1.0)?;
    let safe = lx.b.select(t_zero, one, t)?;
    let d = lx.b.add(safe, safe)?;
    let other = lx.b.div(y, d)?; // y / 2t
    let other = lx.b.select(t_zero, y, other)?;
    // x >= 0: (t, y / 2t); x < 0: (|y| / 2t, t with y's sign).
    let x_neg = lx.b.compare(x, zero, CompareDir::Lt)?;
    let y_neg = super::misc::float_sign_bit(lx, y)?;
    let nt = lx.b.neg(t)?;
    let signed_t = lx.b.select(y_neg, nt, t)?;
    let abs_other = lx.b.abs(other)?;
    let abs_other = lx.b.select(t_zero, zero, abs_other)?;
    Ok((lx.b.select(x_neg, abs_other, t)?, lx.b.select(x_neg, signed_t, other)?))
}

/// `1 - (x + iy)` and `1 + (x + iy)`; the imaginary part of the first is -y
/// exactly (a negated zero stays signed, which picks the side of a cut).
fn one_minus_plus(lx: &mut Lower, (x, y): Parts) -> Result<(Parts, Parts)> {
    let one = k(lx, x, 1.0)?;
    let (a, b) = (lx.b.sub(one, x)?, lx.b.add(one, x)?);
    let ny = lx.b.neg(y)?;
    Ok(((a, ny), (b, y)))
}

/// `p.re * q.re + sign * p.im * q.im`.
fn dot(lx: &mut Lower, p: Parts, q: Parts, sign: f64) -> Result<Value> {
    let a = lx.b.mul(p.0, q.0)?;
    let b = lx.b.mul(p.1, q.1)?;
    Ok(if sign < 0.0 { lx.b.sub(a, b)? } else { lx.b.add(a, b)? })
}

/// `p.re * q.im - p.im * q.re`: the imaginary part of conj(p) * q.
fn cross(lx: &mut Lower, p: Parts, q: Parts) -> Result<Value> {
    let a = lx.b.mul(p.0, q.1)?;
    let b = lx.b.mul(p.1, q.0)?;
    Ok(lx.b.sub(a, b)?)
}

fn twice(lx: &mut Lower, v: Value) -> Result<Value> {
    Ok(lx.b.add(v, v)?)
}

/// asin z = atan2(x, Re(s1 s2)) + i asinh(Im(conj(s1) s2)), s1 = sqrt(1 - z), s2 = sqrt(1 + z).
pub(crate) fn asin(lx: &mut Lower, z: Parts) -> Result<Parts> {
    let (m, p) = one_minus_plus(lx, z)?;
    let (s1, s2) = (sqrt(lx, m)?, sqrt(lx, p)?);
    let d = dot(lx, s1, s2, -1.0)?;
    let re = lx.b.atan2(z.0, d)?;
    let c = cross(lx, s1, s2)?;
    Ok((re, super::coverage::asinh_of(lx, c)?))
}

/// acos z = 2 atan2(Re s1, Re s2) + i asinh(Im(conj(s2) s1)).
pub(crate) fn acos(lx: &mut Lower, z: Parts) -> Result<Parts> {
    let (m, p) = one_minus_plus(lx, z)?;
    let (s1, s2) = (sqrt(lx, m)?, sqrt(lx, p)?);
    let a = lx.b.atan2(s1.0, s2.0)?;
    let c = cross(lx, s2, s1)?;
    Ok((twice(lx, a)?, super::coverage::asinh_of(lx, c)?))
}

/// acosh z = asinh(Re(conj(t1) t2)) + 2i atan2(Im t1, Re t2), t1 = sqrt(z - 1), t2 = sqrt(z + 1).
pub(crate) fn acosh(lx: &mut Lower, z: Parts) -> Result<Parts> {
    let (m, p) = one_minus_plus(lx, z)?;
    // z - 1 = -(1 - z): negate both parts of 1 - z.
    let m = (lx.b.neg(m.0)?, lx.b.neg(m.1)?);
    let (t1, t2) = (sqrt(lx, m)?, sqrt(lx, p)?);
    let d = dot(lx, t1, t2, 1.0)?;
    let a = lx.b.atan2(t1.1, t2.0)?;
    Ok((super::coverage::asinh_of(lx, d)?, twice(lx, a)?))
}

/// atanh z = log(|1 + z|^2 / |1 - z|^2) / 4 + i atan2(2y, (1 - x)(1 + x) - y^2) / 2,
/// the real part as log1p(4x / |1 - z|^2) where that quotient is small.
pub(crate) fn atanh(lx: &mut Lower, (x, y): Parts) -> Result<Parts> {
    let ((m, _), (p, _)) = one_minus_plus(lx, (x, y))?;
    let m2 = lx.b.mul(m, m)?;
    let y2 = lx.b.mul(y, y)?;
    let den = lx.b.add(m2, y2)?;
    let four = k(lx, x, 4.0)?;
    let num = lx.b.mul(four, x)?;
    let q = lx.b.div(num, den)?;
    let small = lx.b.log_plus_one(q)?;
    // Near z = ±1 the quotient rounds to -1 or overflows: take the logs apart.
    let p2 = lx.b.mul(p, p)?;
    let up = lx.b.add(p2, y2)?;
    let lu = lx.b.log(up)?;
    let ld = lx.b.log(den)?;
    let apart = lx.b.sub(lu, ld)?;
    let aq = lx.b.abs(q)?;
    let lim = k(lx, x, 0.5)?;
    let is_small = lx.b.compare(aq, lim, CompareDir::Lt)?;
    let l = lx.b.select(is_small, small, apart)?;
    let quarter = k(lx, x, 0.25)?;
    let re = lx.b.mul(l, quarter)?;
    let mp = lx.b.mul(m, p)?;
    let d = lx.b.sub(mp, y2)?;
    let y2x = twice(lx, y)?;
    let a = lx.b.atan2(y2x, d)?;
    let half = k(lx, x, 0.5)?;
    Ok((re, lx.b.mul(a, half)?))
}

/// i (x + iy) = -y + ix, exactly.
fn times_i(lx: &mut Lower, (x, y): Parts) -> Result<Parts> {
    Ok((lx.b.neg(y)?, x))
}

/// -i (x + iy) = y - ix, exactly.
fn times_minus_i(lx: &mut Lower, (x, y): Parts) -> Result<Parts> {
    Ok((y, lx.b.neg(x)?))
}

/// asinh z = -i asin(iz).
pub(crate) fn asinh(lx: &mut Lower, z: Parts) -> Result<Parts> {
    let iz = times_i(lx, z)?;
    let a = asin(lx, iz)?;
    times_minus_i(lx, a)
}

/// atan z = i atanh(-iz).
pub(crate) fn atan(lx: &mut Lower, z: Parts) -> Result<Parts> {
    let w = times_minus_i(lx, z)?;
    let a = atanh(lx, w)?;
    times_i(lx, a)
}
