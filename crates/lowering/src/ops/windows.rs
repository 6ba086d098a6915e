//! kaiser_window. PyTorch's kernel for it is a CompositeExplicitAutograd
//! function that calls a CPU/CUDA-only stub, so on tpu it failed with an
//! internal assert; the other windows (hann, hamming, ...) are composites
//! of lowered ops and need nothing here.
use stablehlo::{DType, Value};

use super::elementwise::wide;
use crate::args::{Arg, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[op!("kaiser_window", kaiser_window)];

/// kaiser_window(window_length[, periodic=True[, beta=12.0]], *, dtype..) and
/// the out= forms: I0(beta * sqrt(1 - ((n - a) / a)^2)) / I0(beta) for
/// n in 0..N, a = (N - 1) / 2, N = window_length (+1 when periodic, whose
/// last point is then dropped), computed as the CPU does in float32 for
/// half types.
fn kaiser_window(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let n = args.int(0)?;
    let has_beta = lx.op.contains(".beta");
    let has_periodic = has_beta || lx.op.contains(".periodic");
    let periodic = if has_periodic { args.bool_or(1, true)? } else { true };
    let beta = if has_beta { args.float(2)? } else { 12.0 };
    let dtype = if lx.op.ends_with("out") {
        lx.out_dtype.unwrap_or(DType::F32)
    } else {
        args.opt_dtype(1 + has_periodic as usize + has_beta as usize).ok().flatten().unwrap_or(DType::F32)
    };
    if n < 0 {
        bail!(Runtime, "kaiser_window requires non-negative window_length, got window_length={n}");
    }
    if !dtype.is_float() {
        bail!(Runtime, "kaiser_window expects floating point dtypes, got: {}", crate::dtypes::name(dtype));
    }
    if n <= 1 {
        return Ok(vec![lx.full(dtype, 1.0, &[n])?]);
    }
    let len = n + periodic as i64;
    let acc = wide(dtype);
    let shape = [len];
    let i = lx.b.iota(acc, &shape, 0)?;
    let alpha = lx.full(acc, (len - 1) as f64 / 2.0, &shape)?;
    let d = lx.b.sub(i, alpha)?;
    let r = lx.b.div(d, alpha)?;
    let r2 = lx.b.mul(r, r)?;
    let one = lx.full(acc, 1.0, &shape)?;
    let t = lx.b.sub(one, r2)?;
    let s = lx.b.sqrt(t)?;
    let b = lx.full(acc, beta, &shape)?;
    let x = lx.b.mul(b, s)?;
    let num = lx.call("aten::i0", vec![Arg::tensor(x, acc, &shape)])?[0];
    let den = lx.call("aten::i0", vec![Arg::tensor(b, acc, &shape)])?[0];
    let w = lx.b.div(num, den)?;
    let w = lx.b.slice(w, &[0], &[n], &[1])?;
    Ok(vec![lx.cast(w, dtype)?])
}
