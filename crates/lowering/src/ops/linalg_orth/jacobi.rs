//! Parallel-ordered cyclic Jacobi: each step applies n/2 disjoint plane
//! rotations at once (round-robin pairing, n-1 steps per sweep, an odd n
//! leaves one index idle per step) as one matrix J, sweeps until converged.
//!
//! - `eigh3`: two-sided Jacobi on a symmetric `[B, n, n]`: A <- J^T A J,
//!   V <- V J, the rotated-away entries set to 0; stops when the
//!   off-diagonal norm is below eps * ||A||_F.
//! - `svd_jacobi3`: one-sided (Hestenes) Jacobi on `[B, m, n]`, m >= n:
//!   A <- A J orthogonalizes the columns, V <- V J; stops after a sweep in
//!   which no pair had |a_p . a_q| > m eps ||a_p|| ||a_q||.
//!
//! Complex (Hermitian) inputs: a pair's off-diagonal entry g is first made
//! real by a phase on its second index (P = diag(1, conj(g)/|g|), so
//! P^H [[d_p, g], [conj g, d_q]] P is real symmetric), then rotated as a
//! real pair: J = P R, A <- J^H A J.
use stablehlo::{Builder, CompareDir, DType, Value};

use super::{abs2, bc, c64, conj, diag3, eps, eye3, iota, keep, like, mm, mm_hn, modulus, real, t3};
use crate::error::Result;

const MAX_SWEEPS: i64 = 40;

/// Round-robin schedule: `rounds x n` partner table (partner == self: idle).
fn schedule(n: i64) -> (i64, Vec<i64>) {
    let big = n + (n % 2);
    let rounds = (big - 1).max(1);
    let mut t = Vec::with_capacity((rounds * n) as usize);
    for r in 0..rounds {
        for x in 0..n {
            let p = if big < 2 {
                x
            } else if x == big - 1 {
                r % (big - 1)
            } else {
                let p = (2 * r - x).rem_euclid(big - 1);
                if p == x { big - 1 } else { p }
            };
            t.push(if p >= n { x } else { p });
        }
    }
    (rounds, t)
}

/// The pairing of step `r` broadcast to a batch.
struct Pairs {
    /// `[B, n, n]` bool: column j is row i's partner (or i itself when idle).
    mask: Value,
    /// `mask` as 0/1 of the working dtype.
    onehot: Value,
    /// `[B, n]` bool: i has a partner this step.
    paired: Value,
    /// `[B, n]` bool: i is the first (p < q) index of its pair.
    first: Value,
}

fn pairs(b: &mut Builder, table: &[i64], rounds: i64, r: Value, bb: i64, n: i64, dt: DType) -> Result<Pairs> {
    let tbl = b.constant_tensor_i64(DType::I64, &[rounds, n], table)?;
    let z = c64(b, 0);
    let row = b.dynamic_slice(tbl, &[r, z], &[1, n])?;
    let row = b.reshape(row, &[n])?;
    let s3 = [bb, n, n];
    let pb = bc(b, row, &s3, &[1])?;
    let cols = iota(b, &s3, 2)?;
    let mask = b.compare(cols, pb, CompareDir::Eq)?;
    let onehot = b.convert(mask, dt)?;
    let p2 = bc(b, row, &[bb, n], &[1])?;
    let i2 = iota(b, &[bb, n], 1)?;
    let paired = b.compare(p2, i2, CompareDir::Ne)?;
    let first = b.compare(i2, p2, CompareDir::Lt)?;
    Ok(Pairs { mask, onehot, paired, first })
}

/// `x[b, partner(i)]` for `x [B, n]`.
fn partner_of(b: &mut Builder, p: &Pairs, x: Value) -> Result<Value> {
    let s = b.shape(p.mask).to_vec();
    let xb = bc(b, x, &s, &[0, 2])?;
    let xs = keep(b, p.mask, xb)?;
    Ok(b.reduce_sum(xs, &[2])?)
}

/// The rotation J `[B, n, n]` that diagonalizes each pair's 2x2 symmetric
/// [[d_p, off], [off, d_q]] (Golub & Van Loan's sym.schur2), identity where
/// `rot` is false. `d`/`dp`: own / partner diagonal entry, `off` shared.
fn rotation(b: &mut Builder, p: &Pairs, d: Value, dp: Value, off: Value, rot: Value) -> Result<Value> {
    let a = b.sub(dp, d)?;
    let bq = b.sub(d, dp)?;
    let diff = b.select(p.first, a, bq)?; // d_q - d_p
    let two = b.splat_like(off, 2.0)?;
    let den = b.mul(two, off)?;
    let one = b.splat_like(off, 1.0)?;
    let safe_den = b.select(rot, den, one)?;
    let tau = b.div(diff, safe_den)?;
    let zero = b.splat_like(off, 0.0)?;
    let nonneg = b.compare(tau, zero, CompareDir::Ge)?;
    let mone = b.neg(one)?;
    let sgn = b.select(nonneg, one, mone)?;
    let at = b.abs(tau)?;
    let t2 = b.mul(tau, tau)?;
    let t2 = b.add(one, t2)?;
    let sq = b.sqrt(t2)?;
    let den = b.add(at, sq)?;
    let t = b.div(sgn, den)?;
    let tt = b.mul(t, t)?;
    let tt = b.add(one, tt)?;
    let c = b.rsqrt(tt)?;
    let s = b.mul(t, c)?;
    let c = b.select(rot, c, one)?;
    let s = b.select(rot, s, zero)?;
    let ns = b.neg(s)?;
    let s = b.select(p.first, s, ns)?;
    let sh = b.shape(p.mask).to_vec();
    let rows = iota(b, &sh, 1)?;
    let cols = iota(b, &sh, 2)?;
    let diag = b.compare(rows, cols, CompareDir::Eq)?;
    let cb = bc(b, c, &sh, &[0, 1])?;
    let cd = keep(b, diag, cb)?;
    let sb = bc(b, s, &sh, &[0, 1])?;
    let sd = keep(b, p.mask, sb)?;
    Ok(b.add(cd, sd)?)
}

