//! histc: an equal-width histogram with CPU-matching bin edges.
use stablehlo::{CompareDir, DType};

use super::{scatter_1d, R, V};
use crate::args::{Arg, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::elementwise::not_for;

/// histc(self, bins=100, min=0, max=0): equal-width histogram.
pub(super) fn histc(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?.clone();
    if !t.dtype.is_float() {
        return Err(not_for("histogram_cpu", t.dtype));
    }
    let bins = args.int_or(1, 100)?;
    if bins <= 0 {
        bail!(Runtime, "{}: torch.histc(): bins must be > 0, but got {bins} for bins", lx.op);
    }
    let lit = |i: usize| match args.get(i) {
        Arg::Scalar(s) => s.literal,
        Arg::Int(v) => *v as f64,
        Arg::Float(v) => *v,
        _ => 0.0,
    };
    let (mn, mx) = (lit(2), lit(3));
    if mn > mx {
        bail!(Runtime, "{}: torch.histc(): max must be larger than min", lx.op);
    }
    let w = if t.dtype == DType::F64 { DType::F64 } else { DType::F32 };
    let n: i64 = t.shape.iter().product();
    let flat = lx.b.reshape(t.value, &[n])?;
    let x = lx.cast(flat, w)?;
    // Edges are stored in the input dtype.
    let (mut lo, mut hi);
    if mn == mx && n > 0 {
        lo = lx.b.reduce_min(x, &[0])?;
        hi = lx.b.reduce_max(x, &[0])?;
    } else {
        lo = lx.b.constant_f64(t.dtype, mn);
        lo = lx.cast(lo, w)?;
        hi = lx.b.constant_f64(t.dtype, mx);
        hi = lx.cast(hi, w)?;
    }
    let same = lx.b.compare(lo, hi, CompareDir::Eq)?;
    let one = lx.b.constant_f64(w, 1.0);
    let lo1 = lx.b.sub(lo, one)?;
    let hi1 = lx.b.add(hi, one)?;
    lo = lx.b.select(same, lo1, lo)?;
    hi = lx.b.select(same, hi1, hi)?;
    let (lo, hi) = (lx.cast(lo, t.dtype)?, lx.cast(hi, t.dtype)?);
    let (lo, hi) = (lx.cast(lo, w)?, lx.cast(hi, w)?);
    let lob = lx.b.broadcast_in_dim(lo, &[n], &[])?;
    let hib = lx.b.broadcast_in_dim(hi, &[n], &[])?;
    let nb = lx.full(w, bins as f64, &[n])?;
    let span = lx.b.sub(hib, lob)?;
    let off = lx.b.sub(x, lob)?;
    let p = lx.b.mul(off, nb)?;
    let p = lx.b.div(p, span)?;
    let p = lx.b.floor(p)?;
    let zero = lx.full(w, 0.0, &[n])?;
    let top = lx.full(w, (bins - 1) as f64, &[n])?;
    let p = lx.b.clamp(zero, p, top)?;
    // Local correction against linspace edges.
    let edge = |lx: &mut Lower, k: V| -> Result<V> {
        let step = lx.b.div(span, nb)?;
        let a = lx.b.mul(step, k)?;
        let a = lx.b.add(lob, a)?;
        let rem = lx.b.sub(nb, k)?;
        let bb = lx.b.mul(step, rem)?;
        let bb = lx.b.sub(hib, bb)?;
        let half = lx.full(w, ((bins + 1) / 2) as f64, &[n])?;
        let first = lx.b.compare(k, half, CompareDir::Lt)?;
        let e = lx.b.select(first, a, bb)?;
        let e = lx.cast(e, t.dtype)?;
        lx.cast(e, w)
    };
    let e0 = edge(lx, p)?;
    let onev = lx.full(w, 1.0, &[n])?;
    let p1 = lx.b.add(p, onev)?;
    let e1 = edge(lx, p1)?;
    let below = lx.b.compare(x, e0, CompareDir::Lt)?;
    let pm1 = lx.b.sub(p, onev)?;
    let above = lx.b.compare(x, e1, CompareDir::Ge)?;
    let p = lx.b.select(below, pm1, p)?;
    let p = lx.b.select(above, p1, p)?;
    let p = lx.b.clamp(zero, p, top)?;
    let ge = lx.b.compare(x, lob, CompareDir::Ge)?;
    let le = lx.b.compare(x, hib, CompareDir::Le)?;
    let ok = lx.b.and(ge, le)?;
    let pi = lx.cast(p, DType::I64)?;
    let past = lx.full(DType::I64, bins as f64, &[n])?;
    let slot = lx.b.select(ok, pi, past)?;
    let init = lx.full(w, 0.0, &[bins])?;
    let ones = lx.full(w, 1.0, &[n])?;
    let out = if n == 0 { init } else { scatter_1d(lx, init, slot, ones, true)? };
    Ok(vec![lx.cast(out, t.dtype)?])
}
