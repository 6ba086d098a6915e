//! native_dropout (Threefry uniforms) and its backward.
use stablehlo::{CompareDir, DType, RngAlgorithm, Value};

use super::k;
use crate::args::{Arg, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::dtypes;
use crate::error::Result;

/// native_dropout(input, p, train?) -> (output, bool mask). Keeps each element
/// with probability 1-p (uniforms from Threefry bits) and scales it by 1/(1-p).
pub(super) fn native_dropout(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let p = args.float(1)?;
    let train = match args.get(2) {
        Arg::None => true,
        _ => args.bool_or(2, true)?,
    };
    let n: i64 = t.shape.iter().product();
    if !train || n == 0 {
        let ones = lx.full(DType::Bool, 1.0, &t.shape)?;
        return Ok(vec![t.value, ones]);
    }
    if !t.dtype.is_float() {
        bail!(Runtime, "{}: result type Float can't be cast to the desired output type {}", lx.op, dtypes::name(t.dtype));
    }
    let state = lx.rng_state(n as u64);
    let (_, bits) = lx.b.rng_bit_generator(RngAlgorithm::ThreeFry, state, &t.shape, DType::U32)?;
    let eight = lx.b.splat_i64(DType::U32, 8, &t.shape)?;
    let top = lx.b.shift_right_logical(bits, eight)?;
    let u = lx.b.convert(top, DType::F32)?;
    let keep_below = lx.full(DType::F32, (1.0 - p) * (1u64 << 24) as f64, &t.shape)?;
    let mask = lx.b.compare(u, keep_below, CompareDir::Lt)?;
    let scale = if p >= 1.0 { 0.0 } else { 1.0 / (1.0 - p) };
    let mf = lx.cast(mask, t.dtype)?;
    let y = lx.b.mul(t.value, mf)?;
    let s = k(lx, y, scale)?;
    Ok(vec![lx.b.mul(y, s)?, mask])
}

/// native_dropout_backward(grad_output, mask, scale): `grad * mask * scale`,
/// so an integer or bool grad gives float32 (the float scale promotes it),
/// as on the CPU.
pub(super) fn native_dropout_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let g = args.tensor(0)?.clone();
    let m = args.tensor(1)?.clone();
    let out = if g.dtype.is_float() { g.dtype } else { DType::F32 };
    let gv = lx.cast(g.value, out)?;
    let mf = lx.cast(m.value, out)?;
    let mf = lx.expand(mf, &g.shape)?;
    let y = lx.b.mul(gv, mf)?;
    let s = k(lx, y, args.float(2)?)?;
    Ok(vec![lx.b.mul(y, s)?])
}
