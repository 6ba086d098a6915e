//! Sliding blocks: `im2col` (nn.functional.unfold) and `col2im`
//! (nn.functional.fold).
//!
//! im2col pads the image and takes one strided slice per kernel offset
//! (ki, kj), stacking them as channel rows `c*kh*kw + ki*kw + kj`. col2im
//! is its adjoint: each offset's block is placed back with an interior-padded
//! `pad` (stride - 1 between elements, the offset as low padding) and the
//! blocks are summed.
use stablehlo::Value;

use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::ops::reduce::acc;

type R = Result<Vec<Value>>;

/// (kernel, dilation, padding, stride), each [h, w], from args `at..at+4`.
fn geometry(lx: &Lower, args: &Args, at: usize) -> Result<[[i64; 2]; 4]> {
    let mut g = [[0; 2]; 4];
    for (k, slot) in g.iter_mut().enumerate() {
        let v = args.ints(at + k)?;
        *slot = match v.as_slice() {
            [a] => [*a, *a],
            [a, b] => [*a, *b],
            _ => bail!(Runtime, "{}: expected 2 values per window parameter, got {v:?}", lx.op),
        };
    }
    let [k, d, p, s] = g;
    if k[0] <= 0 || k[1] <= 0 {
        bail!(Runtime, "{}: kernel size should be greater than zero, but got kernel_height: {} kernel_width: {}", lx.op, k[0], k[1]);
    }
    if s[0] <= 0 || s[1] <= 0 {
        bail!(Runtime, "{}: stride should be greater than zero, but got stride_height: {} stride_width: {}", lx.op, s[0], s[1]);
    }
    if d[0] <= 0 || d[1] <= 0 {
        bail!(Runtime, "{}: dilation should be greater than zero, but got dilation_height: {} dilation_width: {}", lx.op, d[0], d[1]);
    }
    if p[0] < 0 || p[1] < 0 {
        bail!(Runtime, "{}: padding should be non-negative, but got pad_height: {} pad_width: {}", lx.op, p[0], p[1]);
    }
    Ok(g)
}

/// CPU's im2col/col2im take floats and bool, not integers.
fn int_check(lx: &Lower, kernel: &str, d: stablehlo::DType) -> Result<()> {
    if d.is_integer() && !d.is_bool() {
        bail!(NotImplemented, "{}: \"{kernel}\" not implemented for '{}'", lx.op, super::tname(d));
    }
    Ok(())
}

/// Number of blocks along one dim.
fn blocks(size: i64, k: i64, d: i64, p: i64, s: i64) -> i64 {
    let span = size + 2 * p - (d * (k - 1) + 1);
    if span < 0 {
        0
    } else {
        span / s + 1
    }
}

/// im2col(self [N?, C, H, W], kernel_size, dilation, padding, stride)
/// -> [N?, C*kh*kw, L]
pub(super) fn im2col(lx: &mut Lower, args: &Args) -> R {
    let x = args.tensor(0)?.clone();
    let [k, d, p, s] = geometry(lx, args, 1)?;
    let rank = x.shape.len();
    if !(rank == 3 || rank == 4) || x.shape[rank - 3..].contains(&0) {
        bail!(Runtime, "{}: Expected 3D or 4D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for input, but got: {:?}", lx.op, x.shape);
    }
    int_check(lx, "im2col_out_cpu", x.dtype)?;
    let batched = rank == 4;
    let shape4: Vec<i64> = if batched { x.shape.clone() } else { [&[1][..], &x.shape[..]].concat() };
    let (n, ch, h, w) = (shape4[0], shape4[1], shape4[2], shape4[3]);
    let (oh, ow) = (blocks(h, k[0], d[0], p[0], s[0]), blocks(w, k[1], d[1], p[1], s[1]));
    if oh < 1 || ow < 1 {
        bail!(Runtime, "{}: Given input with spatial size ({h}, {w}), kernel_size=({}, {}), dilation=({}, {}), padding=({}, {}), calculated shape of the array of sliding blocks as ({oh}, {ow}), but its components must be at least one.", lx.op, k[0], k[1], d[0], d[1], p[0], p[1]);
    }
    let xv = lx.b.reshape(x.value, &shape4)?;
    let zero = lx.b.constant_f64(x.dtype, 0.0);
    let xp = lx.b.pad(xv, zero, &[0, 0, p[0], p[1]], &[0, 0, p[0], p[1]], &[0, 0, 0, 0])?;
    let mut parts = Vec::with_capacity((k[0] * k[1]) as usize);
    for ki in 0..k[0] {
        for kj in 0..k[1] {
            let (y0, x0) = (ki * d[0], kj * d[1]);
            let sl = lx.b.slice(
                xp,
                &[0, 0, y0, x0],
                &[n, ch, y0 + (oh - 1) * s[0] + 1, x0 + (ow - 1) * s[1] + 1],
                &[1, 1, s[0], s[1]],
            )?;
            parts.push(lx.b.reshape(sl, &[n, ch, 1, oh * ow])?);
        }
    }
    let cat = if parts.len() == 1 { parts[0] } else { lx.b.concatenate(&parts, 2)? };
    let mut out = vec![n, ch * k[0] * k[1], oh * ow];
    if !batched {
        out.remove(0);
    }
    Ok(vec![lx.b.reshape(cat, &out)?])
}

