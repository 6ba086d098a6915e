//! Ops every tensor needs: fill, copy, clone, dtype conversion, reading a
//! value back (`.item()`).
use stablehlo::Value;

use crate::args::Args;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("fill", fill),
    op!("zero", zero),
    op!("copy", copy),
    op!("clone", clone),
    op!("_to_copy", to_copy),
    op!("_local_scalar_dense", local_scalar_dense),
    op!("alias_copy", clone),
    op!("detach_copy", clone),
];

/// fill_(self, value): value is a Scalar or a 0-dim tensor.
fn fill(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let v = args.operand(1)?;
    let v = super::elementwise::checked_fill_value(lx, &v, t.dtype)?;
    Ok(vec![lx.b.broadcast_in_dim(v, &t.shape, &[])?])
}

fn zero(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    Ok(vec![lx.full(t.dtype, 0.0, &t.shape)?])
}

/// copy_(self, src): src broadcast to self's shape and converted to its dtype.
fn copy(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let dst = args.tensor(0)?;
    let src = args.operand(1)?;
    // src must broadcast to self's shape: shapes that do not broadcast get
    // PyTorch's message from broadcast_shape, and shapes that broadcast
    // together but to a larger shape than self's (self [1, 3], src [2, 3])
    // get the CPU's "doesn't match".
    let both = super::elementwise::broadcast_shape(lx, &[&args.operand(0)?, &src])?;
    if both != dst.shape {
        crate::bail!(Runtime, "{}: output with shape {:?} doesn't match the broadcast shape {:?}", lx.op, dst.shape, both);
    }
    let v = lx.cast(src.value, dst.dtype)?;
    Ok(vec![lx.expand(v, &dst.shape)?])
}

fn clone(_lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    Ok(vec![args.tensor(0)?.value])
}

/// _to_copy(self, *, dtype, layout, device, pin_memory, non_blocking, memory_format)
fn to_copy(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let dtype = args.opt_dtype(1)?.unwrap_or(t.dtype);
    Ok(vec![lx.cast(t.value, dtype)?])
}

fn local_scalar_dense(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    if t.shape.iter().product::<i64>() != 1 {
        crate::bail!(
            Runtime,
            "a Tensor with {} elements cannot be converted to Scalar",
            t.shape.iter().product::<i64>()
        );
    }
    Ok(vec![lx.b.reshape(t.value, &[])?])
}
