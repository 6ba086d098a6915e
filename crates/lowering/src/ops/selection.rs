//! Sorting and selection: sort/argsort/msort, topk, kthvalue, median,
//! nanmedian, mode, cummax/cummin, and the data-dependent unique family.
//!
//! Everything sorts stably with `stablehlo.sort` and an iota index operand,
//! ordering NaN as the largest value (as torch does), so ties keep their
//! original order. Reductions along a dim first move that dim last and
//! flatten the rest into rows (`[B, n]`).
use stablehlo::{Builder, CompareDir, DType, GatherDims, Value};

use crate::args::{norm_dim, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("sort", sort),
    op!("argsort", argsort),
    op!("msort", msort),
    op!("topk", topk),
    op!("kthvalue", kthvalue),
    op!("median", median),
    op!("nanmedian", median),
    op!("mode", mode),
    op!("_cummax_helper", cumext),
    op!("_cummin_helper", cumext),
    op!("_unique2", unique::unique2, size = unique::unique2_count),
    op!("_unique", unique::unique2, size = unique::unique2_count),
    op!("unique_consecutive", unique::unique_consecutive, size = unique::unique_consecutive_count),
    op!("unique_dim", unique::unique_dim, size = unique::unique_dim_count),
];

mod unique;

/// `lhs` goes before `rhs`: ascending (or descending) with NaN largest.
fn before(b: &mut Builder, l: Value, r: Value, descending: bool) -> stablehlo::Result<Value> {
    let float = b.ty(l).dtype.is_float();
    let dir = if descending { CompareDir::Gt } else { CompareDir::Lt };
    let plain = b.compare(l, r, dir)?;
    if !float {
        return Ok(plain);
    }
    let l_nan = b.compare(l, l, CompareDir::Ne)?;
    let r_nan = b.compare(r, r, CompareDir::Ne)?;
    // Ascending: a non-NaN precedes a NaN. Descending: a NaN precedes a non-NaN.
    let (first_nan, second_nan) = if descending { (l_nan, r_nan) } else { (r_nan, l_nan) };
    let not_second = b.not(second_nan)?;
    let nan_order = b.and(first_nan, not_second)?;
    Ok(b.or(plain, nan_order)?)
}

/// Stable sort of `x` along `dim` → (values, i64 indices).
fn sort_dim(lx: &mut Lower, x: Value, dim: usize, descending: bool) -> Result<(Value, Value)> {
    let shape = lx.shape(x);
    let idx = lx.b.iota(DType::I64, &shape, dim as i64)?;
    if shape[dim] <= 1 {
        return Ok((x, idx));
    }
    let out = lx.b.sort(&[x, idx], dim as i64, true, |b, a| before(b, a[0], a[1], descending))?;
    Ok((out[0], out[1]))
}

/// `x` with `dim` moved last and the other dims flattened: ([B, n], the
/// shape without `dim`). A 0-d `x` becomes [1, 1].
fn rows(lx: &mut Lower, x: Value, dim: usize) -> Result<(Value, Vec<i64>)> {
    let shape = lx.shape(x);
    if shape.is_empty() {
        return Ok((lx.b.reshape(x, &[1, 1])?, vec![]));
    }
    let r = shape.len();
    let mut perm: Vec<i64> = (0..r as i64).filter(|&d| d != dim as i64).collect();
    perm.push(dim as i64);
    let t = if dim + 1 == r { x } else { lx.b.transpose(x, &perm)? };
    let outer: Vec<i64> = (0..r).filter(|&d| d != dim).map(|d| shape[d]).collect();
    let bsz = outer.iter().product::<i64>();
    Ok((lx.b.reshape(t, &[bsz, shape[dim]])?, outer))
}

/// A [B] value back to the reduced shape (with a 1 at `dim` for keepdim).
fn unrow(lx: &mut Lower, v: Value, outer: &[i64], dim: usize, keepdim: bool, rank: usize) -> Result<Value> {
    let mut shape = outer.to_vec();
    if keepdim && rank > 0 {
        shape.insert(dim, 1);
    }
    Ok(lx.b.reshape(v, &shape)?)
}

