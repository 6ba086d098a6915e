//! Samplers that loop until each element is accepted: `_standard_gamma`
//! (Gamma(α, 1), behind `torch.distributions` Gamma, Beta, Chi2, StudentT),
//! `_sample_dirichlet`, `poisson` and `binomial`; and the reparameterized
//! gradients of the gamma and Dirichlet samplers (`_standard_gamma_grad`,
//! `_dirichlet_grad`, for `rsample`).
//!
//! The algorithms are the published ones PyTorch's CPU kernels use, so the
//! distributions are the same (the values differ, as any two generators'
//! do): Marsaglia-Tsang for the gamma, Hörmann's transformed rejection
//! (PTRS, BTRS) for a Poisson rate of at least 10 and a binomial mean of at
//! least 10, and search by inversion of the CDF below those.
//!
//! Each runs as one `stablehlo.while` over the whole tensor, until every
//! element is accepted or `MAX_ROUNDS` rounds have run (each round accepts
//! an element with probability above 0.7, so that bound is never met in
//! practice). Round i draws its uniforms from the op's random state at
//! offset i × (words per round), within what the op reserves with
//! `rng_state`, so the same seed gives the same samples and the next op's
//! stream does not overlap.
use stablehlo::{Builder, CompareDir, DType, RngAlgorithm, Value};

use super::elementwise::type_name;
use super::indexing::any;
use super::random::{box_muller, need_float, unit_floats};
use super::special::E;
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("_standard_gamma", standard_gamma),
    op!("_sample_dirichlet", sample_dirichlet),
    op!("poisson", poisson),
    op!("binomial", binomial),
    op!("_standard_gamma_grad", standard_gamma_grad),
    op!("_dirichlet_grad", dirichlet_grad),
];

/// Rounds of a rejection loop; an inversion search takes one step a round.
const MAX_ROUNDS: i64 = 256;

type V = Value;

/// The samplers compute in f64 whatever the dtype, as the CPU kernels do:
/// the acceptance tests subtract large log-probabilities (a binomial count
/// of 10^9, a Poisson rate of 10^6) that float32 cannot resolve.
const CT: DType = DType::F64;

/// Uniforms in [0, 1) for a loop: `per_round` arrays of `shape` each round,
/// drawn from `state` (the op's random state) at the round's own offset.
#[derive(Clone, Copy)]
struct Stream {
    shape_numel: i64,
    per_round: i64,
    ct: DType,
}

impl Stream {
    fn bits(&self) -> (DType, u32, u32) {
        if self.ct == DType::F64 {
            (DType::U64, 64, 53)
        } else {
            (DType::U32, 32, 24)
        }
    }

    /// 32-bit words one round uses.
    fn words(&self) -> u64 {
        let (_, width, _) = self.bits();
        (self.shape_numel * self.per_round) as u64 * (width as u64 / 32)
    }

    /// Reserves the op's random state for `rounds` rounds.
    fn reserve(&self, lx: &mut Lower, rounds: i64) -> V {
        lx.rng_state(self.words() * rounds as u64)
    }

    /// The `per_round` uniform arrays of round `round` (a rank-0 i64).
    fn draw(&self, b: &mut Builder, state: V, round: V, shape: &[i64]) -> Result<Vec<V>> {
        let (bits_ty, _, digits) = self.bits();
        let r = b.convert(round, DType::U64)?;
        let w = b.constant_i64(DType::U64, self.words() as i64);
        let skip = b.mul(r, w)?;
        let skip = b.reshape(skip, &[1])?;
        let zero = b.splat(DType::U64, 0.0, &[1])?;
        let skip = b.concatenate(&[zero, skip], 0)?;
        let state = b.add(state, skip)?;
        let full: Vec<i64> = std::iter::once(self.per_round).chain(shape.iter().copied()).collect();
        let (_, raw) = b.rng_bit_generator(RngAlgorithm::ThreeFry, state, &full, bits_ty)?;
        let u = unit_floats(b, raw, digits, self.ct)?;
        let rank = shape.len();
        let mut out = Vec::with_capacity(self.per_round as usize);
        for k in 0..self.per_round {
            let start: Vec<i64> = std::iter::once(k).chain(std::iter::repeat(0).take(rank)).collect();
            let limit: Vec<i64> = std::iter::once(k + 1).chain(shape.iter().copied()).collect();
            let part = b.slice(u, &start, &limit, &[])?;
            out.push(b.reshape(part, shape)?);
        }
        Ok(out)
    }
}

/// Runs `round` while some element is not `done` (i1) and fewer than
/// MAX_ROUNDS rounds ran; returns the final `vars`. A loop body sees only
/// what it carries, so the values it reads (α, coefficients) travel in
/// `consts`, unchanged. `round(e, i, state, done, vars, consts)` returns the
/// new done mask and vars (same types).
type Round<'r> = dyn Fn(&mut E, V, V, V, &[V], &[V]) -> Result<(V, Vec<V>)> + 'r;

fn until_done(lx: &mut Lower, state: V, done: V, vars: &[V], consts: &[V], round: &Round) -> Result<Vec<V>> {
    until_done_within(lx, MAX_ROUNDS, state, done, vars, consts, round)
}

