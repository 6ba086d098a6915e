//! logcumsumexp: a scan with a stable logaddexp, sequential for short dims.
use stablehlo::{CompareDir, DType};

use super::{R, V};
use crate::args::{norm_dim, Args};
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::elementwise::{not_for, wide};

/// log(exp(a) + exp(b)), stable, with infinities and NaN handled.
fn logaddexp(lx: &mut Lower, a: V, b: V) -> Result<V> {
    if lx.dtype(a).is_complex() {
        return crate::ops::complex::logaddexp(lx, a, b);
    }
    let m = lx.b.max(a, b)?;
    let mn = lx.b.min(a, b)?;
    let d = lx.b.sub(mn, m)?;
    let e = lx.b.exp(d)?;
    let l = lx.b.log_plus_one(e)?;
    let s = lx.b.add(m, l)?;
    let fin = lx.b.is_finite(m)?;
    let r = lx.b.select(fin, s, m)?;
    let na = lx.b.compare(a, a, CompareDir::Ne)?;
    let nb = lx.b.compare(b, b, CompareDir::Ne)?;
    let nan = lx.b.or(na, nb)?;
    let sum = lx.b.add(a, b)?;
    Ok(lx.b.select(nan, sum, r)?)
}

/// logcumsumexp(self, dim): Hillis-Steele scan with logaddexp.
pub(super) fn logcumsumexp(lx: &mut Lower, args: &Args) -> R {
    let t = args.tensor(0)?;
    if !t.dtype.is_float() && !t.dtype.is_complex() {
        return Err(not_for("logcumsumexp_out_cpu", t.dtype));
    }
    if t.shape.is_empty() {
        norm_dim(lx.op, args.int(1)?, 1)?;
        return Ok(vec![t.value]);
    }
    let d = norm_dim(lx.op, args.int(1)?, t.shape.len())?;
    // CPU accumulates in acc_type: double for float, float for halves,
    // complex<double> for complex<float>.
    let w = match t.dtype {
        DType::F32 => DType::F64,
        DType::C64 => DType::C128,
        d => wide(d),
    };
    let mut acc = lx.cast(t.value, w)?;
    let shape = t.shape.clone();
    let n = shape[d];
    let r = shape.len();
    if n <= 128 {
        // Sequential, in CPU's order (same rounding as the reference).
        let mut parts = vec![];
        let mut prev: Option<V> = None;
        for i in 0..n {
            let mut st = vec![0; r];
            st[d] = i;
            let mut lim = shape.clone();
            lim[d] = i + 1;
            let xi = lx.b.slice(acc, &st, &lim, &vec![1; r])?;
            let cur = match prev {
                Some(p) => logaddexp(lx, p, xi)?,
                None => xi,
            };
            parts.push(cur);
            prev = Some(cur);
        }
        let out = lx.b.concatenate(&parts, d as i64)?;
        return Ok(vec![lx.cast(out, t.dtype)?]);
    }
    let mut shift = 1;
    while shift < n {
        let ninf = lx.b.constant_f64(w, f64::NEG_INFINITY);
        let mut low = vec![0; r];
        low[d] = shift;
        let s = lx.b.pad(acc, ninf, &low, &vec![0; r], &vec![0; r])?;
        let s = lx.b.slice(s, &vec![0; r], &shape, &vec![1; r])?;
        acc = logaddexp(lx, acc, s)?;
        shift *= 2;
    }
    Ok(vec![lx.cast(acc, t.dtype)?])
}