/// `m[b, pos[b]]` for an [B, n] `m` and a [B] i64 `pos`.
fn take_rows(lx: &mut Lower, m: Value, pos: Value) -> Result<Value> {
    let s = lx.shape(m);
    let (bsz, n) = (s[0], s[1]);
    let flat = lx.b.reshape(m, &[bsz * n])?;
    let base = lx.b.iota(DType::I64, &[bsz], 0)?;
    let nn = lx.b.splat_i64(DType::I64, n, &[bsz])?;
    let base = lx.b.mul(base, nn)?;
    let idx = lx.b.add(base, pos)?;
    let idx = lx.b.reshape(idx, &[bsz, 1])?;
    let dims = GatherDims::points_1d();
    Ok(lx.b.gather(flat, idx, &dims, &[1], false)?)
}

fn col(lx: &mut Lower, m: Value, j: i64) -> Result<Value> {
    let s = lx.shape(m);
    let c = lx.b.slice(m, &[0, j], &[s[0], j + 1], &[1, 1])?;
    Ok(lx.b.reshape(c, &[s[0]])?)
}

fn rank_dim(lx: &Lower, args: &Args, pos: usize, default: i64) -> Result<(usize, usize)> {
    let t = args.tensor(0)?;
    let dim = norm_dim(lx.op, args.int_or(pos, default)?, t.shape.len())?;
    Ok((t.shape.len(), dim))
}

/// sort / sort.stable / sort.values / sort.values_stable.
fn sort(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    // The .stable overloads have `bool? stable` before dim.
    let off = usize::from(lx.op.contains("stable"));
    let (rank, dim) = rank_dim(lx, args, 1 + off, -1)?;
    let descending = args.bool_or(2 + off, false)?;
    if rank == 0 {
        let idx = lx.b.splat_i64(DType::I64, 0, &[])?;
        return Ok(vec![t.value, idx]);
    }
    let (v, i) = sort_dim(lx, t.value, dim, descending)?;
    Ok(vec![v, i])
}

fn argsort(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    Ok(vec![sort(lx, args)?[1]])
}

fn msort(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    if t.shape.is_empty() {
        return Ok(vec![t.value]);
    }
    Ok(vec![sort_dim(lx, t.value, 0, false)?.0])
}

/// topk(self, k, dim=-1, largest=True, sorted=True).
fn topk(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let k = args.int(1)?;
    let (rank, dim) = rank_dim(lx, args, 2, -1)?;
    let largest = args.bool_or(3, true)?;
    let n = if rank == 0 { 1 } else { t.shape[dim] };
    if k < 0 || k > n {
        bail!(Runtime, "{}: selected index k out of range", lx.op);
    }
    if rank == 0 {
        let idx = lx.b.splat_i64(DType::I64, 0, &[])?;
        return Ok(vec![t.value, idx]);
    }
    let (v, i) = sort_dim(lx, t.value, dim, largest)?;
    let mut limit = t.shape.clone();
    limit[dim] = k;
    let zeros = vec![0; rank];
    let ones = vec![1; rank];
    Ok(vec![lx.b.slice(v, &zeros, &limit, &ones)?, lx.b.slice(i, &zeros, &limit, &ones)?])
}

/// kthvalue(self, k, dim=-1, keepdim=False): the k-th smallest (1-based).
fn kthvalue(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let k = args.int(1)?;
    let (rank, dim) = rank_dim(lx, args, 2, -1)?;
    let keepdim = args.bool_or(3, false)?;
    let n = if rank == 0 { 1 } else { t.shape[dim] };
    if k < 1 || k > n {
        bail!(Runtime, "{}: kthvalue(): selected number k out of range for dimension {dim}", lx.op);
    }
    let (m, outer) = rows(lx, t.value, dim)?;
    let (v, i) = sort_dim(lx, m, 1, false)?;
    let v = col(lx, v, k - 1)?;
    let i = col(lx, i, k - 1)?;
    Ok(vec![unrow(lx, v, &outer, dim, keepdim, rank)?, unrow(lx, i, &outer, dim, keepdim, rank)?])
}