/// The rotation for the pairs where `rot_if` (and paired), and that mask.
/// Complex pairs rotate by the real |g| and J = P R carries the phase
/// g_i/|g_i| on each pair's second index (row i's entry towards its partner
/// is g_i; the second index holds the conjugate of the first's). Real
/// pairs: R from the signed `g` itself.
fn phased_rotation(b: &mut Builder, p: &Pairs, d: Value, dp: Value, g: Value, rot_if: Value) -> Result<(Value, Value)> {
    let rot = b.and(rot_if, p.paired)?;
    if !b.dtype(g).is_complex() {
        return Ok((rotation(b, p, d, dp, g, rot)?, rot));
    }
    let mag = modulus(b, g)?;
    let r = rotation(b, p, d, dp, mag, rot)?;
    let one = b.splat_like(mag, 1.0)?;
    let safe = b.select(rot, mag, one)?;
    let safe = like(b, safe, g)?;
    let ph = b.div(g, safe)?;
    let onec = b.splat_like(g, 1.0)?;
    let second = b.not(p.first)?;
    let use_ph = b.and(second, rot)?;
    let ph = b.select(use_ph, ph, onec)?;
    let r = like(b, r, g)?;
    let sh = b.shape(r).to_vec();
    let phb = bc(b, ph, &sh, &[0, 1])?;
    Ok((b.mul(phb, r)?, rot))
}

/// One step of a sweep: updates `state` and returns whether it rotated.
type Step = fn(&mut Builder, &Pairs, &[Value]) -> Result<(Vec<Value>, Value)>;
/// After a sweep: is it converged (rank-0 i1)? Gets the state and whether
/// the sweep rotated anything.
type Done = fn(&mut Builder, &[Value], Value) -> Result<Value>;

/// Runs sweeps of `step` over `state` (state[0] is the `[B, *, n]` matrix
/// whose columns are paired) until `done` or MAX_SWEEPS.
fn sweeps(b: &mut Builder, state: Vec<Value>, n: i64, step: Step, done: Done) -> Result<Vec<Value>> {
    let (rounds, table) = schedule(n);
    let bb = b.shape(state[0])[0];
    let dt = b.dtype(state[0]);
    let table = &table;
    let z = c64(b, 0);
    let f = b.constant_i64(DType::Bool, 0);
    let init: Vec<Value> = [z, f].into_iter().chain(state).collect();
    let out = b.while_loop(
        &init,
        |r, c| -> Result<Value> {
            let mx = c64(r, MAX_SWEEPS);
            let more = r.compare(c[0], mx, CompareDir::Lt)?;
            let nd = r.not(c[1])?;
            Ok(r.and(more, nd)?)
        },
        |r, c| -> Result<Vec<Value>> {
            let z = c64(r, 0);
            let f = r.constant_i64(DType::Bool, 0);
            let init: Vec<Value> = [z, f].into_iter().chain(c[2..].iter().copied()).collect();
            let inner = r.while_loop(
                &init,
                |q, c| -> Result<Value> {
                    let k = c64(q, rounds);
                    Ok(q.compare(c[0], k, CompareDir::Lt)?)
                },
                |q, c| -> Result<Vec<Value>> {
                    let p = pairs(q, table, rounds, c[0], bb, n, dt)?;
                    let (st, rot) = step(q, &p, &c[2..])?;
                    let one = c64(q, 1);
                    let next = q.add(c[0], one)?;
                    let any = q.or(c[1], rot)?;
                    Ok([next, any].into_iter().chain(st).collect())
                },
            )?;
            let fin = done(r, &inner[2..], inner[1])?;
            let one = c64(r, 1);
            let next = r.add(c[0], one)?;
            Ok([next, fin].into_iter().chain(inner[2..].iter().copied()).collect())
        },
    )?;
    Ok(out[2..].to_vec())
}

fn any(b: &mut Builder, m: Value) -> Result<Value> {
    let r = b.shape(m).len() as i64;
    let dims: Vec<i64> = (0..r).collect();
    Ok(b.reduce_or(m, &dims)?)
}

