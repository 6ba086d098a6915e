//! Random ops: uniform_, normal_ (and normal with tensor mean/std),
//! random_ (randint), bernoulli(_), exponential_, geometric_, log_normal_,
//! cauchy_, randperm.
//!
//! Every op draws its bits with ONE `rng_bit_generator` (Threefry) call from
//! the state `lx.rng_state(count)`, which the engine fills with the
//! generator's (seed, offset) and advances by `count`: the same seed gives
//! the same values, and consecutive ops get fresh ones. (Calling
//! `rng_state` twice in one op would hand out the same state twice.)
//! Uniforms use as many random bits as the dtype has digits (24 for f32, 53
//! for f64, 8 for bf16, 11 for f16), so they lie exactly in [0, 1); normals
//! use Box-Muller on two uniforms. 16-bit floats compute in f32.
use stablehlo::{CompareDir, DType, RngAlgorithm, Value};

use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("uniform", uniform),
    op!("normal_", normal_inplace),
    op!("normal", normal_tensors),
    op!("random", random),
    op!("bernoulli", bernoulli),
    op!("exponential", exponential),
    op!("geometric", geometric),
    op!("log_normal", log_normal),
    op!("cauchy", cauchy),
    op!("randperm", randperm),
];

/// Digits of precision of a float dtype (mantissa bits + 1).
fn digits(d: DType) -> u32 {
    match d {
        DType::F64 => 53,
        DType::F32 => 24,
        DType::F16 => 11,
        DType::BF16 => 8,
        _ => 24,
    }
}

