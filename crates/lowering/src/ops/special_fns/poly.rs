//! Orthogonal polynomials p_n(x) with a per-element degree n (a tensor or
//! a Python number): Chebyshev T/U/V/W, shifted Chebyshev T*/U*/V*/W*,
//! physicists' and probabilists' Hermite H/He, Laguerre L and Legendre P.
//!
//! As ATen's CPU kernels: n is truncated to an integer (NaN/±inf count as
//! negative), negative n gives 0, the special points (|x| = 1, x = 0, ...)
//! and the trigonometric forms for large n with |x| < 1 are kept, the rest
//! runs the three-term recurrence in the working dtype. The recurrence is
//! unrolled: each op has a size program that finds the largest number of
//! steps any element needs (rounded up to a power of two, at least 8, so
//! few programs get compiled); elements stop stepping at their own degree.
//! Beyond `MAX_STEPS` steps the op is reported as not lowered.
use stablehlo::CompareDir::{Eq, Ge, Gt, Lt, Ne};
use stablehlo::DType;

use super::{acos, binary_operands, cos, fms, sin, R, V};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::special::E;

/// The most recurrence steps one program unrolls.
const MAX_STEPS: i64 = 512;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    T,
    U,
    V,
    W,
    ShiftedT,
    ShiftedU,
    ShiftedV,
    ShiftedW,
    H,
    He,
    L,
    P,
}

impl Kind {
    fn shifted(self) -> bool {
        matches!(self, Kind::ShiftedT | Kind::ShiftedU | Kind::ShiftedV | Kind::ShiftedW)
    }
    fn chebyshev(self) -> bool {
        matches!(self, Kind::T | Kind::U | Kind::V | Kind::W) || self.shifted()
    }
    /// The degree above which |x| < 1 (|2x - 1| < 1 when shifted) takes the
    /// trigonometric form.
    fn trig_from(self) -> Option<f64> {
        match self {
            Kind::T | Kind::ShiftedT | Kind::ShiftedU | Kind::ShiftedV => Some(6.0),
            Kind::U | Kind::V | Kind::W => Some(8.0),
            Kind::ShiftedW => Some(4.0),
            _ => None,
        }
    }
}

/// x and the truncated degree n (NaN, ±inf and |n| >= 2^63 become -1) in
/// the working dtype, and the result dtype.
fn inputs(lx: &mut Lower, args: &Args) -> Result<(V, V, DType)> {
    let (x, n, out) = binary_operands(lx, args)?;
    let e = &mut E { lx };
    let an = e.lx.b.abs(n)?;
    let fl = e.lx.b.floor(an)?;
    let nfl = e.lx.b.neg(fl)?;
    let neg = e.cmpc(n, 0.0, Lt)?;
    let t = e.sel(neg, nfl, fl)?;
    let ok = e.cmpc(an, 9.223_372_036_854_776e18, Lt)?;
    let bad = e.not(ok)?;
    let n = e.selc(bad, -1.0, t)?;
    Ok((x, n, out))
}

/// The Hermite degree limit of ATen (NaN above it).
fn hermite_limit(x: DType) -> f64 {
    if x == DType::F64 {
        512.0
    } else {
        128.0
    }
}

/// The argument of the trigonometric forms: x, or 2x - 1 when shifted.
fn arg(e: &mut E, kind: Kind, x: V) -> Result<V> {
    if kind.shifted() {
        let xx = e.add(x, x)?;
        e.addc(xx, -1.0)
    } else {
        Ok(x)
    }
}

/// Whether an element runs the recurrence (n >= 2, none of the closed forms).
fn runs_loop(e: &mut E, kind: Kind, x: V, n: V) -> Result<V> {
    let mut m = e.cmpc(n, 2.0, Ge)?;
    let ok = e.cmp(x, x, Eq)?; // a NaN x stays NaN without stepping
    m = e.and(m, ok)?;
    if let Some(from) = kind.trig_from() {
        let y = arg(e, kind, x)?;
        let ay = e.lx.b.abs(y)?;
        let inside = e.cmpc(ay, 1.0, Lt)?;
        let big = e.cmpc(n, from, Gt)?;
        let trig = e.and(inside, big)?;
        let not = e.not(trig)?;
        m = e.and(m, not)?;
    }
    if matches!(kind, Kind::H | Kind::He) {
        let lim = hermite_limit(e.lx.dtype(x));
        let le = e.cmpc(n, lim, stablehlo::CompareDir::Le)?;
        m = e.and(m, le)?;
    }
    Ok(m)
}