fn eigh_step(b: &mut Builder, p: &Pairs, st: &[Value]) -> Result<(Vec<Value>, Value)> {
    let (a, v) = (st[0], st[1]);
    let d = diag3(b, a)?;
    let d = real(b, d)?;
    let dp = partner_of(b, p, d)?;
    let a1 = keep(b, p.mask, a)?;
    let a1 = b.reduce_sum(a1, &[2])?;
    let at = t3(b, a)?;
    let at = conj(b, at)?;
    let a2 = keep(b, p.mask, at)?;
    let a2 = b.reduce_sum(a2, &[2])?;
    let off = b.add(a1, a2)?;
    let half = b.splat_like(off, 0.5)?;
    let off = b.mul(off, half)?;
    let zero = b.splat_like(off, 0.0)?;
    let nz = b.compare(off, zero, CompareDir::Ne)?;
    let (j, rot) = phased_rotation(b, p, d, dp, off, nz)?;
    let aj = mm(b, a, j)?;
    let a = mm_hn(b, j, aj)?;
    let v = mm(b, v, j)?;
    // The rotated pairs' off-diagonal entries are zero by construction.
    let s = b.shape(a).to_vec();
    let rows = iota(b, &s, 1)?;
    let cols = iota(b, &s, 2)?;
    let offd = b.compare(rows, cols, CompareDir::Ne)?;
    let clear = b.and(offd, p.mask)?;
    let zs = b.splat_like(a, 0.0)?;
    let a = b.select(clear, zs, a)?;
    let rot = any(b, rot)?;
    Ok((vec![a, v], rot))
}

fn eigh_done(b: &mut Builder, st: &[Value], _rot: Value) -> Result<Value> {
    let a = st[0];
    let s = b.shape(a).to_vec();
    let rows = iota(b, &s, 1)?;
    let cols = iota(b, &s, 2)?;
    let offd = b.compare(rows, cols, CompareDir::Ne)?;
    let a2 = abs2(b, a)?;
    let tot = b.reduce_sum(a2, &[1, 2])?;
    let o = keep(b, offd, a2)?;
    let off = b.reduce_sum(o, &[1, 2])?;
    let e = eps(b.dtype(a));
    let tol = b.splat_like(tot, e * e)?;
    let lim = b.mul(tot, tol)?;
    let ok = b.compare(off, lim, CompareDir::Le)?;
    Ok(b.reduce_and(ok, &[0])?)
}

/// Eigen-decomposition of symmetric `a [B, n, n]`: (diagonalized A, V) with
/// A_in = V diag(A_out) V^T; eigenvalues unsorted.
pub(super) fn eigh3(b: &mut Builder, a: Value) -> Result<(Value, Value)> {
    let s = b.shape(a).to_vec();
    let dt = b.dtype(a);
    let v = eye3(b, dt, s[0], s[1], s[2])?;
    if s[0] == 0 || s[1] <= 1 {
        return Ok((a, v));
    }
    let out = sweeps(b, vec![a, v], s[1], eigh_step, eigh_done)?;
    Ok((out[0], out[1]))
}

fn svd_step(b: &mut Builder, p: &Pairs, st: &[Value]) -> Result<(Vec<Value>, Value)> {
    let (a, v) = (st[0], st[1]);
    let m = b.shape(a)[1];
    let a2 = abs2(b, a)?;
    let alpha = b.reduce_sum(a2, &[1])?;
    let ap = partner_of(b, p, alpha)?;
    let apart = b.dot_general(a, p.onehot, &[0], &[0], &[2], &[2], None)?;
    // gamma_i = a_i^H a_partner(i).
    let ca = conj(b, a)?;
    let g = b.mul(ca, apart)?;
    let gamma = b.reduce_sum(g, &[1])?;
    let s1 = b.sqrt(alpha)?;
    let s2 = b.sqrt(ap)?;
    let nrm = b.mul(s1, s2)?;
    let tol = b.splat_like(nrm, (m.max(2) as f64) * eps(b.dtype(a)))?;
    let lim = b.mul(nrm, tol)?;
    let ag = modulus(b, gamma)?;
    let big = b.compare(ag, lim, CompareDir::Gt)?;
    let (j, rot) = phased_rotation(b, p, alpha, ap, gamma, big)?;
    let a = mm(b, a, j)?;
    let v = mm(b, v, j)?;
    let rot = any(b, rot)?;
    Ok((vec![a, v], rot))
}

fn svd_done(b: &mut Builder, _st: &[Value], rot: Value) -> Result<Value> {
    Ok(b.not(rot)?)
}

/// One-sided Jacobi of `a [B, m, n]` (m >= n): (A V with orthogonal
/// columns, V `[B, n, n]`).
pub(super) fn svd_jacobi3(b: &mut Builder, a: Value) -> Result<(Value, Value)> {
    let s = b.shape(a).to_vec();
    let dt = b.dtype(a);
    let v = eye3(b, dt, s[0], s[2], s[2])?;
    if s[0] == 0 || s[2] <= 1 || s[1] == 0 {
        return Ok((a, v));
    }
    let out = sweeps(b, vec![a, v], s[2], svd_step, svd_done)?;
    Ok((out[0], out[1]))
}