fn until_done_within(
    lx: &mut Lower,
    max_rounds: i64,
    state: V,
    done: V,
    vars: &[V],
    consts: &[V],
    round: &Round,
) -> Result<Vec<V>> {
    let op = lx.op;
    let nv = vars.len();
    let i0 = lx.b.constant_i64(DType::I64, 0);
    let mut inits = vec![i0, state, done];
    inits.extend_from_slice(vars);
    inits.extend_from_slice(consts);
    let out = lx.b.while_loop(
        &inits,
        |b, c| -> Result<V> {
            let k = b.constant_i64(DType::I64, max_rounds);
            let more = b.compare(c[0], k, CompareDir::Lt)?;
            let open = b.not(c[2])?;
            let open = any(&mut Lower::new(b, op), open)?;
            Ok(b.and(more, open)?)
        },
        |b, c| -> Result<Vec<V>> {
            let (i, state) = (c[0], c[1]);
            let (done, vars) = {
                let mut inner = Lower::new(b, op);
                let mut e = E { lx: &mut inner };
                round(&mut e, i, state, c[2], &c[3..3 + nv], &c[3 + nv..])?
            };
            let one = b.constant_i64(DType::I64, 1);
            let mut all = vec![b.add(i, one)?, state, done];
            all.extend(vars);
            all.extend_from_slice(&c[3 + nv..]);
            Ok(all)
        },
    )?;
    Ok(out[3..3 + nv].to_vec())
}

/// The number of the term a loop round adds, i + 1, as floats shaped like `like`.
fn step_number(e: &mut E, i: V, like: V) -> Result<V> {
    let one = e.lx.b.constant_i64(DType::I64, 1);
    let n = e.lx.b.add(i, one)?;
    let n = e.lx.b.convert(n, CT)?;
    let shape = e.lx.shape(like);
    Ok(e.lx.b.broadcast_in_dim(n, &shape, &[])?)
}

/// A placeholder random state for loops that draw nothing (series, searches).
fn no_draws(b: &mut Builder) -> Result<V> {
    Ok(b.splat(DType::U64, 0.0, &[2])?)
}

/// `new` where `take` (i1) and not yet `done`; returns (value, done).
fn accept(e: &mut E, take: V, new: V, old: V, done: V) -> Result<(V, V)> {
    let open = e.not(done)?;
    let take = e.and(take, open)?;
    Ok((e.sel(take, new, old)?, e.or(done, take)?))
}

/// log of Gamma(α, 1) samples, α (in `ct`) of any shape. Logs keep tiny α,
/// whose samples underflow, usable for the Dirichlet. α = 0 gives -inf; a
/// negative or NaN α gives NaN.
fn log_gamma_samples(lx: &mut Lower, alpha: V, ct: DType) -> Result<V> {
    let shape = lx.shape(alpha);
    let n: i64 = shape.iter().product();
    // A round: two uniforms for the normal, one to accept. The boost for
    // α < 1 takes one more, from round MAX_ROUNDS.
    let stream = Stream { shape_numel: n, per_round: 3, ct };
    let state = stream.reserve(lx, MAX_ROUNDS + 1);
    let mut e = E { lx };
    // Marsaglia-Tsang for α >= 1; α < 1 samples α + 1 and scales by U^(1/α).
    let boost = e.cmpc(alpha, 1.0, CompareDir::Lt)?;
    let a1 = e.addc(alpha, 1.0)?;
    let a = e.sel(boost, a1, alpha)?;
    let d = e.addc(a, -1.0 / 3.0)?;
    let d9 = e.mulc(d, 9.0)?;
    let c = e.lx.b.rsqrt(d9)?;
    let nan = e.c(alpha, f64::NAN)?;
    // NaN and negative α never accept: they start done, as NaN.
    let ok = e.cmpc(alpha, 0.0, CompareDir::Ge)?;
    let done = e.not(ok)?;
    let shape_in = shape.clone();
    let round = move |e: &mut E, i: V, state: V, done: V, vars: &[V], k: &[V]| -> Result<(V, Vec<V>)> {
        let (d, c, value) = (k[0], k[1], vars[0]);
        let u = stream.draw(e.lx.b, state, i, &shape_in)?;
        let x = box_muller(e.lx, u[0], u[1])?;
        let cx = e.mul(c, x)?;
        let y = e.addc(cx, 1.0)?;
        let positive = e.cmpc(y, 0.0, CompareDir::Gt)?;
        let y2 = e.mul(y, y)?;
        let v = e.mul(y2, y)?;
        let uu = e.rsubc(1.0, u[2])?; // in (0, 1]
        let xx = e.mul(x, x)?;
        // Squeeze: u < 1 - 0.0331 x^4; else the exact test
        // log u < x²/2 + d (1 - v + log v).
        let x4 = e.mul(xx, xx)?;
        let sq = e.mulc(x4, -0.0331)?;
        let sq = e.addc(sq, 1.0)?;
        let quick = e.cmp(uu, sq, CompareDir::Lt)?;
        let lv = e.lx.b.log(v)?;
        let t = e.rsubc(1.0, v)?;
        let t = e.add(t, lv)?;
        let t = e.mul(d, t)?;
        let hx = e.mulc(xx, 0.5)?;
        let t = e.add(hx, t)?;
        let lu = e.lx.b.log(uu)?;
        let exact = e.cmp(lu, t, CompareDir::Lt)?;
        let ok = e.or(quick, exact)?;
        let ok = e.and(ok, positive)?;
        let ld = e.lx.b.log(d)?;
        let sample = e.add(ld, lv)?;
        let (value, done) = accept(e, ok, sample, value, done)?;
        Ok((done, vec![value]))
    };
    let log_dv = until_done(e.lx, state, done, &[nan], &[d, c], &round)?[0];
    let mut e = E { lx };
    let last = e.lx.b.constant_i64(DType::I64, MAX_ROUNDS);
    let u = stream.draw(e.lx.b, state, last, &shape)?;
    // log U^(1/α) = log(1 - u) / α, in (-inf, 0].
    let w = e.rsubc(1.0, u[0])?;
    let lw = e.lx.b.log(w)?;
    let scale = e.div(lw, alpha)?;
    let zero = e.c(alpha, 0.0)?;
    let scale = e.sel(boost, scale, zero)?;
    let out = e.add(log_dv, scale)?;
    // α = 0: the sample is 0 (CPU), log -inf.
    let is_zero = e.cmpc(alpha, 0.0, CompareDir::Eq)?;
    e.selc(is_zero, f64::NEG_INFINITY, out)
}

