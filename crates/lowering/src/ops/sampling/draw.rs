//! Random sampling ops: `multinomial` and `rrelu_with_noise` (and its
//! `_functional` twin).
//!
//! Randomness comes from one Threefry `rng_bit_generator` call per op on
//! `lx.rng_state` (the generator's seed and offset), so a seed reproduces the
//! draw. multinomial uses the exponential race CPU uses for sampling
//! without replacement: category j wins with key `p_j / E_j`, `E ~ Exp(1)`,
//! so the top `n` keys of one race are a sample without replacement, and
//! the argmax of an independent race per draw is a sample with replacement.
//! Zero-probability categories get key -1 and never win while a positive
//! one is left.
use stablehlo::{CompareDir, DType, RngAlgorithm, Value};

use super::{c, compute_type, tname};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::reduce::arg_reduce;

type R = Result<Vec<Value>>;

/// Uniforms in [0, 1) of `shape` in f64 (53 random bits) or f32 (24 bits).
fn uniforms(lx: &mut Lower, shape: &[i64], ct: DType) -> Result<Value> {
    let n: i64 = shape.iter().product();
    if n == 0 {
        return lx.full(ct, 0.0, shape);
    }
    let (bits_ty, width, digits) = if ct == DType::F64 { (DType::U64, 64, 53) } else { (DType::U32, 32, 24) };
    let state = lx.rng_state(n as u64 * (width / 32));
    let (_, bits) = lx.b.rng_bit_generator(RngAlgorithm::ThreeFry, state, shape, bits_ty)?;
    let sh = lx.b.splat_i64(bits_ty, (width - digits) as i64, shape)?;
    let top = lx.b.shift_right_logical(bits, sh)?;
    let f = lx.b.convert(top, ct)?;
    let scale = lx.full(ct, 2f64.powi(-(digits as i32)), shape)?;
    Ok(lx.b.mul(f, scale)?)
}

/// multinomial(self [C] or [N, C], num_samples, replacement=False, *, generator)
pub(super) fn multinomial(lx: &mut Lower, args: &Args) -> R {
    let p = args.tensor(0)?.clone();
    let ns = args.int(1)?;
    let repl = args.bool_or(2, false)?;
    let rank = p.shape.len();
    if !(rank == 1 || rank == 2) {
        bail!(Runtime, "{}: prob_dist must be 1 or 2 dim", lx.op);
    }
    if !p.dtype.is_float() {
        bail!(Runtime, "{}: multinomial only supports floating-point dtypes for input, got: {}", lx.op, tname(p.dtype));
    }
    if ns <= 0 {
        bail!(Runtime, "{}: cannot sample n_sample <= 0 samples", lx.op);
    }
    let cats = p.shape[rank - 1];
    if !repl && ns > cats {
        bail!(Runtime, "{}: cannot sample n_sample > prob_dist.size(-1) samples without replacement", lx.op);
    }
    if cats > (1 << 24) {
        bail!(Runtime, "{}: number of categories cannot exceed 2^24", lx.op);
    }
    let rows = if rank == 2 { p.shape[0] } else { 1 };
    let mut out_shape = if rank == 2 { vec![rows] } else { vec![] };
    out_shape.push(ns);
    if rows == 0 {
        return Ok(vec![lx.full(DType::I64, 0.0, &out_shape)?]);
    }
    if cats == 0 {
        bail!(Runtime, "{}: invalid multinomial distribution (sum of probabilities <= 0)", lx.op);
    }
    let ct = DType::F64;
    let pv = lx.cast(p.value, ct)?;
    let pv = lx.b.reshape(pv, &[rows, cats])?;
    // Data checks (raised at the next sync): entries finite and >= 0, sums > 0.
    let zero = c(lx, pv, 0.0)?;
    let fin = lx.b.is_finite(pv)?;
    let neg = lx.b.compare(pv, zero, CompareDir::Lt)?;
    let nf = lx.b.not(fin)?;
    let bad = lx.b.or(nf, neg)?;
    let bad = lx.b.reduce_or(bad, &[0, 1])?;
    lx.check_runtime(bad, format!("{}: probability tensor contains either `inf`, `nan` or element < 0", lx.op));
    let sum = lx.b.reduce_sum(pv, &[1])?;
    let z1 = c(lx, sum, 0.0)?;
    let nonpos = lx.b.compare(sum, z1, CompareDir::Le)?;
    let nonpos = lx.b.reduce_or(nonpos, &[0])?;
    lx.check_runtime(nonpos, format!("{}: invalid multinomial distribution (sum of probabilities <= 0)", lx.op));
    let positive = lx.b.compare(pv, zero, CompareDir::Gt)?;
    let keys_for = |lx: &mut Lower, pb: Value, pos: Value, u: Value| -> Result<Value> {
        // E = -log(1 - u) in [0, inf); p / 0 = inf wins, as it should.
        let nu = lx.b.neg(u)?;
        let l = lx.b.log_plus_one(nu)?;
        let e = lx.b.neg(l)?;
        let key = lx.b.div(pb, e)?;
        let m1 = c(lx, key, -1.0)?;
        Ok(lx.b.select(pos, key, m1)?)
    };
    let idx = if repl {
        let shape = [rows, ns, cats];
        let u = uniforms(lx, &shape, ct)?;
        let pb = lx.b.broadcast_in_dim(pv, &shape, &[0, 2])?;
        let pos = lx.b.broadcast_in_dim(positive, &shape, &[0, 2])?;
        let keys = keys_for(lx, pb, pos, u)?;
        arg_reduce(lx, keys, 2, true)?.1
    } else {
        // More samples than positive categories: as on the CPU, the
        // zero-probability ones come last (key -1, in index order).
        let u = uniforms(lx, &[rows, cats], ct)?;
        let keys = keys_for(lx, pv, positive, u)?;
        let iota = lx.b.iota(DType::I64, &[rows, cats], 1)?;
        let sorted = lx.b.sort(&[keys, iota], 1, true, |b, a| b.compare(a[0], a[1], CompareDir::Gt))?;
        lx.b.slice(sorted[1], &[0, 0], &[rows, ns], &[])?
    };
    Ok(vec![lx.b.reshape(idx, &out_shape)?])
}

