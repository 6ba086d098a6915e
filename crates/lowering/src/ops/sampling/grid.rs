//! `grid_sampler_2d/3d(input, grid, interpolation_mode, padding_mode,
//! align_corners)` and their backwards, for 2 or 3 spatial dims.
//!
//! Modes: interpolation 0 bilinear, 1 nearest, 2 bicubic (2d only); padding
//! 0 zeros, 1 border, 2 reflection. Coordinates (`coords`) follow ATen's CPU
//! kernels step by step. Each spatial dim gets 1-D taps (integral position,
//! weight, d weight / d coordinate); every combination of taps is one gather
//! of `[N, K, C]` rows from the input laid out as `[N*S, C]` (K output
//! points, S input points), masked where the tap lies outside the input, and
//! the contributions add up in CPU's order (bicubic: rows along x, then
//! along y). 16-bit floats compute in f32 rounded to the input type after
//! every operation, which is what the CPU kernels do, so results agree
//! bit for bit. The backward scatter-adds all taps into the input at once
//! and sums the weight derivatives into the grid gradient.
use stablehlo::{DType, Value};

use super::{add_rows, c, compute_type, take_rows, tname};
use crate::args::{Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

type R = Result<Vec<Value>>;

mod coords;

use coords::{taps, Geo, Tap, BICUBIC, BILINEAR, BORDER, NEAREST, REFLECTION, ZEROS};

fn geo(lx: &Lower, input: &TensorArg, grid: &TensorArg, args: &Args, at: usize) -> Result<Geo> {
    let k = if lx.op.contains("3d") { 3 } else { 2 };
    let (interp, pad, align) = (args.int(at)?, args.int(at + 1)?, args.bool_or(at + 2, false)?);
    let (is, gs) = (&input.shape, &grid.shape);
    if is.len() != k + 2 || gs.len() != k + 2 {
        bail!(Runtime, "{}: grid_sampler(): expected {}D input and grid with same number of dimensions, but got input with sizes {is:?} and grid with sizes {gs:?}", lx.op, k + 2);
    }
    if input.dtype != grid.dtype {
        bail!(Runtime, "{}: grid_sampler(): expected input and grid to have same dtype, but input has {} and grid has {}", lx.op, tname(input.dtype), tname(grid.dtype));
    }
    if !input.dtype.is_float() {
        bail!(NotImplemented, "{}: \"grid_sampler\" not implemented for '{}'", lx.op, tname(input.dtype));
    }
    if is[0] != gs[0] {
        bail!(Runtime, "{}: grid_sampler(): expected grid and input to have same batch size, but got input with sizes {is:?} and grid with sizes {gs:?}", lx.op);
    }
    if gs[k + 1] != k as i64 {
        bail!(Runtime, "{}: grid_sampler(): expected grid to have size {k} in last dimension, but got grid with sizes {gs:?}", lx.op);
    }
    if let Some(i) = (2..k + 2).find(|&i| is[i] <= 0) {
        bail!(Runtime, "{}: grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes {is:?} with dimension {i} being empty", lx.op);
    }
    if ![BILINEAR, NEAREST, BICUBIC].contains(&interp) || ![ZEROS, BORDER, REFLECTION].contains(&pad) {
        bail!(Runtime, "{}: grid_sampler(): unknown interpolation mode {interp} or padding mode {pad}", lx.op);
    }
    if interp == BICUBIC && k == 3 {
        bail!(NotImplemented, "{}: grid_sampler(): bicubic interpolation with 5D input is not supported", lx.op);
    }
    let out_sp = gs[1..k + 1].to_vec();
    Ok(Geo {
        k,
        n: is[0],
        ch: is[1],
        in_sp: is[2..].to_vec(),
        kout: out_sp.iter().product(),
        out_sp,
        dt: input.dtype,
        ct: compute_type(input.dtype),
        interp,
        pad,
        align,
    })
}

/// One combination of taps: (in-bounds mask, flat row index into [N*S, C]
/// given the batch rows `base`).
fn locate(lx: &mut Lower, base: Value, combo: &[Tap]) -> Result<(Value, Value)> {
    let (mut valid, mut lin) = (combo[0].ok, lx.b.add(base, combo[0].off)?);
    for t in &combo[1..] {
        valid = lx.b.and(valid, t.ok)?;
        lin = lx.b.add(lin, t.off)?;
    }
    Ok((valid, lin))
}

/// Every combination of one tap per dim (first dim outermost).
fn combos(t: &[Vec<Tap>]) -> Vec<Vec<Tap>> {
    let mut out: Vec<Vec<Tap>> = vec![vec![]];
    for list in t {
        out = out
            .into_iter()
            .flat_map(|pre| list.iter().map(move |x| [pre.clone(), vec![*x]].concat()))
            .collect();
    }
    out
}

/// input [N, C, sp..] → rows [N*S, C] in the compute type.
fn table(lx: &mut Lower, g: &Geo, input: Value) -> Result<Value> {
    let k = g.k as i64;
    let x = lx.cast(input, g.ct)?;
    let perm: Vec<i64> = std::iter::once(0).chain(2..k + 2).chain(std::iter::once(1)).collect();
    let x = lx.b.transpose(x, &perm)?;
    let sp: i64 = g.in_sp.iter().product();
    Ok(lx.b.reshape(x, &[g.n * sp, g.ch])?)
}

fn grid_rows(lx: &mut Lower, g: &Geo, grid: Value) -> Result<Value> {
    let v = lx.cast(grid, g.ct)?;
    Ok(lx.b.reshape(v, &[g.n, g.kout, g.k as i64])?)
}

/// `v` [N, K] broadcast over channels to [N, K, C].
fn over_c(lx: &mut Lower, g: &Geo, v: Value) -> Result<Value> {
    Ok(lx.b.broadcast_in_dim(v, &[g.n, g.kout, g.ch], &[0, 1])?)
}

/// Product of the weights of one tap combination: `(y * x)` in 2d,
/// `(x * y) * z` in 3d (CPU's association), rounded like the input type.
fn weight(lx: &mut Lower, g: &Geo, combo: &[Tap]) -> Result<Value> {
    let mut ws: Vec<Value> = combo.iter().map(|t| t.w).collect();
    if g.k == 3 {
        ws.reverse();
    }
    let mut p = ws[0];
    for &v in &ws[1..] {
        p = g.mul(lx, p, v)?;
    }
    Ok(p)
}

/// Plain product (gradient terms, computed in the compute type).
fn product(lx: &mut Lower, vs: &[Value]) -> Result<Value> {
    let mut p = vs[0];
    for &v in &vs[1..] {
        p = lx.b.mul(p, v)?;
    }
    Ok(p)
}

/// Where each combination of taps reads: (in-bounds mask [N, K], flat row
/// [N, K]) and, with `fetch`, the rows themselves ([N, K, C], one gather
/// for all combinations).
fn locate_all(lx: &mut Lower, g: &Geo, tab: Value, cs: &[Vec<Tap>], fetch: bool) -> Result<Vec<(Value, Value, Option<Value>)>> {
    let sp: i64 = g.in_sp.iter().product();
    let nb = lx.b.iota(DType::I64, &[g.n, g.kout], 0)?;
    let spv = lx.b.splat_i64(DType::I64, sp, &[g.n, g.kout])?;
    let base = lx.b.mul(nb, spv)?;
    let mut locs = Vec::with_capacity(cs.len());
    for combo in cs {
        locs.push(locate(lx, base, combo)?);
    }
    if !fetch {
        return Ok(locs.into_iter().map(|(v, l)| (v, l, None)).collect());
    }
    let lins: Vec<Value> = locs.iter().map(|l| l.1).collect();
    let all = if lins.len() == 1 { lins[0] } else { lx.b.concatenate(&lins, 1)? };
    let vals = take_rows(lx, tab, all)?;
    let (n, kout, ch) = (g.n, g.kout, g.ch);
    let mut out = Vec::with_capacity(locs.len());
    for (i, (valid, lin)) in locs.into_iter().enumerate() {
        let i = i as i64;
        let v = if cs.len() == 1 { vals } else { lx.b.slice(vals, &[0, i * kout, 0], &[n, (i + 1) * kout, ch], &[])? };
        out.push((valid, lin, Some(v)));
    }
    Ok(out)
}

/// The weighted contribution of one combination's values: masked to zero
/// outside then weighted (the 2d kernel), or weighted then skipped outside
/// (the 3d kernel).
fn contribution(lx: &mut Lower, g: &Geo, valid: Value, vals: Value, w: Value) -> Result<Value> {
    let vb = over_c(lx, g, valid)?;
    let wb = over_c(lx, g, w)?;
    let z = c(lx, vals, 0.0)?;
    if g.k == 2 {
        let v = lx.b.select(vb, vals, z)?;
        g.mul(lx, v, wb)
    } else {
        let v = g.mul(lx, vals, wb)?;
        Ok(lx.b.select(vb, v, z)?)
    }
}

fn accumulate(lx: &mut Lower, g: &Geo, acc: Option<Value>, v: Value) -> Result<Option<Value>> {
    Ok(Some(match acc {
        None => v,
        Some(a) => g.add(lx, a, v)?,
    }))
}

/// grid_sampler_2d/3d(input, grid, interpolation_mode, padding_mode, align_corners)
pub(super) fn grid_sampler(lx: &mut Lower, args: &Args) -> R {
    let input = args.tensor(0)?.clone();
    let grid = args.tensor(1)?.clone();
    let g = geo(lx, &input, &grid, args, 2)?;
    let mut out_shape = vec![g.n, g.ch];
    out_shape.extend(&g.out_sp);
    if g.n * g.ch * g.kout == 0 {
        let z = lx.full(input.dtype, 0.0, &out_shape)?;
        return Ok(vec![z]);
    }
    let tab = table(lx, &g, input.value)?;
    let gr = grid_rows(lx, &g, grid.value)?;
    let (t, _) = taps(lx, &g, gr)?;
    let cs = combos(&t);
    let locs = locate_all(lx, &g, tab, &cs, true)?;
    let mut acc: Option<Value> = None;
    if g.interp == BICUBIC {
        // Separable, as on CPU: each row along x, then the rows along y
        // (combinations run y-major).
        for (i, ty) in t[0].iter().enumerate() {
            let mut row: Option<Value> = None;
            for (j, tx) in t[1].iter().enumerate() {
                let (valid, _, vals) = locs[i * t[1].len() + j];
                let v = contribution(lx, &g, valid, vals.expect("fetched"), tx.w)?;
                row = accumulate(lx, &g, row, v)?;
            }
            let wy = over_c(lx, &g, ty.w)?;
            let v = g.mul(lx, row.expect("4 taps"), wy)?;
            acc = accumulate(lx, &g, acc, v)?;
        }
    } else {
        for (combo, (valid, _, vals)) in cs.iter().zip(locs) {
            let w = weight(lx, &g, combo)?;
            let v = contribution(lx, &g, valid, vals.expect("fetched"), w)?;
            acc = accumulate(lx, &g, acc, v)?;
        }
    }
    let out = acc.expect("at least one tap");
    let out = lx.b.transpose(out, &[0, 2, 1])?;
    let out = lx.b.reshape(out, &out_shape)?;
    Ok(vec![lx.cast(out, input.dtype)?])
}

/// grid_sampler_2d/3d_backward(grad_output, input, grid, interpolation_mode,
/// padding_mode, align_corners, output_mask) -> (grad_input, grad_grid)
pub(super) fn grid_sampler_backward(lx: &mut Lower, args: &Args) -> R {
    let go = args.tensor(0)?.clone();
    let input = args.tensor(1)?.clone();
    let grid = args.tensor(2)?.clone();
    let g = geo(lx, &input, &grid, args, 3)?;
    let mut out_shape = vec![g.n, g.ch];
    out_shape.extend(&g.out_sp);
    if go.shape != out_shape {
        bail!(Value, "{}: grid_sampler(): expected grad_output to have sizes {out_shape:?}, but got grad_output with sizes {:?}", lx.op, go.shape);
    }
    if g.n * g.ch * g.kout == 0 {
        let gi = lx.full(input.dtype, 0.0, &input.shape)?;
        let gg = lx.full(grid.dtype, 0.0, &grid.shape)?;
        return Ok(vec![gi, gg]);
    }
    let (n, kout, ch) = (g.n, g.kout, g.ch);
    let tab = table(lx, &g, input.value)?;
    let gr = grid_rows(lx, &g, grid.value)?;
    let gov = lx.cast(go.value, g.ct)?;
    let gov = lx.b.reshape(gov, &[n, ch, kout])?;
    let gov = lx.b.transpose(gov, &[0, 2, 1])?;
    let (t, mults) = taps(lx, &g, gr)?;
    let want_grid = g.interp != NEAREST;
    let mut idxs = Vec::new();
    let mut upds = Vec::new();
    let mut gc: Vec<Option<Value>> = vec![None; g.k];
    let cs = combos(&t);
    let locs = locate_all(lx, &g, tab, &cs, want_grid)?;
    for (combo, (valid, lin, vals)) in cs.iter().zip(locs) {
        let vb = over_c(lx, &g, valid)?;
        let w = weight(lx, &g, combo)?;
        let wb = over_c(lx, &g, w)?;
        let u = lx.b.mul(gov, wb)?;
        let z = c(lx, u, 0.0)?;
        upds.push(lx.b.select(vb, u, z)?);
        idxs.push(lin);
        if let Some(vals) = vals {
            let vg = lx.b.mul(vals, gov)?;
            let vg = lx.b.select(vb, vg, z)?;
            let s = lx.b.reduce_sum(vg, &[2])?;
            for d in 0..g.k {
                let mut fs = vec![s, combo[d].dw];
                fs.extend((0..g.k).filter(|&e| e != d).map(|e| combo[e].w));
                let term = product(lx, &fs)?;
                gc[d] = Some(match gc[d] {
                    None => term,
                    Some(a) => lx.b.add(a, term)?,
                });
            }
        }
    }
    let sp: i64 = g.in_sp.iter().product();
    let idx = lx.b.concatenate(&idxs, 1)?;
    let upd = lx.b.concatenate(&upds, 1)?;
    let zeros = lx.full(g.ct, 0.0, &[n * sp, ch])?;
    let gi = add_rows(lx, zeros, idx, upd)?;
    let mut sh = vec![n];
    sh.extend(&g.in_sp);
    sh.push(ch);
    let gi = lx.b.reshape(gi, &sh)?;
    let k = g.k as i64;
    let perm: Vec<i64> = std::iter::once(0).chain(std::iter::once(k + 1)).chain(1..k + 1).collect();
    let gi = lx.b.transpose(gi, &perm)?;
    let gi = lx.cast(gi, input.dtype)?;
    let gg = if want_grid {
        let mut comps = Vec::new();
        for j in 0..g.k {
            let d = g.k - 1 - j;
            let v = gc[d].expect("grid gradient term");
            let v = lx.b.mul(v, mults[d])?;
            comps.push(lx.b.reshape(v, &[n, kout, 1])?);
        }
        let v = lx.b.concatenate(&comps, 2)?;
        let v = lx.b.reshape(v, &grid.shape)?;
        lx.cast(v, grid.dtype)?
    } else {
        lx.full(grid.dtype, 0.0, &grid.shape)?
    };
    Ok(vec![gi, gg])
}
