//! Tensor factories that compute their contents: arange, linspace, logspace,
//! eye, tril_indices/triu_indices, scalar_tensor, _efficientzerotensor
//! (autograd's all-zero gradient, e.g. of sgn: an ordinary zero tensor here).
//!
//! (empty/full/zeros/ones/*_like come as `empty` + `fill_`/`zero_`, which the
//! core family lowers.) PyTorch calls the `.out` overloads here, and out=
//! tensors reach a lowering as `Arg::None`, so a lowering cannot see the dtype
//! the caller asked for: it returns the widest natural dtype (i64 for integer
//! bounds, f64 otherwise) and the engine converts into the out tensor. The
//! functional overloads read their `dtype` argument.
use stablehlo::{DType, Value};

use crate::args::{Arg, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("arange", arange, static),
    op!("linspace", linspace),
    op!("logspace", logspace),
    op!("eye", eye),
    op!("tril_indices", tril_indices),
    op!("triu_indices", triu_indices),
    op!("scalar_tensor", scalar_tensor),
    op!("_efficientzerotensor", efficient_zero_tensor),
];

/// The leading run of Scalar arguments and the position after it.
fn leading_scalars(args: &Args) -> Vec<(f64, bool)> {
    let mut out = Vec::new();
    for a in &args.items {
        match a {
            Arg::Scalar(s) => out.push((s.literal, s.dtype.is_float())),
            _ => break,
        }
    }
    out
}

/// arange(end) / arange(start, end[, step]), functional or out=.
fn arange(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let sc = leading_scalars(args);
    let (start, end, step) = match sc.len() {
        1 => ((0.0, false), sc[0], (1.0, false)),
        2 => (sc[0], sc[1], (1.0, false)),
        3 => (sc[0], sc[1], sc[2]),
        _ => bail!(
            Type,
            "{}: expected 1 to 3 numbers (start, end, step), got {}",
            lx.op,
            sc.len()
        ),
    };
    let any_float = start.1 || end.1 || step.1;
    let requested = args.opt_dtype(sc.len()).ok().flatten();
    let (start, end, step) = (start.0, end.0, step.0);
    if step == 0.0 {
        bail!(Runtime, "{}: step must be nonzero", lx.op);
    }
    if !start.is_finite() || !end.is_finite() {
        bail!(Runtime, "{}: unsupported range: {start} -> {end}", lx.op);
    }
    if (step > 0.0 && end < start) || (step < 0.0 && end > start) {
        bail!(
            Runtime,
            "{}: upper bound and lower bound inconsistent with step sign",
            lx.op
        );
    }
    let integral = |x: f64| x.fract() == 0.0 && x.abs() < 9.0e15;
    let n = if !any_float {
        let (s, e, st) = (start as i64, end as i64, step as i64);
        let sgn = st.signum();
        (e - s + st - sgn) / st
    } else {
        ((end - start) / step).ceil() as i64
    };
    if n < 0 {
        bail!(Runtime, "{}: invalid size, possible overflow?", lx.op);
    }
    // Integral start and step give integral values: compute them exactly in
    // i64 (which also lets an integer out= tensor take them). So does an
    // integer result dtype: the CPU truncates start and step to int64 first
    // (arange(0.5, 4, dtype=int32) is 0..3; arange(0, 2, 0.5, dtype=int64)
    // is four zeros), the length still coming from the float bounds.
    let target = if is_out_variant(lx) { lx.out_dtype } else { requested };
    let int_target = target.is_some_and(|d| d.is_integer() && d != DType::Bool);
    let (start, step) = if int_target { (start.trunc(), step.trunc()) } else { (start, step) };
    let int_math = integral(start) && integral(step);
    let out = if int_math {
        let i = lx.b.iota(DType::I64, &[n], 0)?;
        let st = lx.b.splat_i64(DType::I64, step as i64, &[n])?;
        let s = lx.b.splat_i64(DType::I64, start as i64, &[n])?;
        let p = lx.b.mul(i, st)?;
        lx.b.add(s, p)?
    } else {
        // start + step * i in double, as PyTorch's CPU kernel accumulates.
        let i = lx.b.iota(DType::F64, &[n], 0)?;
        let st = lx.full(DType::F64, step, &[n])?;
        let s = lx.full(DType::F64, start, &[n])?;
        let p = lx.b.mul(i, st)?;
        lx.b.add(s, p)?
    };
    let dtype = match requested {
        Some(d) => d,
        None if is_out_variant(lx) => lx.dtype(out),
        None if any_float => DType::F32,
        None => DType::I64,
    };
    Ok(vec![lx.cast(out, dtype)?])
}