/// The smallest positive normal number of `d` (PyTorch's floor for samples).
fn tiny(d: DType) -> f64 {
    match d {
        DType::F64 => f64::MIN_POSITIVE,
        DType::F16 => 6.103_515_625e-5,
        _ => f32::MIN_POSITIVE as f64, // f32 and bf16 share the exponent range
    }
}

/// `x` where x > lo, else lo (NaN included), as `std::max(lo, x)`.
fn at_least(e: &mut E, x: V, lo: f64) -> Result<V> {
    let above = e.cmpc(x, lo, CompareDir::Gt)?;
    let l = e.c(x, lo)?;
    e.sel(above, x, l)
}

/// _standard_gamma(self, generator=None): Gamma(self, 1) samples, at least
/// the dtype's smallest normal number (as on the CPU, which also gives that
/// for α = 0, a negative α and NaN).
fn standard_gamma(lx: &mut Lower, args: &Args) -> Result<Vec<V>> {
    let t = args.tensor(0)?;
    need_float(lx, "gamma_cpu", t.dtype)?;
    let alpha = lx.cast(t.value, CT)?;
    let lg = log_gamma_samples(lx, alpha, CT)?;
    let g = lx.b.exp(lg)?;
    let mut e = E { lx };
    let g = at_least(&mut e, g, tiny(t.dtype))?;
    Ok(vec![lx.cast(g, t.dtype)?])
}

/// _sample_dirichlet(self, generator=None): gamma samples normalized over
/// the last dimension, in [smallest normal, 1 - ulp] as on the CPU.
fn sample_dirichlet(lx: &mut Lower, args: &Args) -> Result<Vec<V>> {
    let t = args.tensor(0)?;
    need_float(lx, "dirichlet", t.dtype)?;
    let alpha = lx.cast(t.value, CT)?;
    let shape = t.shape.clone();
    if shape.iter().product::<i64>() == 0 {
        return Ok(vec![t.value]);
    }
    let lg = log_gamma_samples(lx, alpha, CT)?;
    // Normalize in logs (a softmax): tiny α underflow in linear terms.
    let (lg, rank) = if shape.is_empty() { (lx.b.reshape(lg, &[1])?, 1) } else { (lg, shape.len()) };
    let full = lx.shape(lg);
    let last = rank as i64 - 1;
    let keep: Vec<i64> = (0..last).collect();
    let mx = lx.b.reduce_max(lg, &[last])?;
    let mx = lx.b.broadcast_in_dim(mx, &full, &keep)?;
    // All -inf (every α = 0): the CPU's floor makes them equal shares.
    let finite = lx.b.is_finite(mx)?;
    let zero = lx.full_like(mx, 0.0)?;
    let mx = lx.b.select(finite, mx, zero)?;
    let z = lx.b.sub(lg, mx)?;
    let ez = lx.b.exp(z)?;
    let sum = lx.b.reduce_sum(ez, &[last])?;
    let sum = lx.b.broadcast_in_dim(sum, &full, &keep)?;
    let p = lx.b.div(ez, sum)?;
    let mut e = E { lx };
    let p = at_least(&mut e, p, tiny(t.dtype))?;
    let below_one = match t.dtype {
        DType::F64 => 1.0 - f64::EPSILON / 2.0,
        DType::F16 => 1.0 - 2f64.powi(-11),
        DType::BF16 => 1.0 - 2f64.powi(-8),
        _ => 1.0 - (f32::EPSILON / 2.0) as f64,
    };
    let top = e.c(p, below_one)?;
    let p = e.lx.b.min(p, top)?;
    let p = e.lx.b.reshape(p, &shape)?;
    Ok(vec![lx.cast(p, t.dtype)?])
}

/// δ(k) = log k! - [(k + 1/2) log(k + 1) - (k + 1) + log(2π)/2], the tail of
/// Stirling's series for log Γ(k + 1): exact below 10, the series above.
fn stirling_tail(e: &mut E, k: V) -> Result<V> {
    let z = e.addc(k, 1.0)?;
    let z2 = e.mul(z, z)?;
    let inv = e.rdivc(1.0, z)?;
    let inv2 = e.rdivc(1.0, z2)?;
    // 1/(12 z) - 1/(360 z^3) + 1/(1260 z^5)
    let t = e.mulc(inv2, 1.0 / 1260.0)?;
    let t = e.rsubc(1.0 / 360.0, t)?;
    let t = e.mul(t, inv2)?;
    let t = e.rsubc(1.0 / 12.0, t)?;
    let mut out = e.mul(t, inv)?;
    let mut log_fact = 0.0f64;
    for j in 0..10u32 {
        if j > 0 {
            log_fact += (j as f64).ln();
        }
        let jf = j as f64;
        let exact = log_fact - ((jf + 0.5) * (jf + 1.0).ln() - (jf + 1.0) + 0.5 * std::f64::consts::TAU.ln());
        let at = e.cmpc(k, jf, CompareDir::Eq)?;
        out = e.selc(at, exact, out)?;
    }
    Ok(out)
}

/// Hörmann's transformed-rejection proposal from uniforms (u0, u1):
/// U = u0 - 1/2, V = u1, us = 1/2 - |U| and k = floor((2a / us + b) U + shift).
/// Returns (us, V, k).
fn tr_proposal(e: &mut E, u: &[V], a: V, b: V, shift: V) -> Result<(V, V, V)> {
    let uu = e.addc(u[0], -0.5)?;
    let au = e.lx.b.abs(uu)?;
    let us = e.rsubc(0.5, au)?;
    let t = e.div(a, us)?;
    let t = e.mulc(t, 2.0)?;
    let t = e.add(t, b)?;
    let t = e.mul(t, uu)?;
    let t = e.add(t, shift)?;
    Ok((us, u[1], e.lx.b.floor(t)?))
}