/// rrelu_with_noise(self, noise!, lower, upper, training, generator) -> out
/// (and the new noise, written back by the engine). Training: x <= 0 gets
/// x * r with r ~ U(lower, upper), noise r; else x, noise 1. Eval: leaky
/// relu with slope (lower + upper) / 2, noise unchanged.
pub(super) fn rrelu_with_noise(lx: &mut Lower, args: &Args) -> R {
    let x = args.tensor(0)?.clone();
    let noise = args.tensor(1)?.clone();
    let training = args.bool_or(4, false)?;
    if !x.dtype.is_float() {
        bail!(NotImplemented, "{}: \"rrelu_with_noise_out_cpu\" not implemented for '{}'", lx.op, tname(x.dtype));
    }
    let ct = compute_type(x.dtype);
    let scalar = |lx: &mut Lower, i: usize, default: f64| -> Result<Value> {
        let v = match args.opt_scalar(i) {
            Some(s) => lx.cast(s.value, ct)?,
            None => lx.b.constant_f64(ct, default),
        };
        Ok(lx.b.broadcast_in_dim(v, &x.shape, &[])?)
    };
    let lower = scalar(lx, 2, 0.125)?;
    let upper = scalar(lx, 3, 1.0 / 3.0)?;
    let xv = lx.cast(x.value, ct)?;
    let zero = lx.full(ct, 0.0, &x.shape)?;
    if !training {
        let s = lx.b.add(lower, upper)?;
        let h = c(lx, s, 0.5)?;
        let slope = lx.b.mul(s, h)?;
        let pos = lx.b.compare(xv, zero, CompareDir::Gt)?;
        let y = lx.b.mul(xv, slope)?;
        let y = lx.b.select(pos, xv, y)?;
        return Ok(vec![lx.cast(y, x.dtype)?, noise.value]);
    }
    if noise.shape != x.shape {
        bail!(Runtime, "{}: noise of shape {:?} must match input of shape {:?}", lx.op, noise.shape, x.shape);
    }
    let u = uniforms(lx, &x.shape, DType::F64)?;
    let u = lx.cast(u, ct)?;
    let span = lx.b.sub(upper, lower)?;
    let r = lx.b.mul(u, span)?;
    let r = lx.b.add(r, lower)?;
    let le = lx.b.compare(xv, zero, CompareDir::Le)?;
    let y = lx.b.mul(xv, r)?;
    let y = lx.b.select(le, y, xv)?;
    let one = c(lx, r, 1.0)?;
    let nz = lx.b.select(le, r, one)?;
    Ok(vec![lx.cast(y, x.dtype)?, lx.cast(nz, noise.dtype)?])
}
