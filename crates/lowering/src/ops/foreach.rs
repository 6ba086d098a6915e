//! `_foreach_*` ops: one program for the whole list.
//!
//! Each row maps the list op onto the single-tensor lowering: for element i,
//! every `Tensor[]` argument contributes its i-th tensor, every `Scalar[]`
//! its i-th number (as a constant; scalar lists are static arguments), and
//! other arguments pass through unchanged, so `_foreach_add.List(self,
//! other, alpha)` runs `add(self[i], other[i], alpha)`. Functional variants
//! return the list (`list_len`); in-place variants return the same values,
//! which the engine writes into `self`'s tensors.
use stablehlo::{DType, Value};

use super::elementwise::{arith as a, unary as u, wide};
use crate::args::{Arg, Args, ScalarArg, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::{LowerFn, OpEntry};

type R = Result<Vec<Value>>;

/// `foreach!(name => single_tensor_lowering, ...)` defines one wrapper per op.
macro_rules! foreach {
    ($($f:ident => $single:path;)*) => {
        $(
            fn $f(lx: &mut Lower, args: &Args) -> R {
                per_element(lx, args, $single)
            }
        )*
    };
}

foreach! {
    add => a::add;
    sub => a::sub;
    mul => a::mul;
    div => a::div;
    maximum => a::maximum;
    minimum => a::minimum;
    clamp_min => a::clamp_min;
    clamp_max => a::clamp_max;
    pow => a::pow;
    addcmul => a::addcmul;
    addcdiv => a::addcdiv;
    lerp => a::lerp;
    abs => u::abs;
    acos => u::acos;
    asin => u::asin;
    atan => u::atan;
    ceil => u::ceil;
    cos => u::cos;
    cosh => u::cosh;
    erf => u::erf;
    erfc => u::erfc;
    exp => u::exp;
    expm1 => u::expm1;
    floor => u::floor;
    frac => u::frac;
    log => u::log;
    log10 => u::log10;
    log1p => u::log1p;
    log2 => u::log2;
    neg => u::neg;
    reciprocal => u::reciprocal;
    round => u::round;
    rsqrt => u::rsqrt;
    sigmoid => u::sigmoid;
    sign => u::sign;
    sin => u::sin;
    sinh => u::sinh;
    sqrt => u::sqrt;
    tan => u::tan;
    tanh => u::tanh;
    trunc => u::trunc;
}

pub const OPS: &[OpEntry] = &[
    op!("_foreach_add", add),
    op!("_foreach_sub", sub),
    op!("_foreach_mul", mul),
    op!("_foreach_div", div),
    op!("_foreach_maximum", maximum),
    op!("_foreach_minimum", minimum),
    op!("_foreach_clamp_min", clamp_min),
    op!("_foreach_clamp_max", clamp_max),
    op!("_foreach_pow", pow),
    op!("_foreach_addcmul", addcmul),
    op!("_foreach_addcdiv", addcdiv),
    op!("_foreach_lerp", lerp),
    op!("_foreach_abs", abs),
    op!("_foreach_acos", acos),
    op!("_foreach_asin", asin),
    op!("_foreach_atan", atan),
    op!("_foreach_ceil", ceil),
    op!("_foreach_cos", cos),
    op!("_foreach_cosh", cosh),
    op!("_foreach_erf", erf),
    op!("_foreach_erfc", erfc),
    op!("_foreach_exp", exp),
    op!("_foreach_expm1", expm1),
    op!("_foreach_floor", floor),
    op!("_foreach_frac", frac),
    op!("_foreach_log", log),
    op!("_foreach_log10", log10),
    op!("_foreach_log1p", log1p),
    op!("_foreach_log2", log2),
    op!("_foreach_neg", neg),
    op!("_foreach_reciprocal", reciprocal),
    op!("_foreach_round", round),
    op!("_foreach_rsqrt", rsqrt),
    op!("_foreach_sigmoid", sigmoid),
    op!("_foreach_sign", sign),
    op!("_foreach_sin", sin),
    op!("_foreach_sinh", sinh),
    op!("_foreach_sqrt", sqrt),
    op!("_foreach_tan", tan),
    op!("_foreach_tanh", tanh),
    op!("_foreach_trunc", trunc),
    op!("_foreach_zero", zero),
    op!("_foreach_copy", copy),
    op!("_foreach_norm", norm, static),
];

/// The length of the op's tensor lists (they must all agree).
fn list_len(lx: &Lower, args: &Args) -> Result<usize> {
    let mut n: Option<usize> = None;
    for (i, item) in args.items.iter().enumerate() {
        let len = match item {
            Arg::TensorList(ts) => ts.len(),
            Arg::ScalarList(v) => v.len(),
            Arg::FloatList(v) => v.len(),
            Arg::IntList(v) => v.len(),
            Arg::BoolList(v) => v.len(),
            _ => continue,
        };
        match n {
            None => n = Some(len),
            Some(m) if m != len => bail!(
                Runtime,
                "{}: Tensor lists must have the same number of tensors, got {m} and {len} (argument {i})",
                lx.op
            ),
            _ => {}
        }
    }
    match n {
        Some(n) => Ok(n),
        None => bail!(Type, "{}: expected a list of tensors", lx.op),
    }
}

/// A rank-0 constant scalar argument (for an entry of a `Scalar[]`).
fn constant_scalar(lx: &mut Lower, dtype: DType, x: f64, i: i64) -> Arg {
    let value = if dtype.is_float() { lx.b.constant_f64(dtype, x) } else { lx.b.constant_i64(dtype, i) };
    Arg::Scalar(ScalarArg { value, dtype, from_tensor: false, literal: x })
}

/// Entry `i` of a 1-D tensor of per-list-element scalars (`.Tensor` overloads of addcmul/addcdiv).
fn tensor_entry(lx: &mut Lower, t: &TensorArg, i: usize, n: usize) -> Result<Arg> {
    if t.shape != [n as i64] {
        bail!(
            Runtime,
            "{}: Expected scalars to be a 1-D tensor of {n} elements, got shape {:?}",
            lx.op,
            t.shape
        );
    }
    let s = lx.b.slice(t.value, &[i as i64], &[i as i64 + 1], &[1])?;
    let value = lx.b.reshape(s, &[])?;
    Ok(Arg::Scalar(ScalarArg { value, dtype: t.dtype, from_tensor: true, literal: 0.0 }))
}

/// Runs `single` on element i of every list argument, for each i.
fn per_element(lx: &mut Lower, args: &Args, single: LowerFn) -> R {
    let n = list_len(lx, args)?;
    let op = lx.op.to_string();
    let is_addc = op.contains("_foreach_addc");
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let mut items = Vec::with_capacity(args.items.len());
        for (pos, item) in args.items.iter().enumerate() {
            items.push(match item {
                Arg::TensorList(ts) => match ts.get(i).cloned().flatten() {
                    Some(t) => Arg::Tensor(t),
                    None => Arg::None,
                },
                Arg::ScalarList(v) => Arg::Scalar(v[i].clone()),
                Arg::FloatList(v) => constant_scalar(lx, DType::F64, v[i], v[i] as i64),
                Arg::IntList(v) => constant_scalar(lx, DType::I64, v[i] as f64, v[i]),
                Arg::BoolList(v) => constant_scalar(lx, DType::Bool, v[i] as i32 as f64, v[i] as i64),
                Arg::Tensor(t) if is_addc && pos == 3 => tensor_entry(lx, t, i, n)?,
                Arg::Other(kind) => bail!(
                    NotImplemented,
                    "{op}: argument {pos} ({kind}) is not supported on tpu (a list of numbers mixing ints and floats?)"
                ),
                other => other.clone(),
            });
        }
        let elem = Args { op: args.op.clone(), items };
        let vs = single(lx, &elem)?;
        out.push(vs[0]);
    }
    lx.list_len = Some(n);
    Ok(out)
}