/// median / nanmedian: full (values only) or .dim (values, indices).
/// median returns the first NaN of a row if any; nanmedian the lower
/// median of the non-NaN values (NaN if all are NaN).
fn median(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let nan_skip = lx.op.contains("nanmedian");
    let full = matches!(args.get(1), crate::args::Arg::None);
    let rank = t.shape.len();
    let (m, outer, dim, keepdim) = if full {
        let n = t.shape.iter().product::<i64>();
        if n == 0 {
            // CPU: NaN for floats, the lowest value for integers.
            let v = if t.dtype.is_float() {
                lx.b.constant_f64(t.dtype, f64::NAN)
            } else {
                lx.b.constant_i64(t.dtype, int_range(t.dtype).0)
            };
            return Ok(vec![v]);
        }
        (lx.b.reshape(t.value, &[1, n])?, vec![], 0, false)
    } else {
        let dim = norm_dim(lx.op, args.int(1)?, rank)?;
        let keepdim = args.bool_or(2, false)?;
        let (m, outer) = rows(lx, t.value, dim)?;
        (m, outer, dim, keepdim)
    };
    let s = lx.shape(m);
    let (bsz, n) = (s[0], s[1]);
    let (v, i) = sort_dim(lx, m, 1, false)?;
    let (rv, ri) = if t.dtype.is_float() {
        let isnan = lx.b.compare(m, m, CompareDir::Ne)?;
        let cnt = lx.cast(isnan, DType::I64)?;
        let nans = lx.b.reduce_sum(cnt, &[1])?;
        let nn = lx.b.splat_i64(DType::I64, n, &[bsz])?;
        let valid = lx.b.sub(nn, nans)?;
        let pos = if nan_skip {
            // (valid - 1) / 2, truncating: 0 when all are NaN.
            let one = lx.b.splat_i64(DType::I64, 1, &[bsz])?;
            let two = lx.b.splat_i64(DType::I64, 2, &[bsz])?;
            let p = lx.b.sub(valid, one)?;
            lx.b.div(p, two)?
        } else {
            let zero = lx.b.splat_i64(DType::I64, 0, &[bsz])?;
            let any = lx.b.compare(nans, zero, CompareDir::Gt)?;
            let mid = lx.b.splat_i64(DType::I64, (n - 1) / 2, &[bsz])?;
            lx.b.select(any, valid, mid)?
        };
        (take_rows(lx, v, pos)?, take_rows(lx, i, pos)?)
    } else {
        (col(lx, v, (n - 1) / 2)?, col(lx, i, (n - 1) / 2)?)
    };
    if full {
        return Ok(vec![lx.b.reshape(rv, &[])?]);
    }
    Ok(vec![unrow(lx, rv, &outer, dim, keepdim, rank)?, unrow(lx, ri, &outer, dim, keepdim, rank)?])
}

/// Inclusive scan along dim 1 of [B, n] values with an associative `f`,
/// in log2(n) shifted steps; `ident` fills the shifted-in slots.
fn scan(
    lx: &mut Lower,
    xs: Vec<Value>,
    ident: &[Value],
    f: impl Fn(&mut Builder, &[Value], &[Value]) -> Result<Vec<Value>>,
) -> Result<Vec<Value>> {
    let s = lx.shape(xs[0]);
    let (bsz, n) = (s[0], s[1]);
    let mut acc = xs;
    let mut shift = 1;
    while shift < n {
        let mut prev = Vec::new();
        for (a, &id) in acc.iter().zip(ident) {
            let p = lx.b.pad(*a, id, &[0, shift], &[0, 0], &[0, 0])?;
            prev.push(lx.b.slice(p, &[0, 0], &[bsz, n], &[1, 1])?);
        }
        acc = f(lx.b, &prev, &acc)?;
        shift *= 2;
    }
    Ok(acc)
}

