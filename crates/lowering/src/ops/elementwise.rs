//! Elementwise arithmetic with PyTorch's broadcasting and type promotion.
use stablehlo::{DType, Value};

use crate::args::{Args, Operand};
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::promote::result_type;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("add", add),
    op!("sub", sub),
    op!("mul", mul),
    op!("div", div),
    op!("neg", neg),
];

/// Broadcasts and converts operands to a common shape and `dtype`.
pub(crate) fn prepare(lx: &mut Lower, ops: &[&Operand], dtype: DType) -> Result<Vec<Value>> {
    let mut shape: Vec<i64> = vec![];
    for o in ops {
        shape = lx.b.broadcast_shapes(&shape, &o.shape).map_err(|e| {
            crate::error::LowerError::new(
                crate::error::ErrorKind::Runtime,
                format!(
                    "{}: The size of tensor a ({:?}) must match the size of tensor b ({:?}): {}",
                    lx.op,
                    ops[0].shape,
                    o.shape,
                    e.message
                ),
            )
        })?;
    }
    let mut out = Vec::with_capacity(ops.len());
    for o in ops {
        let v = lx.cast(o.value, dtype)?;
        out.push(lx.expand(v, &shape)?);
    }
    Ok(out)
}

/// `a op b` with promotion; `alpha` (if given) scales b.
fn binary(lx: &mut Lower, args: &Args, f: fn(&mut Lower, Value, Value) -> Result<Value>) -> Result<Vec<Value>> {
    let a = args.operand(0)?;
    let b = args.operand(1)?;
    let dtype = result_type(&[&a, &b]);
    let v = prepare(lx, &[&a, &b], dtype)?;
    let mut rhs = v[1];
    if let Ok(alpha) = args.operand(2) {
        let shape = lx.shape(rhs);
        let al = lx.cast(alpha.value, dtype)?;
        let al = lx.expand(al, &shape)?;
        rhs = lx.b.mul(rhs, al)?;
    }
    Ok(vec![f(lx, v[0], rhs)?])
}

fn add(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    binary(lx, args, |lx, a, b| Ok(lx.b.add(a, b)?))
}

fn sub(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    binary(lx, args, |lx, a, b| Ok(lx.b.sub(a, b)?))
}

fn mul(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    binary(lx, args, |lx, a, b| Ok(lx.b.mul(a, b)?))
}

fn div(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let a = args.operand(0)?;
    let b = args.operand(1)?;
    let mut dtype = result_type(&[&a, &b]);
    let mode = args.opt_str(2).map(str::to_string);
    if mode.is_none() && !dtype.is_float() {
        dtype = DType::F32; // true division of integers gives floats
    }
    let v = prepare(lx, &[&a, &b], dtype)?;
    let q = lx.b.div(v[0], v[1])?;
    Ok(vec![match mode.as_deref() {
        Some("floor") if dtype.is_float() => lx.b.floor(q)?,
        Some("trunc") if dtype.is_float() => {
            let f = lx.b.floor(q)?;
            let c = lx.b.ceil(q)?;
            let zero = lx.full_like(q, 0.0)?;
            let neg = lx.b.compare(q, zero, stablehlo::CompareDir::Lt)?;
            lx.b.select(neg, c, f)?
        }
        Some("floor") => {
            // Integer floor division: adjust truncation toward -inf.
            let r = lx.b.rem(v[0], v[1])?;
            let zero = lx.full_like(r, 0.0)?;
            let nz = lx.b.compare(r, zero, stablehlo::CompareDir::Ne)?;
            let rneg = lx.b.compare(r, zero, stablehlo::CompareDir::Lt)?;
            let bneg = lx.b.compare(v[1], zero, stablehlo::CompareDir::Lt)?;
            let signs_differ = lx.b.xor(rneg, bneg)?;
            let adjust = lx.b.and(nz, signs_differ)?;
            let one = lx.full_like(q, 1.0)?;
            let qm1 = lx.b.sub(q, one)?;
            lx.b.select(adjust, qm1, q)?
        }
        _ => q,
    }])
}

fn neg(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let a = args.tensor(0)?;
    Ok(vec![lx.b.neg(a.value)?])
}
