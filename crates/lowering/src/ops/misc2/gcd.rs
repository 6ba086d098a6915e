//! gcd and lcm of integer tensors (Euclid's algorithm in a loop).
use stablehlo::{CompareDir, DType};

use super::{cmp, R, V};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::elementwise::{not_for, prepare};
use crate::promote::result_type;

fn int_pair(lx: &mut Lower, args: &Args, name: &str) -> Result<(V, V, DType)> {
    let (a, b) = (args.operand(0)?, args.operand(1)?);
    let out = result_type(&[&a, &b]);
    if out.is_float() || out == DType::Bool {
        return Err(not_for(name, out));
    }
    let v = prepare(lx, &[&a, &b], out)?;
    Ok((v[0], v[1], out))
}

/// Euclid's algorithm as a `stablehlo.while` until every b is 0. (Unrolled
/// for the worst case, 93 steps for int64, the program made XLA's compile
/// time explode when the inputs came from a conversion in the same fused
/// graph.)
fn gcd_of(lx: &mut Lower, a: V, b: V, dt: DType) -> Result<V> {
    let op = lx.op.to_string();
    let out = lx.b.while_loop::<crate::error::LowerError>(
        &[a, b],
        |r, c| {
            let l = &mut Lower::new(r, &op);
            let nz = cmp(l, c[1], 0.0, CompareDir::Ne)?;
            crate::ops::indexing::any(l, nz)
        },
        |r, c| {
            let l = &mut Lower::new(r, &op);
            let (a, b) = (c[0], c[1]);
            let z = cmp(l, b, 0.0, CompareDir::Eq)?;
            let one = l.full_like(b, 1.0)?;
            let safe = l.b.select(z, one, b)?;
            let rem = l.b.rem(a, safe)?;
            let na = l.b.select(z, a, b)?;
            let nb = l.b.select(z, b, rem)?;
            Ok(vec![na, nb])
        },
    )?;
    let a = out[0];
    if dt == DType::U8 {
        return Ok(a);
    }
    Ok(lx.b.abs(a)?)
}

pub(super) fn gcd(lx: &mut Lower, args: &Args) -> R {
    let (a, b, dt) = int_pair(lx, args, "gcd_cpu")?;
    Ok(vec![gcd_of(lx, a, b, dt)?])
}

pub(super) fn lcm(lx: &mut Lower, args: &Args) -> R {
    let (a, b, dt) = int_pair(lx, args, "lcm_cpu")?;
    let g = gcd_of(lx, a, b, dt)?;
    let z = cmp(lx, g, 0.0, CompareDir::Eq)?;
    let one = lx.full_like(g, 1.0)?;
    let safe = lx.b.select(z, one, g)?;
    let q = lx.b.div(a, safe)?;
    let m = lx.b.mul(q, b)?;
    let m = if dt == DType::U8 { m } else { lx.b.abs(m)? };
    let zero = lx.full_like(m, 0.0)?;
    Ok(vec![lx.b.select(z, zero, m)?])
}