fn is_out_variant(lx: &Lower) -> bool {
    lx.op.ends_with("out")
}

/// A start/end argument: a number or a 0-dim tensor, as a rank-0 f64.
fn bound(lx: &mut Lower, args: &Args, i: usize) -> Result<(Value, bool)> {
    let o = args.operand(i)?;
    if o.shape.iter().product::<i64>() != 1 || !o.shape.is_empty() {
        bail!(
            Runtime,
            "{}: linspace only supports 0-dimensional start and end tensors, but got tensor with {} dimension(s).",
            lx.op,
            o.shape.len()
        );
    }
    let is_float = o.dtype.is_float();
    Ok((lx.cast(o.value, DType::F64)?, is_float))
}

/// The linspace values as f64: start + step*i for the first half,
/// end - step*(steps-1-i) for the rest (PyTorch's symmetric formula).
fn linspace_values(lx: &mut Lower, start: Value, end: Value, steps: i64) -> Result<Value> {
    let shape = [steps];
    if steps == 0 {
        return lx.full(DType::F64, 0.0, &shape);
    }
    let s = lx.b.broadcast_in_dim(start, &shape, &[])?;
    if steps == 1 {
        return Ok(s);
    }
    let e = lx.b.broadcast_in_dim(end, &shape, &[])?;
    let diff = lx.b.sub(e, s)?;
    let denom = lx.full(DType::F64, (steps - 1) as f64, &shape)?;
    let step = lx.b.div(diff, denom)?;
    let i = lx.b.iota(DType::F64, &shape, 0)?;
    let lo = lx.b.mul(step, i)?;
    let lo = lx.b.add(s, lo)?;
    let last = lx.full(DType::F64, (steps - 1) as f64, &shape)?;
    let back = lx.b.sub(last, i)?;
    let hi = lx.b.mul(step, back)?;
    let hi = lx.b.sub(e, hi)?;
    let half = lx.full(DType::F64, (steps / 2) as f64, &shape)?;
    let first = lx.b.compare(i, half, stablehlo::CompareDir::Lt)?;
    Ok(lx.b.select(first, lo, hi)?)
}

/// A bound as the CPU reads it for `dtype`: integer dtypes convert it
/// first (the steps between are still fractional).
fn bound_in(lx: &mut Lower, v: Value, dtype: DType) -> Result<Value> {
    if dtype.is_float() || dtype.is_complex() {
        return Ok(v);
    }
    let i = lx.cast(v, dtype)?;
    lx.cast(i, DType::F64)
}

/// Result dtype of linspace/logspace: the functional `dtype` argument if
/// given, else f32; out=: the out tensor's (values computed in f64 and
/// truncated, as the CPU does for integer dtypes).
fn space_dtype(lx: &Lower, args: &Args, dtype_pos: usize) -> Result<DType> {
    if is_out_variant(lx) {
        return Ok(lx.out_dtype.unwrap_or(DType::F64));
    }
    Ok(args
        .opt_dtype(dtype_pos)
        .ok()
        .flatten()
        .unwrap_or(DType::F32))
}

/// linspace(start, end, steps, *, dtype..) and its out=/Tensor overloads.
fn linspace(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (start, _) = bound(lx, args, 0)?;
    let (end, _) = bound(lx, args, 1)?;
    let steps = args.int(2)?;
    if steps < 0 {
        bail!(Runtime, "{}: number of steps must be non-negative", lx.op);
    }
    let dtype = space_dtype(lx, args, 3)?;
    let (start, end) = (bound_in(lx, start, dtype)?, bound_in(lx, end, dtype)?);
    let v = linspace_values(lx, start, end, steps)?;
    Ok(vec![lx.cast(v, dtype)?])
}