/// The type float math runs in for `d`.
fn compute_type(d: DType) -> DType {
    if d == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// `k` independent sets of uniforms in [0, 1) with `digits(dtype)` random
/// bits each, shape `[k, ..shape]` (or `shape` when k == 1), in
/// `compute_type(dtype)`. Draws the op's random state (once per op).
fn uniforms(lx: &mut Lower, shape: &[i64], k: i64, dtype: DType) -> Result<Value> {
    let ct = compute_type(dtype);
    let mut full = shape.to_vec();
    if k != 1 {
        full.insert(0, k);
    }
    let n: i64 = full.iter().product();
    if n == 0 {
        return lx.full(ct, 0.0, &full);
    }
    let dg = digits(dtype);
    let (bits_ty, width): (DType, u32) = if ct == DType::F64 {
        (DType::U64, 64)
    } else {
        (DType::U32, 32)
    };
    let state = lx.rng_state((n as u64) * (width as u64 / 32));
    let (_, bits) =
        lx.b.rng_bit_generator(RngAlgorithm::ThreeFry, state, &full, bits_ty)?;
    unit_floats(lx.b, bits, dg, ct)
}

/// Random words (u32 or u64) to floats in [0, 1) of type `ct`, from their
/// top `digits` bits: exactly representable, never 1.
pub(super) fn unit_floats(b: &mut stablehlo::Builder, bits: Value, digits: u32, ct: DType) -> Result<Value> {
    let ty = b.ty(bits).clone();
    let width = ty.dtype.bit_width() as u32;
    let sh = b.splat(ty.dtype, (width - digits) as f64, &ty.shape)?;
    let top = b.shift_right_logical(bits, sh)?;
    let f = b.convert(top, ct)?;
    let scale = b.splat(ct, 2f64.powi(-(digits as i32)), &ty.shape)?;
    Ok(b.mul(f, scale)?)
}

/// Raw 64-bit random words of `shape` (for integer ranges and sort keys).
fn words(lx: &mut Lower, shape: &[i64]) -> Result<Value> {
    let n: i64 = shape.iter().product();
    if n == 0 {
        return lx.full(DType::U64, 0.0, shape);
    }
    let state = lx.rng_state(n as u64 * 2);
    Ok(lx
        .b
        .rng_bit_generator(RngAlgorithm::ThreeFry, state, shape, DType::U64)?
        .1)
}

/// The CPU's refusal of a non-float dtype, named as it does ('Long').
pub(super) fn need_float(lx: &Lower, kernel: &str, d: DType) -> Result<()> {
    if !d.is_float() {
        bail!(
            NotImplemented,
            "{}: \"{kernel}\" not implemented for '{}'",
            lx.op,
            super::elementwise::type_name(d)
        );
    }
    Ok(())
}

/// `a * x + b` with f64 constants, in x's type.
fn affine(lx: &mut Lower, x: Value, a: f64, b: f64) -> Result<Value> {
    let av = lx.full_like(x, a)?;
    let bv = lx.full_like(x, b)?;
    let y = lx.b.mul(x, av)?;
    Ok(lx.b.add(y, bv)?)
}

/// uniform_(self, from=0, to=1, *, generator)
fn uniform(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let (shape, dtype) = real_view(t.dtype, &t.shape);
    need_float(lx, "uniform_", dtype)?;
    let (from, to) = (args.float_or(1, 0.0)?, args.float_or(2, 1.0)?);
    if from > to {
        bail!(
            Runtime,
            "{}: uniform_ expects to return a [from, to) range, but found from={from} > to={to}",
            lx.op
        );
    }
    let u = uniforms(lx, &shape, 1, dtype)?;
    let v = affine(lx, u, to - from, from)?;
    let v = lx.cast(v, dtype)?;
    Ok(vec![from_real_view(lx, v, t.dtype)?])
}

/// Random ops fill a complex tensor as PyTorch does: through its
/// `view_as_real` view, i.e. real and imaginary parts drawn as a trailing
/// dimension of 2. Returns that view's shape and dtype (others unchanged).
fn real_view(dtype: DType, shape: &[i64]) -> (Vec<i64>, DType) {
    match dtype.complex_part() {
        Some(part) => ([shape, &[2]].concat(), part),
        None => (shape.to_vec(), dtype),
    }
}

/// The complex tensor whose `view_as_real` view is `v` (when `dtype` is complex).
fn from_real_view(lx: &mut Lower, v: Value, dtype: DType) -> Result<Value> {
    if !dtype.is_complex() {
        return Ok(v);
    }
    let shape = lx.shape(v);
    let rank = shape.len();
    let mut parts = Vec::with_capacity(2);
    for k in 0..2 {
        let mut start = vec![0; rank];
        start[rank - 1] = k;
        let mut limit = shape.clone();
        limit[rank - 1] = k + 1;
        let part = lx.b.slice(v, &start, &limit, &vec![1; rank])?;
        parts.push(lx.b.reshape(part, &shape[..rank - 1])?);
    }
    Ok(lx.b.complex(parts[0], parts[1])?)
}

/// Standard normals of `shape` in `compute_type(dtype)` (Box-Muller).
fn standard_normal(lx: &mut Lower, shape: &[i64], dtype: DType) -> Result<Value> {
    let ct = compute_type(dtype);
    let n: i64 = shape.iter().product();
    if n == 0 {
        return lx.full(ct, 0.0, shape);
    }
    // Full-precision uniforms even for 16-bit outputs: the tails need them.
    let u = uniforms(lx, shape, 2, ct)?;
    let rank = shape.len();
    let mut lo = vec![0; rank + 1];
    let mut hi: Vec<i64> = std::iter::once(1).chain(shape.iter().copied()).collect();
    let u1 = lx.b.slice(u, &lo, &hi, &[])?;
    lo[0] = 1;
    hi[0] = 2;
    let u2 = lx.b.slice(u, &lo, &hi, &[])?;
    let u1 = lx.b.reshape(u1, shape)?;
    let u2 = lx.b.reshape(u2, shape)?;
    box_muller(lx, u1, u2)
}

/// A standard normal from two uniforms in [0, 1): r = sqrt(-2 log(1 - u1))
/// (1 - u1 is in (0, 1]), z = r cos(2π u2).
pub(super) fn box_muller(lx: &mut Lower, u1: Value, u2: Value) -> Result<Value> {
    let one = lx.full_like(u1, 1.0)?;
    let w = lx.b.sub(one, u1)?;
    let l = lx.b.log(w)?;
    let m2 = lx.full_like(l, -2.0)?;
    let r = lx.b.mul(l, m2)?;
    let r = lx.b.sqrt(r)?;
    let tau = lx.full_like(u2, std::f64::consts::TAU)?;
    let th = lx.b.mul(u2, tau)?;
    let c = lx.b.cosine(th)?;
    Ok(lx.b.mul(r, c)?)
}

/// normal_(self, mean=0, std=1, *, generator)
fn normal_inplace(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let (shape, dtype) = real_view(t.dtype, &t.shape);
    need_float(lx, "normal_kernel_cpu", dtype)?;
    let (mean, std) = (args.float_or(1, 0.0)?, args.float_or(2, 1.0)?);
    if std < 0.0 {
        bail!(
            Runtime,
            "{}: normal expects std >= 0.0, but found std {std}",
            lx.op
        );
    }
    // A complex normal has variance std² split over its two parts.
    let part_std = if t.dtype.is_complex() { std / std::f64::consts::SQRT_2 } else { std };
    let z = standard_normal(lx, &shape, dtype)?;
    let v = affine(lx, z, part_std, mean)?;
    let v = lx.cast(v, dtype)?;
    Ok(vec![from_real_view(lx, v, t.dtype)?])
}

/// normal.Tensor_float / float_Tensor / Tensor_Tensor (and their out=):
/// mean + std * z with mean/std broadcast together.
fn normal_tensors(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let mean = float_or_tensor(lx, args, 0)?;
    let std = float_or_tensor(lx, args, 1)?;
    let dtype = match (args.opt_tensor(0), args.opt_tensor(1)) {
        (Some(a), Some(b)) => crate::promote::promote_types(a.dtype, b.dtype),
        (Some(a), None) => a.dtype,
        (None, Some(b)) => b.dtype,
        (None, None) => bail!(
            NotImplemented,
            "{}: normal with two numbers and a size is not lowered",
            lx.op
        ),
    };
    need_float(lx, "normal", dtype)?;
    match args.get(1) {
        // (NaN is refused too: it is not >= 0.)
        crate::args::Arg::Float(x) if !(*x >= 0.0) => bail!(Runtime, "{}: normal expects std >= 0.0, but found std {x}", lx.op),
        crate::args::Arg::Float(_) => {}
        _ => {
            // Checked on the device, as the CPU checks every element.
            let zero = lx.full_like(std.value, 0.0)?;
            let ok = lx.b.compare(std.value, zero, CompareDir::Ge)?;
            let bad = lx.b.not(ok)?;
            let bad = crate::ops::indexing::any(lx, bad)?;
            lx.check_runtime(bad, format!("{}: normal expects all elements of std >= 0.0", lx.op));
        }
    }
    let shape = lx.b.broadcast_shapes(&mean.shape, &std.shape)?;
    let ct = compute_type(dtype);
    let z = standard_normal(lx, &shape, dtype)?;
    let m = lx.cast(mean.value, ct)?;
    let m = lx.expand(m, &shape)?;
    let s = lx.cast(std.value, ct)?;
    let s = lx.expand(s, &shape)?;
    let v = lx.b.mul(z, s)?;
    let v = lx.b.add(v, m)?;
    Ok(vec![lx.cast(v, dtype)?])
}

/// A `float` or Tensor argument as (value, shape).
fn float_or_tensor(lx: &mut Lower, args: &Args, i: usize) -> Result<crate::args::Operand> {
    match args.get(i) {
        crate::args::Arg::Float(x) => Ok(crate::args::Operand {
            value: lx.b.constant_f64(DType::F64, *x),
            dtype: DType::F64,
            shape: vec![],
            class: crate::args::PromoClass::Wrapped,
        }),
        _ => args.operand(i),
    }
}

/// The largest value random_() draws for a dtype: 2^digits for floats,
/// the type's maximum for integers.
fn default_to(d: DType) -> i64 {
    match d {
        DType::Bool => 2,
        DType::U8 => 256,
        DType::I8 => 1 << 7,
        DType::I16 => 1 << 15,
        DType::I32 => 1 << 31,
        DType::I64 => i64::MAX,
        d if d.is_float() => (1i64 << digits(d)) + 1,
        _ => i64::MAX,
    }
}

/// random_(self) / random_.to(self, to) / random_.from(self, from, to?):
/// integers uniform in [from, to), converted to self's dtype.
fn random(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let overload = lx.op.split_once('.').map(|(_, o)| o).unwrap_or("");
    let (from, to) = if overload.starts_with("from") {
        (
            args.int(1)?,
            args.opt_int(2)?.unwrap_or(default_to(t.dtype)),
        )
    } else if overload.starts_with("to") {
        (0, args.int(1)?)
    } else {
        (0, default_to(t.dtype))
    };
    if from >= to {
        bail!(
            Runtime,
            "{}: random_ expects 'from' to be less than 'to', but got from={from} >= to={to}",
            lx.op
        );
    }
    let range = (to as i128 - from as i128) as u64;
    let w = words(lx, &t.shape)?;
    let r = lx.b.splat_i64(DType::U64, range as i64, &t.shape)?;
    let k = lx.b.rem(w, r)?;
    let k = lx.b.convert(k, DType::I64)?;
    let f = lx.b.splat_i64(DType::I64, from, &t.shape)?;
    let v = lx.b.add(k, f)?;
    if t.dtype == DType::Bool {
        return Ok(vec![lx.cast(v, DType::Bool)?]);
    }
    Ok(vec![lx.b.convert(v, t.dtype)?])
}

/// bernoulli(self) (p = self), bernoulli.p / bernoulli_.float (float p),
/// bernoulli.Tensor / bernoulli_.Tensor (tensor p broadcast to self).
fn bernoulli(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let ct = if t.dtype == DType::F64 {
        DType::F64
    } else {
        DType::F32
    };
    let p = match args.get(1) {
        crate::args::Arg::Float(p) => {
            if !(0.0..=1.0).contains(p) {
                bail!(
                    Runtime,
                    "{}: bernoulli_ expects p to be in [0, 1], but got p={p}",
                    lx.op
                );
            }
            lx.full(ct, *p, &t.shape)?
        }
        crate::args::Arg::Tensor(p) => {
            let pt = if p.dtype == DType::F64 {
                DType::F64
            } else {
                ct
            };
            let v = lx.cast(p.value, pt)?;
            let v = lx.b.broadcast_to(v, &t.shape).map_err(|_| {
                crate::error::LowerError::new(
                    crate::error::ErrorKind::Runtime,
                    format!(
                        "{}: p of shape {:?} cannot broadcast to self of shape {:?}",
                        lx.op, p.shape, t.shape
                    ),
                )
            })?;
            lx.cast(v, ct)?
        }
        _ => {
            need_float(lx, "bernoulli_tensor_cpu_p_", t.dtype)?;
            lx.cast(t.value, ct)?
        }
    };
    if !matches!(args.get(1), crate::args::Arg::Float(_)) {
        // A probability tensor must hold probabilities (NaN is not one).
        let (lo, hi) = (lx.full_like(p, 0.0)?, lx.full_like(p, 1.0)?);
        let ge = lx.b.compare(p, lo, CompareDir::Ge)?;
        let le = lx.b.compare(p, hi, CompareDir::Le)?;
        let ok = lx.b.and(ge, le)?;
        let bad = lx.b.not(ok)?;
        let bad = crate::ops::indexing::any(lx, bad)?;
        lx.check_runtime(bad, format!("{}: Expected p_in >= 0 && p_in <= 1 to be true, but got false.", lx.op));
    }
    let u = uniforms(lx, &t.shape, 1, ct)?;
    let hit = lx.b.compare(u, p, CompareDir::Lt)?;
    Ok(vec![lx.cast(hit, t.dtype)?])
}

/// exponential_(self, lambd=1): -log(1 - u) / lambd.
fn exponential(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    need_float(lx, "exponential_cpu", t.dtype)?;
    let lambd = args.float_or(1, 1.0)?;
    if lambd <= 0.0 {
        bail!(
            Runtime,
            "{}: exponential_ expects lambda > 0.0, but found lambda={lambd}",
            lx.op
        );
    }
    let u = uniforms(lx, &t.shape, 1, t.dtype)?;
    let nu = lx.b.neg(u)?;
    let l = lx.b.log_plus_one(nu)?;
    let v = affine(lx, l, -1.0 / lambd, 0.0)?;
    Ok(vec![lx.cast(v, t.dtype)?])
}

/// geometric_(self, p): ceil(log(1 - u) / log(1 - p)), at least 1.
fn geometric(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let p = args.float(1)?;
    if !(p > 0.0 && p < 1.0) {
        bail!(
            Runtime,
            "{}: geometric_ expects p to be in (0, 1), but got p={p}",
            lx.op
        );
    }
    let u = uniforms(lx, &t.shape, 1, DType::F64)?;
    let nu = lx.b.neg(u)?;
    let l = lx.b.log_plus_one(nu)?;
    let v = affine(lx, l, 1.0 / (-p).ln_1p(), 0.0)?;
    let v = lx.b.ceil(v)?;
    let one = lx.full_like(v, 1.0)?;
    let v = lx.b.max(v, one)?;
    Ok(vec![lx.cast(v, t.dtype)?])
}

/// log_normal_(self, mean=1, std=2): exp(mean + std * z).
fn log_normal(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    need_float(lx, "log_normal_cpu", t.dtype)?;
    let (mean, std) = (args.float_or(1, 1.0)?, args.float_or(2, 2.0)?);
    if std <= 0.0 {
        bail!(
            Runtime,
            "{}: log_normal_ expects std > 0.0, but found std={std}",
            lx.op
        );
    }
    let z = standard_normal(lx, &t.shape, t.dtype)?;
    let v = affine(lx, z, std, mean)?;
    let v = lx.b.exp(v)?;
    Ok(vec![lx.cast(v, t.dtype)?])
}

/// cauchy_(self, median=0, sigma=1): median + sigma * tan(pi (u - 1/2)).
fn cauchy(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    need_float(lx, "cauchy_cpu", t.dtype)?;
    let (median, sigma) = (args.float_or(1, 0.0)?, args.float_or(2, 1.0)?);
    let u = uniforms(lx, &t.shape, 1, t.dtype)?;
    let a = affine(lx, u, std::f64::consts::PI, -std::f64::consts::FRAC_PI_2)?;
    let v = lx.b.tan(a)?;
    let v = affine(lx, v, sigma, median)?;
    Ok(vec![lx.cast(v, t.dtype)?])
}

/// randperm(n, ..) / randperm.generator_out: 0..n ordered by random keys.
fn randperm(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let n = args.int(0)?;
    if n < 0 {
        bail!(Runtime, "{}: n must be non-negative, got{n}", lx.op);
    }
    let shape = [n];
    let idx = lx.b.iota(DType::I64, &shape, 0)?;
    let perm = if n <= 1 {
        idx
    } else {
        let keys = words(lx, &shape)?;
        let sorted = lx.b.sort(&[keys, idx], 0, true, |b, a| {
            b.compare(a[0], a[1], CompareDir::Lt)
        })?;
        sorted[1]
    };
    let dtype = if lx.op.ends_with("out") {
        DType::I64
    } else {
        // randperm(n, *, dtype, ..) or randperm.generator(n, *, generator, dtype, ..)
        let pos = if lx.op.contains(".generator") { 2 } else { 1 };
        args.opt_dtype(pos).ok().flatten().unwrap_or(DType::I64)
    };
    Ok(vec![lx.cast(perm, dtype)?])
}
