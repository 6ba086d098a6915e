//! Float pointwise ops: angle and frexp.
use stablehlo::{CompareDir, DType};

use super::{cmp, R, V};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
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
    let x = lx.cast(t.value, DType::F64)?;
    let ax = lx.b.abs(x)?;
    let l = lx.b.log(ax)?;
    let ln2 = lx.full_like(l, std::f64::consts::LN_2)?;
    let l = lx.b.div(l, ln2)?;
    let e = lx.b.floor(l)?;
    let one = lx.full_like(e, 1.0)?;
    let mut e = lx.b.add(e, one)?;
    let two = lx.full_like(e, 2.0)?;
    let half = lx.full_like(e, 0.5)?;
    let mut m = x;
    let scale = |lx: &mut Lower, x: V, e: V| -> Result<V> {
        // x * 2^-e in two halves (avoids overflow of 2^-e).
        let two = lx.full_like(e, 2.0)?;
        let h = lx.full_like(e, 0.5)?;
        let ne = lx.b.neg(e)?;
        let e1 = lx.b.mul(ne, h)?;
        let e1 = lx.b.floor(e1)?;
        let e2 = lx.b.sub(ne, e1)?;
        let p1 = lx.b.pow(two, e1)?;
        let p2 = lx.b.pow(two, e2)?;
        let y = lx.b.mul(x, p1)?;
        Ok(lx.b.mul(y, p2)?)
    };
    m = scale(lx, m, e)?;
    for _ in 0..2 {
        let am = lx.b.abs(m)?;
        let big = lx.b.compare(am, one, CompareDir::Ge)?;
        let small = lx.b.compare(am, half, CompareDir::Lt)?;
        let mh = lx.b.mul(m, half)?;
        let m2 = lx.b.mul(m, two)?;
        let ep = lx.b.add(e, one)?;
        let em = lx.b.sub(e, one)?;
        m = lx.b.select(big, mh, m)?;
        e = lx.b.select(big, ep, e)?;
        m = lx.b.select(small, m2, m)?;
        e = lx.b.select(small, em, e)?;
    }
    let fin = lx.b.is_finite(x)?;
    let nz = cmp(lx, x, 0.0, CompareDir::Ne)?;
    let ok = lx.b.and(fin, nz)?;
    let m = lx.b.select(ok, m, x)?;
    let z = lx.full_like(e, 0.0)?;
    let e = lx.b.select(ok, e, z)?;
    Ok(vec![lx.cast(m, t.dtype)?, lx.cast(e, DType::I32)?])
}