/// The size program: the steps the recurrence needs, bucketed.
fn size(lx: &mut Lower, args: &Args, kind: Kind) -> R {
    let (x, n, _) = inputs(lx, args)?;
    let e = &mut E { lx };
    let m = runs_loop(e, kind, x, n)?;
    let steps = e.addc(n, -1.0)?;
    let zero = e.c(steps, 0.0)?;
    let steps = e.sel(m, steps, zero)?;
    let steps = e.lx.cast(steps, DType::F64)?;
    let rank = e.lx.shape(steps).len() as i64;
    let dims: Vec<i64> = (0..rank).collect();
    let mx = e.lx.b.reduce_max(steps, &dims)?;
    let cap = e.lx.b.constant_f64(DType::F64, 1e12);
    let mx = e.lx.b.min(mx, cap)?;
    let most = e.lx.b.constant_f64(DType::F64, MAX_STEPS as f64);
    let mut r = e.lx.b.max(mx, most)?;
    let mut p = MAX_STEPS / 2;
    while p >= 8 {
        let le = e.cmpc(mx, p as f64, stablehlo::CompareDir::Le)?;
        r = e.selc(le, p as f64, r)?;
        p /= 2;
    }
    let none = e.cmpc(mx, 0.0, stablehlo::CompareDir::Le)?;
    let r = e.selc(none, 0.0, r)?;
    // A plain convert (NaN steps saturate to 0), not the CPU's cast rules.
    Ok(vec![e.lx.b.convert(r, DType::I64)?])
}

/// Runs the recurrence from (p, q) for `trip` steps, element i stopping
/// after n_i - 1 steps; `step(e, p, q, j)` is the value after step j.
fn recur(e: &mut E, n: V, p: V, q: V, trip: i64, step: impl Fn(&mut E, V, V, f64) -> Result<V>) -> Result<V> {
    let (mut p, mut q) = (p, q);
    for j in 0..trip {
        let go = e.cmpc(n, (j + 2) as f64, Ge)?;
        let r = step(e, p, q, j as f64)?;
        p = e.sel(go, q, p)?;
        q = e.sel(go, r, q)?;
    }
    Ok(q)
}

/// `2n + 1`, `n + 1` and the parity of n, as values.
fn even(e: &mut E, n: V) -> Result<V> {
    let h = e.mulc(n, 0.5)?;
    let f = e.lx.b.floor(h)?;
    e.cmp(h, f, Eq)
}

fn two_n_plus_1(e: &mut E, n: V) -> Result<V> {
    let nn = e.add(n, n)?;
    e.addc(nn, 1.0)
}

/// `even ? a : -a`.
fn by_parity(e: &mut E, ev: V, a: V) -> Result<V> {
    let na = e.lx.b.neg(a)?;
    e.sel(ev, a, na)
}