/// Hörmann's PTRS for rates λ >= 10 (other elements start done); returns
/// the samples (0 where not drawn).
fn poisson_ptrs(lx: &mut Lower, lam: V, stream: Stream, state: V, shape: &[i64]) -> Result<V> {
    let mut e = E { lx };
    let large = e.cmpc(lam, 10.0, CompareDir::Ge)?;
    let done = e.not(large)?;
    let slam = e.lx.b.sqrt(lam)?;
    let b = e.mulc(slam, 2.53)?;
    let b = e.addc(b, 0.931)?;
    let a = e.mulc(b, 0.02483)?;
    let a = e.addc(a, -0.059)?;
    let b34 = e.addc(b, -3.4)?;
    let inv_alpha = e.rdivc(1.1328, b34)?;
    let inv_alpha = e.addc(inv_alpha, 1.1239)?;
    let b2 = e.addc(b, -2.0)?;
    let vr = e.rdivc(-3.6224, b2)?;
    let vr = e.addc(vr, 0.9277)?;
    let zero = e.c(lam, 0.0)?;
    let shape = shape.to_vec();
    let round = move |e: &mut E, i: V, state: V, done: V, vars: &[V], k: &[V]| -> Result<(V, Vec<V>)> {
        let (lam, a, b, inv_alpha, vr, value) = (k[0], k[1], k[2], k[3], k[4], vars[0]);
        let u = stream.draw(e.lx.b, state, i, &shape)?;
        let shift = e.addc(lam, 0.43)?;
        let (us, v, kk) = tr_proposal(e, &u, a, b, shift)?;
        let q1 = e.cmpc(us, 0.07, CompareDir::Ge)?;
        let q2 = e.cmp(v, vr, CompareDir::Le)?;
        let quick = e.and(q1, q2)?;
        let neg = e.cmpc(kk, 0.0, CompareDir::Lt)?;
        let r1 = e.cmpc(us, 0.013, CompareDir::Lt)?;
        let r2 = e.cmp(v, us, CompareDir::Gt)?;
        let r = e.and(r1, r2)?;
        let reject = e.or(neg, r)?;
        // log V + log(1/α) - log(a / us² + b) <= -λ + k log λ - log k!
        let lv = e.lx.b.log(v)?;
        let lia = e.lx.b.log(inv_alpha)?;
        let us2 = e.mul(us, us)?;
        let t = e.div(a, us2)?;
        let t = e.add(t, b)?;
        let lt = e.lx.b.log(t)?;
        let lhs = e.add(lv, lia)?;
        let lhs = e.sub(lhs, lt)?;
        // In Stirling's form: k log(λ / (k + 1)) - log(k + 1)/2 + (k + 1 - λ)
        // - log(2π)/2 - δ(k); k < 0 is rejected above (its value unused).
        let z = e.c(kk, 0.0)?;
        let kc = e.lx.b.max(kk, z)?;
        let k1 = e.addc(kc, 1.0)?;
        let ll = e.lx.b.log(lam)?;
        let lk1 = e.lx.b.log(k1)?;
        let d = e.sub(ll, lk1)?;
        let rhs = e.mul(kc, d)?;
        let h = e.mulc(lk1, 0.5)?;
        let rhs = e.sub(rhs, h)?;
        let g = e.sub(k1, lam)?;
        let rhs = e.add(rhs, g)?;
        let rhs = e.addc(rhs, -0.5 * std::f64::consts::TAU.ln())?;
        let st = stirling_tail(e, kc)?;
        let rhs = e.sub(rhs, st)?;
        let exact = e.cmp(lhs, rhs, CompareDir::Le)?;
        let keep = e.not(reject)?;
        let exact = e.and(keep, exact)?;
        let ok = e.or(quick, exact)?;
        let (value, done) = accept(e, ok, kk, value, done)?;
        Ok((done, vec![value]))
    };
    Ok(until_done(e.lx, state, done, &[zero], &[lam, a, b, inv_alpha, vr], &round)?[0])
}

/// Search by inversion of a discrete CDF, one step a round, from one
/// uniform `u`: starts at P(0) = `p0`; step k multiplies the probability by
/// `ratio(k)` (k = 1, 2, ...). `done` elements are skipped. The search also
/// stops where the CDF stops growing in floating point (u within rounding
/// of 1) or at `last` (the largest value, if any), so it always ends.
fn invert_cdf(
    lx: &mut Lower,
    u: V,
    p0: V,
    done: V,
    consts: &[V],
    ratio: &'static (dyn Fn(&mut E, V, &[V]) -> Result<V> + Sync),
    last: Option<usize>,
) -> Result<V> {
    let mut e = E { lx };
    let first = e.cmp(u, p0, CompareDir::Lt)?;
    let done = e.or(done, first)?;
    let zero = e.c(u, 0.0)?;
    let mut k = vec![u];
    k.extend_from_slice(consts);
    let state = no_draws(e.lx.b)?;
    let round = move |e: &mut E, i: V, _state: V, done: V, vars: &[V], k: &[V]| -> Result<(V, Vec<V>)> {
        let (p, f, value) = (vars[0], vars[1], vars[2]);
        let u = k[0];
        let step = step_number(e, i, u)?;
        let r = ratio(e, step, &k[1..])?;
        let p = e.mul(p, r)?;
        let f2 = e.add(f, p)?;
        let inside = e.cmp(u, f2, CompareDir::Lt)?;
        let stuck = e.cmp(f2, f, CompareDir::Eq)?;
        let mut take = e.or(inside, stuck)?;
        if let Some(n) = last {
            let end = e.cmp(step, k[1 + n], CompareDir::Ge)?;
            take = e.or(take, end)?;
        }
        let (value, done) = accept(e, take, step, value, done)?;
        Ok((done, vec![p, f2, value]))
    };
    Ok(until_done(e.lx, state, done, &[p0, p0, zero], &k, &round)?[2])
}

