//! `erf` built from StableHLO elementwise ops (no `chlo.erf`), accurate to about
//! 1e-7 relative in f32 (about 1e-10 in f64).
//!
//! Two branches, selected per element:
//! - `|x| < 1`: `erf(x) = x + x * (P(x^2) - 1)`, with `P(t) ≈ erf(√t)/√t` a
//!   degree-8 Chebyshev fit on `t ∈ [0, 1]` (writing it as `x + x*(P-1)` keeps the
//!   rounding of the dominant term exact-ish in low precision);
//! - `|x| >= 1`: `erf(x) = sign(x) * (1 - exp(-x^2) * R(x))`, with
//!   `R(x) = erfc(x) exp(x^2)` a degree-13 fit in `z = 2.4/|x| - 1.4` (i.e.
//!   `1/|x|` mapped from `[1/6, 1]` onto `[-1, 1]`); `|x|` is clamped to 6, where
//!   erf is 1 to f64 precision.
//!
//! `erfinv` (about 2e-7 relative in f32) writes `erfinv(x) = x * G(w)` with
//! `w = -log((1 - x)(1 + x))` and `G` fitted in `w - 2.5` for `w < 5`, and in
//! `sqrt(w) - 3` for `5 <= w <= 37.2` (`|x| <= 1 - 1e-16`); `erfinv(±1) = ±inf`.
//!
//! f16/bf16 inputs are computed in f32 and rounded back. All coefficients are
//! Chebyshev fits made for this crate (mpmath, 40 digits).

use crate::builder::{Builder, Value};
use crate::check::{dtype_allowed, Accepts};
use crate::error::Result;
use crate::{CompareDir, DType};

/// `P(t) - 1`, highest degree first (fit of `erf(√t)/√t`, constant term minus 1).
const SMALL: [f64; 9] = [
    1.058938064107502e-06,
    -1.3909340021874599e-05,
    0.0001195656256820733,
    -0.0008542637997087229,
    0.005223783477189248,
    -0.026866133235095593,
    0.11283791308604582,
    -0.3761263888963531,
    0.12837916709467673,
];

/// `R` as a polynomial in `z`, highest degree first.
const LARGE: [f64; 14] = [
    -4.379974420769833e-07,
    1.5031092691602505e-07,
    3.2252335201492456e-06,
    -7.780983363446705e-06,
    1.043479217246179e-05,
    -3.119717616049474e-06,
    -5.512811343885168e-05,
    0.0002652711845127762,
    -0.0007384132761494993,
    0.0010344888594289868,
    0.002821133560184168,
    -0.03083105407659048,
    0.16536268999564444,
    0.2897221163599309,
];

/// `G` for `w < 5`, in `w - 2.5`, highest degree first.
const INV_CENTRAL: [f64; 10] = [
    -8.931925970244222e-09,
    2.3335967195708108e-08,
    4.6813134805534123e-07,
    -3.4639852676333717e-06,
    -4.9724196894547514e-06,
    0.00021834938623976644,
    -0.001252726391773229,
    -0.004177392875203149,
    0.24664027905463662,
    1.501409360450329,
];

/// `G` for `w >= 5`, in `sqrt(w) - 3`, highest degree first.
const INV_TAIL: [f64; 14] = [
    9.759081078462646e-08,
    -1.84839399140845e-06,
    1.5152324253552207e-05,
    -6.932251084852583e-05,
    0.00018524731891934494,
    -0.00023943149295562304,
    -0.00016776949124668934,
    0.0014704151421306064,
    -0.0035451415779100305,
    0.005684381615396771,
    -0.007646141501524527,
    0.009446012581017784,
    1.0016753595203869,
    2.8329767835989137,
];

impl Builder {
    /// Horner evaluation of `coeffs` (highest degree first) at `x`.
    fn polynomial(&mut self, x: Value, coeffs: &[f64]) -> Result<Value> {
        let mut acc = self.splat_like(x, coeffs[0])?;
        for &c in &coeffs[1..] {
            let m = self.mul(acc, x)?;
            let k = self.splat_like(x, c)?;
            acc = self.add(m, k)?;
        }
        Ok(acc)
    }