/// _foreach_zero_(self): zeros of each tensor's shape and dtype.
fn zero(lx: &mut Lower, args: &Args) -> R {
    let ts = args.tensors(0)?;
    let mut out = Vec::with_capacity(ts.len());
    for t in &ts {
        out.push(lx.full(t.dtype, 0.0, &t.shape)?);
    }
    lx.list_len = Some(ts.len());
    Ok(out)
}

/// _foreach_copy_(self, src, non_blocking): src[i] broadcast and cast to self[i].
fn copy(lx: &mut Lower, args: &Args) -> R {
    let dst = args.tensors(0)?;
    let src = args.tensors(1)?;
    if dst.len() != src.len() {
        bail!(
            Runtime,
            "{}: Tensor lists must have the same number of tensors, got {} and {}",
            lx.op,
            dst.len(),
            src.len()
        );
    }
    let mut out = Vec::with_capacity(dst.len());
    for (d, s) in dst.iter().zip(&src) {
        let v = lx.cast(s.value, d.dtype)?;
        out.push(lx.expand(v, &d.shape)?);
    }
    lx.list_len = Some(dst.len());
    Ok(out)
}

/// _foreach_norm.Scalar(self, ord=2, dtype=None): a 0-dim vector norm per tensor.
fn norm(lx: &mut Lower, args: &Args) -> R {
    let ts = args.tensors(0)?;
    let ord = match args.get(1) {
        Arg::None => 2.0,
        _ => args.float(1)?,
    };
    let want = args.opt_dtype(2)?;
    let mut out = Vec::with_capacity(ts.len());
    for t in &ts {
        if !t.dtype.is_float() {
            bail!(
                Runtime,
                "{}: Expected a floating point or complex tensor as input. Got {}",
                lx.op,
                super::elementwise::type_name(t.dtype)
            );
        }
        let res = want.unwrap_or(t.dtype);
        let x = lx.cast(t.value, wide(res))?;
        let dims: Vec<i64> = (0..t.shape.len() as i64).collect();
        let ax = lx.b.abs(x)?;
        let r = if ord == 2.0 {
            let sq = lx.b.mul(x, x)?;
            let s = lx.b.reduce_sum(sq, &dims)?;
            lx.b.sqrt(s)?
        } else if ord == 1.0 {
            lx.b.reduce_sum(ax, &dims)?
        } else if ord == f64::INFINITY {
            lx.b.reduce_max(ax, &dims)?
        } else if ord == f64::NEG_INFINITY {
            lx.b.reduce_min(ax, &dims)?
        } else if ord == 0.0 {
            let zero = lx.full_like(ax, 0.0)?;
            let nz = lx.b.compare(ax, zero, stablehlo::CompareDir::Ne)?;
            let nz = lx.cast(nz, lx.dtype(ax))?;
            lx.b.reduce_sum(nz, &dims)?
        } else {
            let p = lx.full_like(ax, ord)?;
            let pw = lx.b.pow(ax, p)?;
            let s = lx.b.reduce_sum(pw, &dims)?;
            let inv = lx.full_like(s, 1.0 / ord)?;
            lx.b.pow(s, inv)?
        };
        out.push(lx.cast(r, res)?);
    }
    lx.list_len = Some(ts.len());
    Ok(out)
}
