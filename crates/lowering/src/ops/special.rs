//! Special functions: lgamma, digamma, polygamma, Hurwitz zeta, the modified
//! Bessel functions i0/i0e/i1/i1e, ndtri, entr, xlog1py and logit.
//!
//! Everything is computed in f64 (whatever the input float type) with the
//! Cephes algorithms PyTorch's CPU kernels use (ATen/native/Math.h); loops
//! with data-dependent trip counts are unrolled to their bound with
//! selects. Ints and bool give float32; results are rounded to the output.
//!
//! - `special/gamma.rs`: lgamma, digamma, polygamma;
//! - `special/zeta.rs`: the Hurwitz zeta function;
//! - `special/bessel_i.rs`: i0, i0e, i1, i1e (and their Chebyshev tables);
//! - `special/ndtri.rs`: ndtri;
//! - here: the table, the f64 expression helper `E` and the unary/binary
//!   wrappers every file uses.
use stablehlo::{CompareDir, DType, Value};

use super::elementwise::{float_of, prepare};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::promote::result_type;
use crate::table::OpEntry;

mod bessel_i;
mod gamma;
mod ndtri;
mod zeta;

pub(super) use bessel_i::{I0_A, I0_B, I1_A, I1_B};
pub(crate) use gamma::{digamma_v, lgamma_v};
use bessel_i::{i0, i0e, i1, i1e};
use gamma::{digamma, lgamma, polygamma};
use ndtri::ndtri;
use zeta::zeta_op;

type R = Result<Vec<Value>>;
type V = Value;

pub const OPS: &[OpEntry] = &[
    op!("lgamma", lgamma),
    op!("special_gammaln", lgamma),
    op!("digamma", digamma),
    op!("special_digamma", digamma),
    op!("special_psi", digamma),
    op!("polygamma", polygamma),
    op!("special_polygamma", polygamma),
    op!("special_zeta", zeta_op),
    op!("i0", i0),
    op!("special_i0", i0),
    op!("special_i0e", i0e),
    op!("special_i1", i1),
    op!("special_i1e", i1e),
    op!("special_ndtri", ndtri),
];

/// Small expression helpers over f64 values of one shape.
pub(crate) struct E<'x, 'a> {
    pub lx: &'x mut Lower<'a>,
}

impl E<'_, '_> {
    pub fn c(&mut self, like: V, x: f64) -> Result<V> {
        self.lx.full_like(like, x)
    }
    pub fn add(&mut self, a: V, b: V) -> Result<V> {
        Ok(self.lx.b.add(a, b)?)
    }
    pub fn sub(&mut self, a: V, b: V) -> Result<V> {
        Ok(self.lx.b.sub(a, b)?)
    }
    pub fn mul(&mut self, a: V, b: V) -> Result<V> {
        Ok(self.lx.b.mul(a, b)?)
    }
    pub fn div(&mut self, a: V, b: V) -> Result<V> {
        Ok(self.lx.b.div(a, b)?)
    }
    pub fn addc(&mut self, a: V, x: f64) -> Result<V> {
        let c = self.c(a, x)?;
        self.add(a, c)
    }
    pub fn mulc(&mut self, a: V, x: f64) -> Result<V> {
        let c = self.c(a, x)?;
        self.mul(a, c)
    }
    /// `x - a`.
    pub fn rsubc(&mut self, x: f64, a: V) -> Result<V> {
        let c = self.c(a, x)?;
        self.sub(c, a)
    }
    /// `x / a`.
    pub fn rdivc(&mut self, x: f64, a: V) -> Result<V> {
        let c = self.c(a, x)?;
        self.div(c, a)
    }
    pub fn cmp(&mut self, a: V, b: V, d: CompareDir) -> Result<V> {
        Ok(self.lx.b.compare(a, b, d)?)
    }
    pub fn cmpc(&mut self, a: V, x: f64, d: CompareDir) -> Result<V> {
        let c = self.c(a, x)?;
        self.cmp(a, c, d)
    }
    pub fn sel(&mut self, p: V, a: V, b: V) -> Result<V> {
        Ok(self.lx.b.select(p, a, b)?)
    }
    /// `p ? x : b`.
    pub fn selc(&mut self, p: V, x: f64, b: V) -> Result<V> {
        let c = self.c(b, x)?;
        self.sel(p, c, b)
    }
    pub fn or(&mut self, a: V, b: V) -> Result<V> {
        Ok(self.lx.b.or(a, b)?)
    }
    pub fn and(&mut self, a: V, b: V) -> Result<V> {
        Ok(self.lx.b.and(a, b)?)
    }
    pub fn not(&mut self, a: V) -> Result<V> {
        Ok(self.lx.b.not(a)?)
    }
    pub fn is_int(&mut self, x: V) -> Result<V> {
        let f = self.lx.b.floor(x)?;
        self.cmp(x, f, CompareDir::Eq)
    }
    /// Horner: `c[0] x^n + ... + c[n]` (Cephes polevl order).
    pub fn polevl(&mut self, x: V, c: &[f64]) -> Result<V> {
        let mut r = self.c(x, c[0])?;
        for &ci in &c[1..] {
            r = self.mul(r, x)?;
            r = self.addc(r, ci)?;
        }
        Ok(r)
    }
    /// Cephes chbevl: a Chebyshev series at `x`.
    pub fn chbevl(&mut self, x: V, c: &[f64]) -> Result<V> {
        let mut b0 = self.c(x, c[0])?;
        let mut b1 = self.c(x, 0.0)?;
        let mut b2 = b1;
        for &ci in &c[1..] {
            b2 = b1;
            b1 = b0;
            let t = self.mul(x, b1)?;
            let t = self.sub(t, b2)?;
            b0 = self.addc(t, ci)?;
        }
        let d = self.sub(b0, b2)?;
        self.mulc(d, 0.5)
    }
}

/// Applies `f` to tensor argument `i` in f64; the result has the float type.
fn unary(lx: &mut Lower, args: &Args, i: usize, f: impl FnOnce(&mut E, V) -> Result<V>) -> R {
    let t = args.tensor(i)?;
    let out = float_of(t.dtype);
    let x = lx.cast(t.value, DType::F64)?;
    let y = f(&mut E { lx }, x)?;
    Ok(vec![lx.cast(y, out)?])
}

/// Applies `f` to operands `i` and `j`, promoted (ints → float32) and broadcast.
fn binary(lx: &mut Lower, args: &Args, i: usize, j: usize, f: impl FnOnce(&mut E, V, V) -> Result<V>) -> R {
    let (a, b) = (args.operand(i)?, args.operand(j)?);
    let out = float_of(result_type(&[&a, &b]));
    let v = prepare(lx, &[&a, &b], DType::F64)?;
    let y = f(&mut E { lx }, v[0], v[1])?;
    Ok(vec![lx.cast(y, out)?])
}