    /// The error function, elementwise, for floating-point tensors.
    pub fn erf(&mut self, x: Value) -> Result<Value> {
        let t = self.type_of("erf", x)?;
        dtype_allowed("erf", Accepts::Float, &t)?;
        if matches!(t.dtype, DType::F16 | DType::BF16) {
            let wide = self.convert(x, DType::F32)?;
            let r = self.erf(wide)?;
            return self.convert(r, t.dtype);
        }
        let dt = t.dtype;
        let one = self.splat_like(x, 1.0)?;
        let ax = self.abs(x)?;

        // |x| < 1
        let x2 = self.mul(x, x)?;
        let t2 = self.min(x2, one)?;
        let p = self.polynomial(t2, &SMALL)?;
        let xp = self.mul(x, p)?;
        let small_val = self.add(x, xp)?;

        // |x| >= 1
        let (lo, hi) = (self.constant_f64(dt, 1.0), self.constant_f64(dt, 6.0));
        let axc = self.clamp(lo, ax, hi)?;
        let u = self.div(one, axc)?;
        let k1 = self.splat_like(x, 2.4)?;
        let k0 = self.splat_like(x, -1.4)?;
        let uk = self.mul(u, k1)?;
        let z = self.add(uk, k0)?;
        let r = self.polynomial(z, &LARGE)?;
        let sq = self.mul(axc, axc)?;
        let nsq = self.neg(sq)?;
        let e = self.exp(nsq)?;
        let erfc = self.mul(e, r)?;
        let mag = self.sub(one, erfc)?;
        let s = self.sign(x)?;
        let large_val = self.mul(s, mag)?;

        let is_small = self.compare(ax, one, CompareDir::Lt)?;
        self.select(is_small, small_val, large_val)
    }

    /// The inverse error function, elementwise, on `(-1, 1)` (±inf at ±1, NaN
    /// outside), for floating-point tensors.
    pub fn erfinv(&mut self, x: Value) -> Result<Value> {
        let t = self.type_of("erfinv", x)?;
        dtype_allowed("erfinv", Accepts::Float, &t)?;
        if matches!(t.dtype, DType::F16 | DType::BF16) {
            let wide = self.convert(x, DType::F32)?;
            let r = self.erfinv(wide)?;
            return self.convert(r, t.dtype);
        }
        let one = self.splat_like(x, 1.0)?;
        let a = self.sub(one, x)?;
        let b = self.add(one, x)?;
        let ab = self.mul(a, b)?;
        let lg = self.log(ab)?;
        let w = self.neg(lg)?;

        let c25 = self.splat_like(x, 2.5)?;
        let z1 = self.sub(w, c25)?;
        let central = self.polynomial(z1, &INV_CENTRAL)?;

        let five = self.splat_like(x, 5.0)?;
        let wt = self.max(w, five)?; // keeps sqrt's argument in the tail's range
        let s = self.sqrt(wt)?;
        let three = self.splat_like(x, 3.0)?;
        let z2 = self.sub(s, three)?;
        let tail = self.polynomial(z2, &INV_TAIL)?;

        let in_central = self.compare(w, five, CompareDir::Lt)?;
        let g = self.select(in_central, central, tail)?;
        self.mul(x, g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Host replay of the same formula in f64 against a few reference values.
    fn host_erf(x: f64) -> f64 {
        let horner = |c: &[f64], v: f64| c.iter().fold(0.0, |acc, &k| acc * v + k);
        let ax = x.abs();
        if ax < 1.0 {
            x + x * horner(&SMALL, x * x)
        } else {
            let a = ax.min(6.0);
            let z = 2.4 / a - 1.4;
            x.signum() * (1.0 - (-a * a).exp() * horner(&LARGE, z))
        }
    }

    fn host_erfinv(x: f64) -> f64 {
        let horner = |c: &[f64], v: f64| c.iter().fold(0.0, |acc, &k| acc * v + k);
        let w = -((1.0 - x) * (1.0 + x)).ln();
        let g = if w < 5.0 {
            horner(&INV_CENTRAL, w - 2.5)
        } else {
            horner(&INV_TAIL, w.sqrt() - 3.0)
        };
        x * g
    }

    #[test]
    fn coefficients_invert_erf() {
        for x in [-0.999999, -0.9, -0.3, 1e-6, 0.5, 0.95, 0.99999, 1.0 - 1e-12] {
            let y = host_erfinv(x);
            let back = host_erf(y);
            // erf' <= 1.13, so an inversion error of e in y shows as <= 1.13 e in x.
            assert!(
                (back - x).abs() <= 1e-8 * x.abs() + 1e-12,
                "erf(erfinv({x})) = {back}"
            );
        }
    }

    #[test]
    fn coefficients_reproduce_erf() {
        let reference = [
            (0.0, 0.0),
            (1e-3, 1.1283787909692363e-3),
            (0.5, 0.5204998778130465),
            (0.9, 0.7969082124228322),
            (1.0, 0.8427007929497149),
            (1.5, 0.9661051464753108),
            (2.5, 0.999593047982555),
            (-3.0, -0.9999779095030014),
            (5.0, 0.9999999999984626),
        ];
        for (x, want) in reference {
            let got = host_erf(x);
            assert!(
                (got - want).abs() <= 1e-9 * want.abs().max(1e-3),
                "erf({x}) = {got}, want {want}"
            );
        }
    }
}
