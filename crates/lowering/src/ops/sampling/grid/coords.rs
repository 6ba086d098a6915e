//! Coordinate math of the grid sampler: unnormalize, the padding modes
//! (clip, reflect) with their gradient factors, and the 1-D taps of each
//! interpolation mode.
//!
//! Arithmetic follows ATen's CPU kernels op by op (the vectorized 2d kernel,
//! the scalar 3d one), and for 16-bit inputs every operation rounds to the
//! input type, as `Vectorized<BFloat16>` and c10's Half/BFloat16 scalars do,
//! so nearest picks and weights agree with the CPU's.
use stablehlo::{CompareDir, DType, Value};

use super::super::c;
use crate::ctx::Lower;
use crate::error::Result;

pub(super) const BILINEAR: i64 = 0;
pub(super) const NEAREST: i64 = 1;
pub(super) const BICUBIC: i64 = 2;
pub(super) const ZEROS: i64 = 0;
pub(super) const BORDER: i64 = 1;
pub(super) const REFLECTION: i64 = 2;
const CUBIC_A: f64 = -0.75;

pub(super) struct Geo {
    pub k: usize,
    pub n: i64,
    pub ch: i64,
    pub in_sp: Vec<i64>,
    pub out_sp: Vec<i64>,
    pub kout: i64,
    /// The input's dtype and the type math runs in.
    pub dt: DType,
    pub ct: DType,
    pub interp: i64,
    pub pad: i64,
    pub align: bool,
}

impl Geo {
    /// `v` rounded to the input's 16-bit type (identity otherwise).
    pub fn q(&self, lx: &mut Lower, v: Value) -> Result<Value> {
        if self.dt == self.ct {
            return Ok(v);
        }
        let r = lx.b.convert(v, self.dt)?;
        Ok(lx.b.convert(r, self.ct)?)
    }
    /// A constant like `v`, rounded to the input type.
    pub fn k(&self, lx: &mut Lower, like: Value, x: f64) -> Result<Value> {
        let v = c(lx, like, x)?;
        self.q(lx, v)
    }
    pub fn add(&self, lx: &mut Lower, a: Value, b: Value) -> Result<Value> {
        let v = lx.b.add(a, b)?;
        self.q(lx, v)
    }
    pub fn sub(&self, lx: &mut Lower, a: Value, b: Value) -> Result<Value> {
        let v = lx.b.sub(a, b)?;
        self.q(lx, v)
    }
    pub fn mul(&self, lx: &mut Lower, a: Value, b: Value) -> Result<Value> {
        let v = lx.b.mul(a, b)?;
        self.q(lx, v)
    }
    pub fn div(&self, lx: &mut Lower, a: Value, b: Value) -> Result<Value> {
        let v = lx.b.div(a, b)?;
        self.q(lx, v)
    }
    /// `a * x + y` style helpers with constants.
    fn addc(&self, lx: &mut Lower, a: Value, x: f64) -> Result<Value> {
        let k = self.k(lx, a, x)?;
        self.add(lx, a, k)
    }
    fn mulc(&self, lx: &mut Lower, a: Value, x: f64) -> Result<Value> {
        let k = self.k(lx, a, x)?;
        self.mul(lx, a, k)
    }
    fn rsubc(&self, lx: &mut Lower, x: f64, a: Value) -> Result<Value> {
        let k = self.k(lx, a, x)?;
        self.sub(lx, k, a)
    }
}

/// One tap along one dim: weight, d weight / d coord, whether its integral
/// position lies inside the input, and its i64 row offset (the clamped
/// position times the dim's stride).
#[derive(Clone, Copy)]
pub(super) struct Tap {
    pub w: Value,
    pub dw: Value,
    pub ok: Value,
    pub off: Value,
}

/// A tap at `pos` with its bounds flag and row offset along a dim of
/// `size` elements and `stride` rows.
fn tap(lx: &mut Lower, pos: Value, w: Value, dw: Value, size: i64, stride: i64) -> Result<Tap> {
    let zero = c(lx, pos, 0.0)?;
    let hi = c(lx, pos, (size - 1) as f64)?;
    let a = lx.b.compare(pos, zero, CompareDir::Ge)?;
    let b = lx.b.compare(pos, hi, CompareDir::Le)?;
    let ok = lx.b.and(a, b)?;
    let p = lx.b.clamp(zero, pos, hi)?;
    let p = lx.b.convert(p, DType::I64)?;
    let shape = lx.shape(p);
    let st = lx.b.splat_i64(DType::I64, stride, &shape)?;
    let off = lx.b.mul(p, st)?;
    Ok(Tap { w, dw, ok, off })
}