/// poisson(self, generator=None): Poisson(rate) samples, as floats of the
/// rate's dtype. A negative or NaN rate raises the CPU's RuntimeError.
fn poisson(lx: &mut Lower, args: &Args) -> Result<Vec<V>> {
    let t = args.tensor(0)?;
    need_float(lx, "poisson_cpu", t.dtype)?;
    let shape = t.shape.clone();
    let n: i64 = shape.iter().product();
    if n == 0 {
        return Ok(vec![t.value]);
    }
    let lam = lx.cast(t.value, CT)?;
    let ok = {
        let mut e = E { lx };
        let ok = e.cmpc(lam, 0.0, CompareDir::Ge)?;
        let bad = e.not(ok)?;
        any(e.lx, bad)?
    };
    lx.check_runtime(ok, "poisson: invalid Poisson rate, expected rate to be non-negative".into());
    // Two uniforms a PTRS round; the inversion's uniform is round MAX_ROUNDS.
    let stream = Stream { shape_numel: n, per_round: 2, ct: CT };
    let state = stream.reserve(lx, MAX_ROUNDS + 1);
    let large = poisson_ptrs(lx, lam, stream, state, &shape)?;
    let last = lx.b.constant_i64(DType::I64, MAX_ROUNDS);
    let u = stream.draw(lx.b, state, last, &shape)?[0];
    let mut e = E { lx };
    let big = e.cmpc(lam, 10.0, CompareDir::Ge)?;
    let nan = e.lx.b.compare(lam, lam, CompareDir::Ne)?;
    let skip = e.or(big, nan)?;
    let neg = e.lx.b.neg(lam)?;
    let p0 = e.lx.b.exp(neg)?;
    // P(k) = P(k - 1) λ / k
    let small = invert_cdf(e.lx, u, p0, skip, &[lam], &|e, k, c| e.div(c[0], k), None)?;
    let mut e = E { lx };
    let out = e.sel(big, large, small)?;
    Ok(vec![lx.cast(out, t.dtype)?])
}

/// Hörmann's BTRS for count n, success probability p <= 1/2 with n p >= 10
/// (other elements start done); returns the samples.
fn binomial_btrs(lx: &mut Lower, n: V, p: V, start_done: V, stream: Stream, state: V, shape: &[i64]) -> Result<V> {
    let mut e = E { lx };
    let q = e.rsubc(1.0, p)?;
    let npq = e.mul(n, p)?;
    let npq = e.mul(npq, q)?;
    let sd = e.lx.b.sqrt(npq)?;
    let b = e.mulc(sd, 2.53)?;
    let b = e.addc(b, 1.15)?;
    let a = e.mulc(b, 0.0248)?;
    let a = e.addc(a, -0.0873)?;
    let p01 = e.mulc(p, 0.01)?;
    let a = e.add(a, p01)?;
    let np = e.mul(n, p)?;
    let c = e.addc(np, 0.5)?;
    let vr = e.rdivc(-4.2, b)?;
    let vr = e.addc(vr, 0.92)?;
    let r = e.div(p, q)?;
    let al = e.rdivc(5.1, b)?;
    let al = e.addc(al, 2.83)?;
    let alpha = e.mul(al, sd)?;
    let n1 = e.addc(n, 1.0)?;
    let m = e.mul(n1, p)?;
    let m = e.lx.b.floor(m)?;
    let zero = e.c(n, 0.0)?;
    let shape = shape.to_vec();
    let round = move |e: &mut E, i: V, state: V, done: V, vars: &[V], k: &[V]| -> Result<(V, Vec<V>)> {
        let (n, a, b, c, vr, r, alpha, m, value) = (k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7], vars[0]);
        let u = stream.draw(e.lx.b, state, i, &shape)?;
        let (us, v, kk) = tr_proposal(e, &u, a, b, c)?;
        let lo = e.cmpc(kk, 0.0, CompareDir::Ge)?;
        let hi = e.cmp(kk, n, CompareDir::Le)?;
        let valid = e.and(lo, hi)?;
        let q1 = e.cmpc(us, 0.07, CompareDir::Ge)?;
        let q2 = e.cmp(v, vr, CompareDir::Le)?;
        let quick = e.and(q1, q2)?;
        // log(V α / (a / us² + b)) <= the log ratio of the pmf at k and m.
        let us2 = e.mul(us, us)?;
        let den = e.div(a, us2)?;
        let den = e.add(den, b)?;
        let va = e.mul(v, alpha)?;
        let lhs = e.div(va, den)?;
        let lhs = e.lx.b.log(lhs)?;
        let z = e.c(kk, 0.0)?;
        let kc = e.lx.b.clamp(z, kk, n)?;
        let m1 = e.addc(m, 1.0)?;
        let nm = e.sub(n, m)?;
        let nm1 = e.addc(nm, 1.0)?;
        let nk = e.sub(n, kc)?;
        let nk1 = e.addc(nk, 1.0)?;
        let k1 = e.addc(kc, 1.0)?;
        // (m + 1/2) log((m + 1) / (r (n - m + 1)))
        let t1 = e.mul(r, nm1)?;
        let t1 = e.div(m1, t1)?;
        let t1 = e.lx.b.log(t1)?;
        let mh = e.addc(m, 0.5)?;
        let t1 = e.mul(mh, t1)?;
        // (n + 1) log((n - m + 1) / (n - k + 1))
        let n1 = e.addc(n, 1.0)?;
        let t2 = e.div(nm1, nk1)?;
        let t2 = e.lx.b.log(t2)?;
        let t2 = e.mul(n1, t2)?;
        // (k + 1/2) log(r (n - k + 1) / (k + 1))
        let t3 = e.mul(r, nk1)?;
        let t3 = e.div(t3, k1)?;
        let t3 = e.lx.b.log(t3)?;
        let kh = e.addc(kc, 0.5)?;
        let t3 = e.mul(kh, t3)?;
        let s1 = stirling_tail(e, m)?;
        let s2 = stirling_tail(e, nm)?;
        let s3 = stirling_tail(e, kc)?;
        let s4 = stirling_tail(e, nk)?;
        let ub = e.add(t1, t2)?;
        let ub = e.add(ub, t3)?;
        let ub = e.add(ub, s1)?;
        let ub = e.add(ub, s2)?;
        let ub = e.sub(ub, s3)?;
        let ub = e.sub(ub, s4)?;
        let exact = e.cmp(lhs, ub, CompareDir::Le)?;
        let ok = e.or(quick, exact)?;
        let ok = e.and(valid, ok)?;
        let (value, done) = accept(e, ok, kk, value, done)?;
        Ok((done, vec![value]))
    };
    Ok(until_done(e.lx, state, start_done, &[zero], &[n, a, b, c, vr, r, alpha, m], &round)?[0])
}