/// logspace(start, end, steps, base=10.0, *, dtype..): base ** linspace.
fn logspace(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (start, _) = bound(lx, args, 0)?;
    let (end, _) = bound(lx, args, 1)?;
    let steps = args.int(2)?;
    if steps < 0 {
        bail!(Runtime, "{}: number of steps must be non-negative", lx.op);
    }
    let base = args.float_or(3, 10.0)?;
    let dtype = space_dtype(lx, args, 4)?;
    let (start, end) = (bound_in(lx, start, dtype)?, bound_in(lx, end, dtype)?);
    let v = linspace_values(lx, start, end, steps)?;
    let b = lx.full(DType::F64, base, &[steps])?;
    let p = lx.b.pow(b, v)?;
    Ok(vec![lx.cast(p, dtype)?])
}

/// eye(n[, m], *, dtype..) / eye.out / eye.m_out: ones on the diagonal.
fn eye(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let n = args.int(0)?;
    let two = lx.op.contains(".m");
    let m = if two { args.int(1)? } else { n };
    if n < 0 || m < 0 {
        bail!(
            Runtime,
            "{}: n must be greater or equal to 0, got {}",
            lx.op,
            n.min(m)
        );
    }
    let shape = [n, m];
    let r = lx.b.iota(DType::I64, &shape, 0)?;
    let c = lx.b.iota(DType::I64, &shape, 1)?;
    let diag = lx.b.compare(r, c, stablehlo::CompareDir::Eq)?;
    // Bool converts exactly into any out= dtype.
    let dtype = if is_out_variant(lx) {
        DType::Bool
    } else {
        args.opt_dtype(if two { 2 } else { 1 })
            .ok()
            .flatten()
            .unwrap_or(DType::F32)
    };
    Ok(vec![lx.cast(diag, dtype)?])
}

/// (row, col) pairs of the lower (or upper) triangle, row-major, as [2, N].
fn triangle_indices(lx: &mut Lower, args: &Args, lower: bool) -> Result<Vec<Value>> {
    let (row, col, offset) = (args.int(0)?, args.int(1)?, args.int_or(2, 0)?);
    if row < 0 || col < 0 {
        bail!(
            Runtime,
            "{}: row and col must be non-negative, got {row} and {col}",
            lx.op
        );
    }
    let mut rs = Vec::new();
    let mut cs = Vec::new();
    for r in 0..row {
        for c in 0..col {
            let keep = if lower {
                c - r <= offset
            } else {
                c - r >= offset
            };
            if keep {
                rs.push(r);
                cs.push(c);
            }
        }
    }
    let n = rs.len() as i64;
    rs.extend(cs);
    let dtype = args.opt_dtype(3).ok().flatten().unwrap_or(DType::I64);
    if !matches!(dtype, DType::I64 | DType::I32) {
        bail!(
            Runtime,
            "{}: \"tril_indices\" not implemented for this dtype; use torch.long or torch.int",
            lx.op
        );
    }
    Ok(vec![lx.b.constant_tensor_i64(dtype, &[2, n], &rs)?])
}

fn tril_indices(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    triangle_indices(lx, args, true)
}

fn triu_indices(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    triangle_indices(lx, args, false)
}

/// scalar_tensor(s, *, dtype..): a 0-dim tensor holding s.
fn scalar_tensor(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let s = args.scalar(0)?;
    let dtype = if is_out_variant(lx) {
        s.dtype
    } else {
        args.opt_dtype(1).ok().flatten().unwrap_or(DType::F32)
    };
    let v = s.value;
    Ok(vec![lx.cast(v, dtype)?])
}

/// _efficientzerotensor(size, dtype?, ...): zeros (float32 unless a dtype is given).
fn efficient_zero_tensor(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let shape = args.ints(0)?;
    let dtype = args.opt_dtype(1).ok().flatten().unwrap_or(DType::F32);
    Ok(vec![lx.full(dtype, 0.0, &shape)?])
}