/// Source coordinate before padding, and d coord / d grid.
fn unnormalize(lx: &mut Lower, g: &Geo, v: Value, size: i64) -> Result<(Value, Value)> {
    let sf = if g.align { (size - 1) as f64 / 2.0 } else { size as f64 / 2.0 };
    let t = g.addc(lx, v, 1.0)?;
    let x = if g.k == 2 {
        // (g + 1) * scale [- 0.5], as the vectorized 2d kernel.
        let x = g.mulc(lx, t, sf)?;
        if g.align {
            x
        } else {
            g.addc(lx, x, -0.5)?
        }
    } else if g.align {
        let two = g.k(lx, t, 2.0)?;
        let x = g.div(lx, t, two)?;
        g.mulc(lx, x, (size - 1) as f64)?
    } else {
        let x = g.mulc(lx, t, size as f64)?;
        let x = g.addc(lx, x, -1.0)?;
        let two = g.k(lx, x, 2.0)?;
        g.div(lx, x, two)?
    };
    Ok((x, c(lx, v, sf)?))
}

/// Clip to [0, size-1]; gradient 1 strictly inside, else 0.
fn clip(lx: &mut Lower, g: &Geo, x: Value, size: i64) -> Result<(Value, Value)> {
    let zero = c(lx, x, 0.0)?;
    let hi = g.k(lx, x, (size - 1) as f64)?;
    let v = lx.b.max(x, zero)?;
    let v = lx.b.min(v, hi)?;
    let a = lx.b.compare(x, zero, CompareDir::Gt)?;
    let b = lx.b.compare(x, hi, CompareDir::Lt)?;
    let inside = lx.b.and(a, b)?;
    let one = c(lx, x, 1.0)?;
    Ok((v, lx.b.select(inside, one, zero)?))
}

/// Reflect into [low, low + span] (span size-1 with align_corners, size
/// about -0.5 without) and the gradient sign.
fn reflect(lx: &mut Lower, g: &Geo, x: Value, size: i64) -> Result<(Value, Value)> {
    let (ts, low, empty) = if g.align {
        (2.0 * (size - 1) as f64, 0.0, size <= 1)
    } else {
        (2.0 * size as f64, -0.5, size <= 0)
    };
    if empty {
        let z = c(lx, x, 0.0)?;
        return Ok((z, z));
    }
    let lowv = g.k(lx, x, low)?;
    let inn = if low == 0.0 { x } else { g.sub(lx, x, lowv)? };
    let zero = c(lx, x, 0.0)?;
    let neg = lx.b.compare(inn, zero, CompareDir::Lt)?;
    let a = lx.b.abs(inn)?;
    let tsv = g.k(lx, x, ts)?;
    let f = g.div(lx, a, tsv)?;
    let f = lx.b.floor(f)?;
    let f = g.mul(lx, f, tsv)?;
    let extra = g.sub(lx, a, f)?;
    let refl = g.sub(lx, tsv, extra)?;
    let more = lx.b.compare(extra, refl, CompareDir::Gt)?;
    let v = lx.b.select(more, refl, extra)?;
    let v = if low == 0.0 { v } else { g.add(lx, v, lowv)? };
    let flip = lx.b.xor(more, neg)?;
    let one = c(lx, x, 1.0)?;
    let m1 = c(lx, x, -1.0)?;
    Ok((v, lx.b.select(flip, m1, one)?))
}

/// The padding mode applied to a coordinate, with its gradient factor.
fn padded(lx: &mut Lower, g: &Geo, x: Value, size: i64) -> Result<(Value, Value)> {
    match g.pad {
        BORDER => clip(lx, g, x, size),
        REFLECTION => {
            let (r, gr) = reflect(lx, g, x, size)?;
            let (v, gc) = clip(lx, g, r, size)?;
            Ok((v, lx.b.mul(gr, gc)?))
        }
        _ => Ok((x, c(lx, x, 1.0)?)),
    }
}