/// binomial(count, prob, generator=None): Binomial(count, prob) samples as
/// floats, count and prob broadcast together. Count <= 0 or prob <= 0 gives
/// 0, prob >= 1 the count, a NaN prob NaN, as on the CPU.
fn binomial(lx: &mut Lower, args: &Args) -> Result<Vec<V>> {
    let (tc, tp) = (args.tensor(0)?, args.tensor(1)?);
    need_float(lx, "binomial_cpu", tc.dtype)?;
    if tp.dtype != tc.dtype {
        bail!(
            Runtime,
            "{}: Found dtype {} but expected {}",
            lx.op,
            type_name(tp.dtype),
            type_name(tc.dtype)
        );
    }
    let shape = lx.b.broadcast_shapes(&tc.shape, &tp.shape)?;
    let numel: i64 = shape.iter().product();
    let n = lx.cast(tc.value, CT)?;
    let n = lx.b.broadcast_to(n, &shape)?;
    let p = lx.cast(tp.value, CT)?;
    let p = lx.b.broadcast_to(p, &shape)?;
    if numel == 0 {
        return Ok(vec![lx.cast(n, tc.dtype)?]);
    }
    let stream = Stream { shape_numel: numel, per_round: 2, ct: CT };
    let state = stream.reserve(lx, MAX_ROUNDS + 1);
    let mut e = E { lx };
    let flip = e.cmpc(p, 0.5, CompareDir::Gt)?;
    let q = e.rsubc(1.0, p)?;
    let pp = e.sel(flip, q, p)?; // <= 1/2
    let n0 = e.cmpc(n, 0.0, CompareDir::Le)?;
    let p0 = e.cmpc(p, 0.0, CompareDir::Le)?;
    let zero_out = e.or(n0, p0)?;
    let all_out = e.cmpc(p, 1.0, CompareDir::Ge)?;
    let pnan = e.cmp(p, p, CompareDir::Ne)?;
    let nnan = e.cmp(n, n, CompareDir::Ne)?;
    let nan_out = e.or(pnan, nnan)?;
    let trivial = e.or(zero_out, all_out)?;
    let trivial = e.or(trivial, nan_out)?;
    // Keep the trivial elements' coefficients finite.
    let half = e.c(p, 0.25)?;
    let ppc = e.sel(trivial, half, pp)?;
    let one = e.c(n, 1.0)?;
    let nc = e.sel(trivial, one, n)?;
    let mean = e.mul(nc, ppc)?;
    let large = e.cmpc(mean, 10.0, CompareDir::Ge)?;
    let small = e.not(large)?;
    let skip_large = e.or(trivial, small)?;
    let big = binomial_btrs(e.lx, nc, ppc, skip_large, stream, state, &shape)?;
    let last = lx.b.constant_i64(DType::I64, MAX_ROUNDS);
    let u = stream.draw(lx.b, state, last, &shape)?[0];
    let mut e = E { lx };
    let skip_small = e.or(trivial, large)?;
    // P(0) = (1 - p)^n; P(k) = P(k - 1) (n - k + 1) / k · p / (1 - p).
    let lq = e.lx.b.neg(ppc)?;
    let lq = e.lx.b.log_plus_one(lq)?;
    let lq = e.mul(nc, lq)?;
    let start = e.lx.b.exp(lq)?;
    let qc = e.rsubc(1.0, ppc)?;
    let odds = e.div(ppc, qc)?;
    let few = invert_cdf(
        e.lx,
        u,
        start,
        skip_small,
        &[nc, odds],
        &|e, k, c| {
            let t = e.sub(c[0], k)?;
            let t = e.addc(t, 1.0)?;
            let t = e.div(t, k)?;
            e.mul(t, c[1])
        },
        Some(0),
    )?;
    let mut e = E { lx };
    let draw = e.sel(large, big, few)?;
    let flipped = e.sub(n, draw)?;
    let out = e.sel(flip, flipped, draw)?;
    let out = e.sel(all_out, n, out)?;
    let zero = e.c(n, 0.0)?;
    let out = e.sel(zero_out, zero, out)?;
    let out = e.selc(nan_out, f64::NAN, out)?;
    Ok(vec![lx.cast(out, tc.dtype)?])
}

/// Terms of the series for ∂P(α, x)/∂α at most (x up to about this).
const MAX_SERIES_TERMS: i64 = 50_000;