/// col2im(self [N?, C*kh*kw, L], output_size, kernel_size, dilation,
/// padding, stride) -> [N?, C, H, W]
pub(super) fn col2im(lx: &mut Lower, args: &Args) -> R {
    let x = args.tensor(0)?.clone();
    let osz = args.ints(1)?;
    let (h, w) = match osz.as_slice() {
        [a] => (*a, *a),
        [a, b] => (*a, *b),
        _ => bail!(Runtime, "{}: It is expected output_size equals to 2, but got size {}", lx.op, osz.len()),
    };
    let [k, d, p, s] = geometry(lx, args, 2)?;
    let rank = x.shape.len();
    if !(rank == 2 || rank == 3) || x.shape[rank - 2..].contains(&0) {
        bail!(Runtime, "{}: Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for input, but got: {:?}", lx.op, x.shape);
    }
    if h <= 0 || w <= 0 {
        bail!(Runtime, "{}: Expected output spatial size to be positive, but got: output_size=({h}, {w}).", lx.op);
    }
    int_check(lx, "col2im_out_cpu", x.dtype)?;
    let batched = rank == 3;
    let shape3: Vec<i64> = if batched { x.shape.clone() } else { [&[1][..], &x.shape[..]].concat() };
    let (n, rows, l) = (shape3[0], shape3[1], shape3[2]);
    let kk = k[0] * k[1];
    if rows % kk != 0 {
        bail!(Runtime, "{}: Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)={rows} and kernel_size=({}, {}).", lx.op, k[0], k[1]);
    }
    let ch = rows / kk;
    let (oh, ow) = (blocks(h, k[0], d[0], p[0], s[0]), blocks(w, k[1], d[1], p[1], s[1]));
    if oh < 1 || ow < 1 {
        bail!(Runtime, "{}: Given output_size=({h}, {w}), kernel_size=({}, {}), dilation=({}, {}), padding=({}, {}), stride=({}, {}), calculated shape of the array of sliding blocks as ({oh}, {ow}), which is too small (non-positive)", lx.op, k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]);
    }
    if oh * ow != l {
        bail!(Runtime, "{}: Given output_size=({h}, {w}), kernel_size=({}, {}), dilation=({}, {}), padding=({}, {}), stride=({}, {}), expected size of input's dimension 2 to match the calculated number of sliding blocks {oh} * {ow} = {}, but got input.size(2)={l}.", lx.op, k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1], oh * ow);
    }
    let ct = acc(x.dtype);
    let xv = lx.cast(x.value, ct)?;
    let xv = lx.b.reshape(xv, &[n, ch, kk, oh, ow])?;
    let (hp, wp) = (h + 2 * p[0], w + 2 * p[1]);
    let zero = lx.b.constant_f64(ct, 0.0);
    let mut acc: Option<Value> = None;
    for ki in 0..k[0] {
        for kj in 0..k[1] {
            let idx = ki * k[1] + kj;
            let blk = lx.b.slice(xv, &[0, 0, idx, 0, 0], &[n, ch, idx + 1, oh, ow], &[])?;
            let blk = lx.b.reshape(blk, &[n, ch, oh, ow])?;
            let (y0, x0) = (ki * d[0], kj * d[1]);
            let (yh, xh) = (hp - (y0 + (oh - 1) * s[0] + 1), wp - (x0 + (ow - 1) * s[1] + 1));
            let placed = lx.b.pad(blk, zero, &[0, 0, y0, x0], &[0, 0, yh, xh], &[0, 0, s[0] - 1, s[1] - 1])?;
            acc = Some(match acc {
                None => placed,
                Some(a) => lx.b.add(a, placed)?,
            });
        }
    }
    let acc = acc.expect("kernel has at least one element");
    let out = lx.b.slice(acc, &[0, 0, p[0], p[1]], &[n, ch, p[0] + h, p[1] + w], &[])?;
    let out = lx.cast(out, x.dtype)?;
    let mut shape = vec![n, ch, h, w];
    if !batched {
        shape.remove(0);
    }
    Ok(vec![lx.b.reshape(out, &shape)?])
}
