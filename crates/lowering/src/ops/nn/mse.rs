//! mse_loss and its backward.
use stablehlo::Value;

use super::{float_only, k};
use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::elementwise::prepare;
use crate::ops::reduce::acc;
use crate::promote::result_type;

fn reduction_of(lx: &mut Lower, v: Value, reduction: i64) -> Result<Value> {
    let all: Vec<i64> = (0..lx.shape(v).len() as i64).collect();
    Ok(match reduction {
        0 => v,
        1 => {
            let n: i64 = lx.shape(v).iter().product();
            let s = lx.b.reduce_sum(v, &all)?;
            let nv = k(lx, s, n as f64)?;
            lx.b.div(s, nv)?
        }
        _ => lx.b.reduce_sum(v, &all)?,
    })
}

/// mse_loss(self, target, reduction=mean)
pub(super) fn mse_loss(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let a = args.operand(0)?;
    let b = args.operand(1)?;
    let dt = result_type(&[&a, &b]);
    float_only(lx, dt)?;
    let v = prepare(lx, &[&a, &b], dt)?;
    let x = lx.cast(v[0], acc(dt))?;
    let y = lx.cast(v[1], acc(dt))?;
    let d = lx.b.sub(x, y)?;
    let d2 = lx.b.mul(d, d)?;
    let r = reduction_of(lx, d2, args.int_or(2, 1)?)?;
    Ok(vec![lx.cast(r, dt)?])
}

/// mse_loss_backward(grad_output, self, target, reduction)
pub(super) fn mse_loss_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let g = args.operand(0)?;
    let a = args.operand(1)?;
    let b = args.operand(2)?;
    let dt = result_type(&[&g, &a, &b]);
    float_only(lx, dt)?;
    let v = prepare(lx, &[&g, &a, &b], dt)?;
    let ac = acc(dt);
    let (g, x, y) = (lx.cast(v[0], ac)?, lx.cast(v[1], ac)?, lx.cast(v[2], ac)?);
    let d = lx.b.sub(x, y)?;
    let n: i64 = lx.shape(d).iter().product();
    let scale = if args.int(3)? == 1 { 2.0 / n as f64 } else { 2.0 };
    let s = k(lx, d, scale)?;
    let d = lx.b.mul(d, s)?;
    let r = lx.b.mul(d, g)?;
    Ok(vec![lx.cast(r, dt)?])
}