/// _standard_gamma_grad(self=α, output=x): dx/dα for x ~ Gamma(α, 1) drawn
/// by inverting its CDF P(α, x), i.e. -(∂P/∂α) / (∂P/∂x). The CPU uses a
/// fitted approximation (relative error about 1e-4); this is the exact
/// value, from P's series: ∂P/∂α = Σ T_n (log x - ψ(α + n + 1)) with
/// T_n = x^(α+n) e^(-x) / Γ(α + n + 1), summed until the terms stop
/// mattering (past n = x they shrink geometrically).
fn standard_gamma_grad(lx: &mut Lower, args: &Args) -> Result<Vec<V>> {
    let (ta, tx) = (args.tensor(0)?, args.tensor(1)?);
    need_float(lx, "_standard_gamma_grad_cpu", ta.dtype)?;
    let shape = lx.b.broadcast_shapes(&ta.shape, &tx.shape)?;
    let a = lx.cast(ta.value, CT)?;
    let a = lx.b.broadcast_to(a, &shape)?;
    let x = lx.cast(tx.value, CT)?;
    let x = lx.b.broadcast_to(x, &shape)?;
    if shape.iter().product::<i64>() == 0 {
        return Ok(vec![lx.cast(a, ta.dtype)?]);
    }
    let mut e = E { lx };
    let lx_ = e.lx.b.log(x)?;
    let a1 = e.addc(a, 1.0)?;
    // T_0 = exp(α log x - x - log Γ(α + 1)); ψ_0 = ψ(α + 1).
    let t0 = e.mul(a, lx_)?;
    let t0 = e.sub(t0, x)?;
    let lg = super::special::lgamma_v(&mut e, a1)?;
    let t0 = e.sub(t0, lg)?;
    let t0 = e.lx.b.exp(t0)?;
    let psi0 = super::special::digamma_v(&mut e, a1)?;
    let d0 = e.sub(lx_, psi0)?;
    let s0 = e.mul(t0, d0)?;
    let fin = e.lx.b.is_finite(s0)?;
    let done = e.not(fin)?;
    let state = no_draws(e.lx.b)?;
    let round = move |e: &mut E, i: V, _state: V, done: V, vars: &[V], k: &[V]| -> Result<(V, Vec<V>)> {
        let (t, psi, sum) = (vars[0], vars[1], vars[2]);
        let (a, x, logx) = (k[0], k[1], k[2]);
        // z = α + n + 1 for the term n = i + 1 being added.
        let n = step_number(e, i, a)?;
        let z_prev = e.add(a, n)?; // α + n: ψ(α + n + 1) = ψ(α + n) + 1 / (α + n)
        let inv = e.rdivc(1.0, z_prev)?;
        let psi = e.add(psi, inv)?;
        let z = e.addc(z_prev, 1.0)?;
        let r = e.div(x, z_prev)?; // T_n / T_(n-1) = x / (α + n)
        let t = e.mul(t, r)?;
        let d = e.sub(logx, psi)?;
        let term = e.mul(t, d)?;
        let sum2 = e.add(sum, term)?;
        // Done once past the mode of the terms (α + n + 1 > x) and the term
        // no longer changes the sum.
        let past = e.cmp(z, x, CompareDir::Gt)?;
        let same = e.cmp(sum2, sum, CompareDir::Eq)?;
        let stop = e.and(past, same)?;
        let open = e.not(done)?;
        let upd = e.and(open, stop)?;
        let done2 = e.or(done, upd)?;
        // Frozen values for done elements.
        let t = e.sel(done, vars[0], t)?;
        let psi = e.sel(done, vars[1], psi)?;
        let sum2 = e.sel(done, sum, sum2)?;
        Ok((done2, vec![t, psi, sum2]))
    };
    let out = until_done_within(e.lx, MAX_SERIES_TERMS, state, done, &[t0, psi0, s0], &[a, x, lx_], &round)?;
    let dp = out[2];
    let mut e = E { lx };
    // pdf = x^(α-1) e^(-x) / Γ(α) = T_0 α / x.
    let pdf = e.mul(t0, a)?;
    let pdf = e.div(pdf, x)?;
    let g = e.div(dp, pdf)?;
    let g = e.lx.b.neg(g)?;
    Ok(vec![lx.cast(g, ta.dtype)?])
}