/// Cubic convolution weights of the 4 taps at floor-1..floor+2 for a
/// fractional part t, and their derivatives in t.
fn cubic(lx: &mut Lower, g: &Geo, t: Value) -> Result<Vec<(Value, Value)>> {
    let a = CUBIC_A;
    // |s| in (1, 2): ((A s - 5A) s + 8A) s - 4A; |s| <= 1: ((A+2) s - (A+3)) s s + 1.
    let far = |lx: &mut Lower, s: Value| -> Result<(Value, Value)> {
        let v = g.mulc(lx, s, a)?;
        let v = g.addc(lx, v, -5.0 * a)?;
        let v = g.mul(lx, v, s)?;
        let v = g.addc(lx, v, 8.0 * a)?;
        let v = g.mul(lx, v, s)?;
        let v = g.addc(lx, v, -4.0 * a)?;
        // derivative: (3A s - 10A) s + 8A
        let d = g.mulc(lx, s, 3.0 * a)?;
        let d = g.addc(lx, d, -10.0 * a)?;
        let d = g.mul(lx, d, s)?;
        let d = g.addc(lx, d, 8.0 * a)?;
        Ok((v, d))
    };
    let near = |lx: &mut Lower, s: Value| -> Result<(Value, Value)> {
        let v = g.mulc(lx, s, a + 2.0)?;
        let v = g.addc(lx, v, -(a + 3.0))?;
        let v = g.mul(lx, v, s)?;
        let v = g.mul(lx, v, s)?;
        let v = g.addc(lx, v, 1.0)?;
        // derivative: (3(A+2) s - 2(A+3)) s
        let d = g.mulc(lx, s, 3.0 * (a + 2.0))?;
        let d = g.addc(lx, d, -2.0 * (a + 3.0))?;
        let d = g.mul(lx, d, s)?;
        Ok((v, d))
    };
    let s0 = g.addc(lx, t, 1.0)?;
    let s2 = g.rsubc(lx, 1.0, t)?;
    let s3 = g.rsubc(lx, 2.0, t)?;
    let (w0, d0) = far(lx, s0)?;
    let (w1, d1) = near(lx, t)?;
    let (w2, d2) = near(lx, s2)?;
    let (w3, d3) = far(lx, s3)?;
    // s = 1 - t and 2 - t run backwards in t.
    let d2 = lx.b.neg(d2)?;
    let d3 = lx.b.neg(d3)?;
    Ok(vec![(w0, d0), (w1, d1), (w2, d2), (w3, d3)])
}

/// Taps of every spatial dim (input order) and each dim's d coord / d grid,
/// from the grid rows `[N, K, k]`.
pub(super) fn taps(lx: &mut Lower, g: &Geo, grid: Value) -> Result<(Vec<Vec<Tap>>, Vec<Value>)> {
    let (n, kout, k) = (g.n, g.kout, g.k as i64);
    let mut all = Vec::new();
    let mut mults = Vec::new();
    for d in 0..g.k {
        let comp = k - 1 - d as i64;
        let v = lx.b.slice(grid, &[0, 0, comp], &[n, kout, comp + 1], &[])?;
        let v = lx.b.reshape(v, &[n, kout])?;
        let size = g.in_sp[d];
        let stride: i64 = g.in_sp[d + 1..].iter().product();
        let (x, mu) = unnormalize(lx, g, v, size)?;
        let zero = c(lx, x, 0.0)?;
        let one = c(lx, x, 1.0)?;
        let list = if g.interp == BICUBIC {
            mults.push(mu);
            let f = lx.b.floor(x)?;
            let t = g.sub(lx, x, f)?;
            let ws = cubic(lx, g, t)?;
            let mut list = Vec::new();
            for (i, (w, dw)) in ws.into_iter().enumerate() {
                let p = g.addc(lx, f, i as f64 - 1.0)?;
                let (p, _) = padded(lx, g, p, size)?;
                list.push(tap(lx, p, w, dw, size, stride)?);
            }
            list
        } else {
            let (x, gp) = padded(lx, g, x, size)?;
            mults.push(lx.b.mul(mu, gp)?);
            if g.interp == NEAREST {
                let p = lx.b.round_nearest_even(x)?;
                vec![tap(lx, p, one, zero, size, stride)?]
            } else {
                let f = lx.b.floor(x)?;
                let f1 = g.addc(lx, f, 1.0)?;
                let t = g.sub(lx, x, f)?;
                // 2d: 1 - (x - floor); 3d: (floor + 1) - x.
                let w0 = if g.k == 2 { g.rsubc(lx, 1.0, t)? } else { g.sub(lx, f1, x)? };
                let m1 = c(lx, x, -1.0)?;
                vec![tap(lx, f, w0, m1, size, stride)?, tap(lx, f1, t, one, size, stride)?]
            }
        };
        all.push(list);
    }
    Ok((all, mults))
}