/// mode(self, dim=-1, keepdim=False): the most frequent value (smallest on
/// ties) and the index of its last occurrence.
fn mode(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let (rank, dim) = rank_dim(lx, args, 1, -1)?;
    let keepdim = args.bool_or(2, false)?;
    if rank > 0 && t.shape[dim] == 0 {
        crate::bail!(Index, "mode(): Expected reduction dim {dim} to have non-zero size.");
    }
    let (m, outer) = rows(lx, t.value, dim)?;
    let s = lx.shape(m);
    let (bsz, n) = (s[0], s[1]);
    let (v, i) = sort_dim(lx, m, 1, false)?;
    let pos = lx.b.iota(DType::I64, &[bsz, n], 1)?;
    // Run boundaries in the sorted rows.
    let (start, end) = if n > 1 {
        let a = lx.b.slice(v, &[0, 0], &[bsz, n - 1], &[1, 1])?;
        let c = lx.b.slice(v, &[0, 1], &[bsz, n], &[1, 1])?;
        let diff = lx.b.compare(a, c, CompareDir::Ne)?;
        let t1 = lx.b.constant_i64(DType::Bool, 1);
        let start = lx.b.pad(diff, t1, &[0, 1], &[0, 0], &[0, 0])?;
        let end = lx.b.pad(diff, t1, &[0, 0], &[0, 1], &[0, 0])?;
        (start, end)
    } else {
        let all = lx.b.splat_i64(DType::Bool, 1, &[bsz, n])?;
        (all, all)
    };
    let zero = lx.b.splat_i64(DType::I64, 0, &[bsz, n])?;
    let sp = lx.b.select(start, pos, zero)?;
    let z0 = lx.b.constant_i64(DType::I64, 0);
    let sp = scan(lx, vec![sp], &[z0], |b, p, c| Ok(vec![b.max(p[0], c[0])?]))?[0];
    let one = lx.b.splat_i64(DType::I64, 1, &[bsz, n])?;
    let freq = lx.b.sub(pos, sp)?;
    let freq = lx.b.add(freq, one)?;
    let freq = lx.b.select(end, freq, zero)?;
    let best = lx.b.reduce_max(freq, &[1])?;
    let best = lx.b.broadcast_in_dim(best, &[bsz, n], &[0])?;
    let is_best = lx.b.compare(freq, best, CompareDir::Eq)?;
    let is_best = lx.b.and(is_best, end)?;
    let big = lx.b.splat_i64(DType::I64, n, &[bsz, n])?;
    let cand = lx.b.select(is_best, pos, big)?;
    let p = lx.b.reduce_min(cand, &[1])?;
    let rv = take_rows(lx, v, p)?;
    let ri = take_rows(lx, i, p)?;
    Ok(vec![unrow(lx, rv, &outer, dim, keepdim, rank)?, unrow(lx, ri, &outer, dim, keepdim, rank)?])
}

/// _cummax_helper / _cummin_helper(self, values, indices, dim) -> the new
/// (values, indices): running extreme, index of its latest occurrence
/// (NaN propagates; the index follows the latest NaN).
fn cumext(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    let is_max = lx.op.contains("cummax");
    let rank = t.shape.len();
    let dim = norm_dim(lx.op, args.int(3)?, rank)?;
    if rank == 0 || t.shape.iter().product::<i64>() == 0 {
        let i = lx.b.splat_i64(DType::I64, 0, &t.shape)?;
        return Ok(vec![t.value, i]);
    }
    let (m, _) = rows(lx, t.value, dim)?;
    let s = lx.shape(m);
    let pos = lx.b.iota(DType::I64, &s, 1)?;
    let float = t.dtype.is_float();
    let ident = if t.dtype == DType::Bool {
        lx.b.constant_i64(DType::Bool, i64::from(!is_max))
    } else if float {
        lx.b.constant_f64(t.dtype, if is_max { f64::NEG_INFINITY } else { f64::INFINITY })
    } else {
        let (lo, hi) = int_range(t.dtype);
        lx.b.constant_i64(t.dtype, if is_max { lo } else { hi })
    };
    let id_i = lx.b.constant_i64(DType::I64, -1);
    let dir = if is_max { CompareDir::Ge } else { CompareDir::Le };
    let out = scan(lx, vec![m, pos], &[ident, id_i], |b, p, c| {
        // As CPU: the later element c wins if it is NaN, or if p is not
        // NaN and c >= p (<= for cummin).
        let wins = b.compare(c[0], p[0], dir)?;
        let take = if float {
            let pn = b.compare(p[0], p[0], CompareDir::Ne)?;
            let cn = b.compare(c[0], c[0], CompareDir::Ne)?;
            let npn = b.not(pn)?;
            let w = b.and(wins, npn)?;
            b.or(w, cn)?
        } else {
            wins
        };
        Ok(vec![b.select(take, c[0], p[0])?, b.select(take, c[1], p[1])?])
    })?;
    // Back from rows: [B, n] → shape with dim last → original order.
    let mut last: Vec<i64> = (0..rank).filter(|&d| d != dim).map(|d| t.shape[d]).collect();
    last.push(t.shape[dim]);
    let mut inv = vec![0i64; rank];
    let mut perm: Vec<usize> = (0..rank).filter(|&d| d != dim).collect();
    perm.push(dim);
    for (k, &d) in perm.iter().enumerate() {
        inv[d] = k as i64;
    }
    let mut res = Vec::new();
    for v in out {
        let v = lx.b.reshape(v, &last)?;
        res.push(if dim + 1 == rank { v } else { lx.b.transpose(v, &inv)? });
    }
    Ok(res)
}

fn int_range(d: DType) -> (i64, i64) {
    match d {
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::U8 => (0, 255),
        _ => (i64::MIN, i64::MAX),
    }
}