/// _dirichlet_grad(x, alpha, total): for x ~ Beta(α, β), β = total - α (a
/// Dirichlet's marginal), dx/dα with β fixed, -(∂I_x(α, β)/∂α) / pdf(x),
/// divided by 1 - x: Dirichlet's backward multiplies it by
/// (grad - Σ x grad), which for a Beta is (1 - x) grad. The reparameterized
/// gradient behind Beta and Dirichlet `rsample`. Exact, from
/// the series I_y(p, q) = y^p (1-y)^q / (p B(p, q)) Σ c_n with c_0 = 1,
/// c_n = c_(n-1) y (p+q+n-1) / (p+n), on the side where it converges fast
/// (y = 1 - x with the parameters swapped when x > (α+1)/(α+β+2), using
/// I_x(α, β) = 1 - I_(1-x)(β, α)). The CPU uses a fitted approximation.
fn dirichlet_grad(lx: &mut Lower, args: &Args) -> Result<Vec<V>> {
    let (tx, ta, tt) = (args.tensor(0)?, args.tensor(1)?, args.tensor(2)?);
    need_float(lx, "_dirichlet_grad_cpu", tx.dtype)?;
    let shape = lx.b.broadcast_shapes(&tx.shape, &ta.shape)?;
    let shape = lx.b.broadcast_shapes(&shape, &tt.shape)?;
    let mut vals = Vec::new();
    for t in [tx, ta, tt] {
        let v = lx.cast(t.value, CT)?;
        vals.push(lx.b.broadcast_to(v, &shape)?);
    }
    let (x, a) = (vals[0], vals[1]);
    if shape.iter().product::<i64>() == 0 {
        return Ok(vec![lx.cast(x, tx.dtype)?]);
    }
    let mut e = E { lx };
    let b = e.sub(vals[2], a)?;
    let a1 = e.addc(a, 1.0)?;
    let ab = e.add(a, b)?;
    let ab2 = e.addc(ab, 2.0)?;
    let split = e.div(a1, ab2)?;
    let swap = e.cmp(x, split, CompareDir::Gt)?;
    let x1 = e.rsubc(1.0, x)?;
    let y = e.sel(swap, x1, x)?;
    let p = e.sel(swap, b, a)?;
    let q = e.sel(swap, a, b)?;
    let one = e.c(x, 1.0)?;
    let zero = e.c(x, 0.0)?;
    let state = no_draws(e.lx.b)?;
    let ok = e.lx.b.is_finite(y)?;
    let done = e.not(ok)?;
    // Carried: c_n, Sp_n = Σ_(k<n) (1/(p+q+k) - 1/(p+1+k)), Sq_n = Σ_(k<n)
    // 1/(p+q+k), and the sums G = Σ c_n, Dp = Σ c_n Sp_n, Dq = Σ c_n Sq_n
    // (∂c_n/∂p = c_n Sp_n, ∂c_n/∂q = c_n Sq_n).
    let round = move |e: &mut E, i: V, _state: V, done: V, v: &[V], k: &[V]| -> Result<(V, Vec<V>)> {
        let (p, q, y) = (k[0], k[1], k[2]);
        let n = step_number(e, i, p)?;
        let pq = e.add(p, q)?;
        let pqn = e.add(pq, n)?;
        let pqn1 = e.addc(pqn, -1.0)?; // p + q + n - 1
        let pn = e.add(p, n)?; // p + n
        let r = e.div(pqn1, pn)?;
        let r = e.mul(r, y)?;
        let c = e.mul(v[0], r)?;
        let inv_pq = e.rdivc(1.0, pqn1)?;
        let inv_p = e.rdivc(1.0, pn)?;
        let dsp = e.sub(inv_pq, inv_p)?;
        let sp = e.add(v[1], dsp)?;
        let sq = e.add(v[2], inv_pq)?;
        let g = e.add(v[3], c)?;
        let cp = e.mul(c, sp)?;
        let dp = e.add(v[4], cp)?;
        let cq = e.mul(c, sq)?;
        let dq = e.add(v[5], cq)?;
        let s1 = e.cmp(g, v[3], CompareDir::Eq)?;
        let s2 = e.cmp(dp, v[4], CompareDir::Eq)?;
        let s3 = e.cmp(dq, v[5], CompareDir::Eq)?;
        let stop = e.and(s1, s2)?;
        let stop = e.and(stop, s3)?;
        let new = [c, sp, sq, g, dp, dq];
        let mut out = Vec::with_capacity(6);
        for (j, nv) in new.iter().enumerate() {
            out.push(e.sel(done, v[j], *nv)?);
        }
        let done = e.or(done, stop)?;
        Ok((done, out))
    };
    let out = until_done_within(e.lx, MAX_SERIES_TERMS, state, done, &[one, zero, zero, one, zero, zero], &[p, q, y], &round)?;
    let (g, dp, dq) = (out[3], out[4], out[5]);
    let mut e = E { lx };
    use super::special::{digamma_v, lgamma_v};
    let ly = e.lx.b.log(y)?;
    let y1 = e.rsubc(1.0, y)?;
    let l1y = e.lx.b.log(y1)?;
    let pq = e.add(p, q)?;
    let psi_pq = digamma_v(&mut e, pq)?;
    let psi_p = digamma_v(&mut e, p)?;
    let psi_q = digamma_v(&mut e, q)?;
    // log B(p, q), which is also log B(α, β): {p, q} = {α, β}.
    let lg_p = lgamma_v(&mut e, p)?;
    let lg_q = lgamma_v(&mut e, q)?;
    let lg_pq = lgamma_v(&mut e, pq)?;
    let log_beta = e.add(lg_p, lg_q)?;
    let log_beta = e.sub(log_beta, lg_pq)?;
    // log prefactor: p log y + q log(1-y) - log p - log B(p, q)
    let t = e.mul(p, ly)?;
    let t2 = e.mul(q, l1y)?;
    let l = e.add(t, t2)?;
    let lp = e.lx.b.log(p)?;
    let l = e.sub(l, lp)?;
    let l = e.sub(l, log_beta)?;
    let pre = e.lx.b.exp(l)?;
    // ∂L/∂p = log y - 1/p - ψ(p) + ψ(p+q); ∂L/∂q = log(1-y) - ψ(q) + ψ(p+q)
    let ip = e.rdivc(1.0, p)?;
    let lpd = e.sub(ly, ip)?;
    let lpd = e.sub(lpd, psi_p)?;
    let lpd = e.add(lpd, psi_pq)?;
    let lqd = e.sub(l1y, psi_q)?;
    let lqd = e.add(lqd, psi_pq)?;
    let gp = e.mul(g, lpd)?;
    let dip = e.add(gp, dp)?;
    let dip = e.mul(pre, dip)?;
    let gq = e.mul(g, lqd)?;
    let diq = e.add(gq, dq)?;
    let diq = e.mul(pre, diq)?;
    // ∂I_x(α, β)/∂α: ∂I/∂p directly, or -∂I/∂q after the swap.
    let niq = e.lx.b.neg(diq)?;
    let di = e.sel(swap, niq, dip)?;
    // pdf(x; α, β) = x^(α-1) (1-x)^(β-1) / B(α, β)
    let lxv = e.lx.b.log(x)?;
    let l1x = e.lx.b.log(x1)?;
    let am1 = e.addc(a, -1.0)?;
    let bm1 = e.addc(b, -1.0)?;
    let t = e.mul(am1, lxv)?;
    let t2 = e.mul(bm1, l1x)?;
    let lpdf = e.add(t, t2)?;
    let lpdf = e.sub(lpdf, log_beta)?;
    let pdf = e.lx.b.exp(lpdf)?;
    let g = e.div(di, pdf)?;
    let g = e.div(g, x1)?;
    let g = e.lx.b.neg(g)?;
    Ok(vec![lx.cast(g, tx.dtype)?])
}