fn lower(lx: &mut Lower, args: &Args, kind: Kind) -> R {
    let trip = lx.dynamic_size.unwrap_or(MAX_STEPS);
    if trip > MAX_STEPS {
        crate::bail!(
            NotImplemented,
            "{}: degree n needs {} recurrence steps; at most {} are supported on this device",
            lx.op,
            trip + 1,
            MAX_STEPS
        );
    }
    let (x, n, out) = inputs(lx, args)?;
    let e = &mut E { lx };
    let one = e.c(x, 1.0)?;
    let ev = even(e, n)?;
    let np1 = e.addc(n, 1.0)?;
    let n21 = two_n_plus_1(e, n)?;
    let y = arg(e, kind, x)?;
    let mut res = if kind.chebyshev() {
        let tx = e.add(y, y)?;
        let q0 = match kind {
            Kind::T | Kind::ShiftedT => y,
            Kind::U | Kind::ShiftedU => tx,
            Kind::V | Kind::ShiftedV => e.addc(tx, -1.0)?,
            _ => e.addc(tx, 1.0)?,
        };
        let r = recur(e, n, one, q0, trip, |e, p, q, _| fms(e, tx, q, p))?;
        let is1 = e.cmpc(n, 1.0, Eq)?;
        let r = e.sel(is1, q0, r)?;
        let ac = acos(e, y)?;
        let tr = match kind {
            Kind::T | Kind::ShiftedT => {
                let a = e.mul(n, ac)?;
                cos(e, a)?
            }
            Kind::U | Kind::ShiftedU => {
                let s = sin(e, ac)?;
                let a = e.mul(np1, ac)?;
                let num = sin(e, a)?;
                let q = e.div(num, s)?;
                let c = cos(e, a)?;
                let alt = e.mul(np1, c)?;
                let alt = e.div(alt, y)?;
                let nz = e.cmpc(s, 0.0, Ne)?;
                e.sel(nz, q, alt)?
            }
            _ => {
                let h = e.mulc(ac, 0.5)?;
                let nh = e.addc(n, 0.5)?;
                let a = e.mul(nh, ac)?;
                let v = matches!(kind, Kind::V | Kind::ShiftedV);
                let (num, den, test, lim) = if v {
                    (cos(e, a)?, cos(e, h)?, sin(e, h)?, by_parity(e, ev, n21)?)
                } else {
                    let lim = by_parity(e, ev, one)?;
                    let lim = if kind == Kind::W {
                        let pos = e.cmpc(x, 0.0, Gt)?;
                        e.sel(pos, n21, lim)?
                    } else {
                        lim
                    };
                    (sin(e, a)?, sin(e, h)?, cos(e, h)?, lim)
                };
                let q = e.div(num, den)?;
                let ne1 = e.cmpc(test, 1.0, Ne)?;
                e.sel(ne1, q, lim)?
            }
        };
        let ay = e.lx.b.abs(y)?;
        let inside = e.cmpc(ay, 1.0, Lt)?;
        let big = e.cmpc(n, kind.trig_from().unwrap_or(f64::INFINITY), Gt)?;
        let trig = e.and(inside, big)?;
        let is0 = e.cmpc(n, 0.0, Eq)?;
        let r = e.selc(is0, 1.0, r)?;
        let mut r = e.sel(trig, tr, r)?;
        // Special points.
        let pos = e.cmpc(x, 0.0, Gt)?;
        let (at_a, at_b) = if kind.shifted() {
            (e.cmpc(x, 1.0, Eq)?, e.cmpc(x, 0.0, Eq)?)
        } else {
            let ax = e.lx.b.abs(x)?;
            let a1 = e.cmpc(ax, 1.0, Eq)?;
            let npos = e.not(pos)?;
            (e.and(a1, pos)?, e.and(a1, npos)?)
        };
        // Values at x = 1 (shifted) / x = +1, and at x = 0 (shifted) / x = -1.
        let (va, vb) = match kind {
            Kind::T | Kind::ShiftedT => (one, by_parity(e, ev, one)?),
            Kind::U | Kind::ShiftedU => (np1, by_parity(e, ev, np1)?),
            Kind::V | Kind::ShiftedV => (one, by_parity(e, ev, n21)?),
            _ => (n21, by_parity(e, ev, one)?),
        };
        r = e.sel(at_b, vb, r)?;
        e.sel(at_a, va, r)?
    } else {
        let omx = e.rsubc(1.0, x)?;
        let xx = e.add(x, x)?;
        let q0 = match kind {
            Kind::H => xx,
            Kind::L => omx,
            _ => x,
        };
        let r = recur(e, n, one, q0, trip, |e, p, q, j| {
            let k = j + 1.0;
            match kind {
                Kind::H => {
                    let b = e.mulc(p, 2.0 * k)?;
                    fms(e, xx, q, b)
                }
                Kind::He => {
                    let b = e.mulc(p, k)?;
                    fms(e, x, q, b)
                }
                Kind::L => {
                    let c = e.addc(omx, 2.0 * k)?;
                    let b = e.mulc(p, k)?;
                    let d = fms(e, c, q, b)?;
                    let kp1 = e.c(d, k + 1.0)?;
                    e.div(d, kp1)
                }
                _ => {
                    let c = e.mulc(x, 2.0 * k + 1.0)?;
                    let b = e.mulc(p, k)?;
                    let d = fms(e, c, q, b)?;
                    let kp1 = e.c(d, k + 1.0)?;
                    e.div(d, kp1)
                }
            }
        })?;
        let mut r = r;
        if matches!(kind, Kind::H | Kind::He) {
            let lim = hermite_limit(e.lx.dtype(x));
            let over = e.cmpc(n, lim, Gt)?;
            r = e.selc(over, f64::NAN, r)?;
        }
        let is1 = e.cmpc(n, 1.0, Eq)?;
        r = e.sel(is1, q0, r)?;
        let is0 = e.cmpc(n, 0.0, Eq)?;
        r = e.selc(is0, 1.0, r)?;
        match kind {
            Kind::L => {
                let z = e.cmpc(x, 0.0, Eq)?;
                e.selc(z, 1.0, r)?
            }
            Kind::P => {
                let ax = e.lx.b.abs(x)?;
                let a1 = e.cmpc(ax, 1.0, Eq)?;
                let pos = e.cmpc(x, 0.0, Gt)?;
                let one_ = e.or(pos, ev)?;
                let v = e.c(x, -1.0)?;
                let v = e.selc(one_, 1.0, v)?;
                e.sel(a1, v, r)?
            }
            _ => r,
        }
    };
    let neg = e.cmpc(n, 0.0, Lt)?;
    res = e.selc(neg, 0.0, res)?;
    Ok(vec![e.lx.cast(res, out)?])
}

macro_rules! kinds {
    ($($f:ident, $s:ident => $k:ident;)*) => {$(
        pub(super) fn $f(lx: &mut Lower, args: &Args) -> R {
            lower(lx, args, Kind::$k)
        }
        pub(super) fn $s(lx: &mut Lower, args: &Args) -> R {
            size(lx, args, Kind::$k)
        }
    )*};
}

kinds! {
    cheb_t, cheb_t_size => T;
    cheb_u, cheb_u_size => U;
    cheb_v, cheb_v_size => V;
    cheb_w, cheb_w_size => W;
    scheb_t, scheb_t_size => ShiftedT;
    scheb_u, scheb_u_size => ShiftedU;
    scheb_v, scheb_v_size => ShiftedV;
    scheb_w, scheb_w_size => ShiftedW;
    hermite_h, hermite_h_size => H;
    hermite_he, hermite_he_size => He;
    laguerre, laguerre_size => L;
    legendre, legendre_size => P;
}
