//! Convolution: `convolution_overrideable` (what `aten::convolution` calls on
//! PrivateUse1; 1d/2d/3d, stride, padding, dilation, groups, transposed with
//! output_padding) and `convolution_backward_overrideable`, all with
//! `stablehlo.convolution`.
//!
//! - transposed conv = conv of the input dilated by `stride`, padded by
//!   `dilation*(k-1) - padding` (+ output_padding high), with the kernel
//!   flipped and its in/out channels swapped within each group;
//! - grad_input of a conv is such a transposed conv of grad_output (sized to
//!   the input), and grad_input of a transposed conv is a plain conv;
//! - grad_weight is a conv of input (batch and feature roles swapped) with
//!   grad_output as the kernel, `batch_group_count = groups`.
//!
//! Half-precision inputs compute in float32 and round once at the end.
use stablehlo::{ConvDims, ConvWindow, DType, Value};

use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::dtypes;
use crate::error::Result;
use crate::op;
use crate::ops::reduce::acc;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[
    op!("convolution_overrideable", convolution),
    op!("convolution_backward_overrideable", convolution_backward),
];

/// The static parameters of one convolution, each with one entry per spatial dim.
struct Params {
    stride: Vec<i64>,
    padding: Vec<i64>,
    dilation: Vec<i64>,
    transposed: bool,
    output_padding: Vec<i64>,
    groups: i64,
}

/// Reads (stride, padding, dilation, transposed, output_padding, groups) from
/// `args[first..]`, expanding 1-entry lists to `n` spatial dims.
fn params(lx: &Lower, args: &Args, first: usize, n: usize) -> Result<Params> {
    let expand = |v: Vec<i64>, what: &str| -> Result<Vec<i64>> {
        match v.len() {
            l if l == n => Ok(v),
            1 => Ok(vec![v[0]; n]),
            _ => bail!(Runtime, "{}: expected {what} to have {n} entries, got {v:?}", lx.op),
        }
    };
    let p = Params {
        stride: expand(args.ints(first)?, "stride")?,
        padding: expand(args.ints(first + 1)?, "padding")?,
        dilation: expand(args.ints(first + 2)?, "dilation")?,
        transposed: args.bool_or(first + 3, false)?,
        output_padding: expand(args.ints(first + 4)?, "output_padding")?,
        groups: args.int(first + 5)?,
    };
    if p.groups <= 0 || p.stride.iter().any(|&s| s <= 0) || p.dilation.iter().any(|&d| d <= 0) {
        bail!(Runtime, "{}: non-positive stride, dilation or groups is not supported", lx.op);
    }
    if p.padding.iter().any(|&x| x < 0) {
        bail!(Runtime, "{}: negative padding is not supported", lx.op);
    }
    if p.transposed && (0..n).any(|i| p.output_padding[i] >= p.stride[i] && p.output_padding[i] >= p.dilation[i]) {
        bail!(Runtime, "{}: {}", lx.op, output_padding_message(&p));
    }
    Ok(p)
}

/// The CPU's message for an output padding that is not smaller than the
/// stride or the dilation (which would add positions no input reaches).
/// Its 1-d convolutions run as 2-d ones of height 1, and it names them so.
fn output_padding_message(p: &Params) -> String {
    let n = p.stride.len();
    let (mut op, mut stride, mut dil) = (p.output_padding.clone(), p.stride.clone(), p.dilation.clone());
    if n == 1 {
        op.insert(0, 0);
        stride.insert(0, 1);
        dil.insert(0, 1);
    }
    let names = &["depth", "height", "width"][3 - op.len()..];
    let list = |what: &str, v: &[i64]| -> String {
        names.iter().zip(v).map(|(d, x)| format!("{what}_{d}: {x}")).collect::<Vec<_>>().join(" ")
    };
    format!(
        "output padding must be smaller than either stride or dilation, but got {} {} {}",
        list("output_padding", &op),
        list("stride", &stride),
        list("dilation", &dil)
    )
}

fn check_dtype(lx: &Lower, d: DType) -> Result<()> {
    if d == DType::Bool {
        bail!(NotImplemented, "{}: not implemented for '{}'", lx.op, dtypes::name(d));
    }
    Ok(())
}

/// Plain convolution `[N, C, *] x [O, C/g, *] -> [N, O, *]`.
fn conv(lx: &mut Lower, x: Value, w: Value, stride: &[i64], pad: &[(i64, i64)], dil: &[i64], groups: i64) -> Result<Value> {
    let n = lx.shape(x).len() - 2;
    let win = ConvWindow {
        strides: stride.to_vec(),
        padding: pad.to_vec(),
        rhs_dilation: dil.to_vec(),
        feature_group_count: groups,
        ..Default::default()
    };
    Ok(lx.b.convolution(x, w, &ConvDims::nchw(n), &win)?)
}

/// Transposed convolution of `x` `[N, Cin, *]` with `w` `[Cin, Cout/g, *]`:
/// `x` dilated by `stride`, padded by `pad` (already `dil*(k-1) - padding` form).
fn conv_t(lx: &mut Lower, x: Value, w: Value, stride: &[i64], pad: &[(i64, i64)], dil: &[i64], g: i64) -> Result<Value> {
    let ws = lx.shape(w);
    let n = ws.len() - 2;
    let (cin, cout_g) = (ws[0], ws[1]);
    // [Cin, Cout/g, k] -> [g, Cin/g, Cout/g, k] -> [g, Cout/g, Cin/g, k] -> [Cout, Cin/g, k]
    let mut split = vec![g, cin / g, cout_g];
    split.extend(&ws[2..]);
    let w = lx.b.reshape(w, &split)?;
    let mut perm = vec![0, 2, 1];
    perm.extend(3..3 + n as i64);
    let w = lx.b.transpose(w, &perm)?;
    let mut merged = vec![g * cout_g, cin / g];
    merged.extend(&ws[2..]);
    let w = lx.b.reshape(w, &merged)?;
    let spatial: Vec<i64> = (2..2 + n as i64).collect();
    let w = lx.b.reverse(w, &spatial)?;
    let win = ConvWindow {
        padding: pad.to_vec(),
        lhs_dilation: stride.to_vec(),
        rhs_dilation: dil.to_vec(),
        feature_group_count: g,
        ..Default::default()
    };
    Ok(lx.b.convolution(x, w, &ConvDims::nchw(n), &win)?)
}

/// Gradient of `conv(x, w)` w.r.t. `w` `[O, C/g, k]` given `gy` `[N, O, *]`.
fn conv_grad_weight(lx: &mut Lower, x: Value, gy: Value, k: &[i64], p: &Params) -> Result<Value> {
    let (xs, gs) = (lx.shape(x), lx.shape(gy));
    let n = xs.len() - 2;
    let s: Vec<i64> = (2..2 + n as i64).collect();
    let dims = ConvDims {
        lhs_batch: 1,
        lhs_feature: 0,
        lhs_spatial: s.clone(),
        rhs_out_feature: 1,
        rhs_in_feature: 0,
        rhs_spatial: s.clone(),
        out_batch: 1,
        out_feature: 0,
        out_spatial: s,
    };
    let pad: Vec<(i64, i64)> = (0..n)
        .map(|i| {
            let hi = (k[i] - 1) * p.dilation[i] + (gs[2 + i] - 1) * p.stride[i] + 1 - xs[2 + i] - p.padding[i];
            (p.padding[i], hi)
        })
        .collect();
    let win = ConvWindow {
        strides: p.dilation.clone(),
        padding: pad,
        rhs_dilation: p.stride.clone(),
        batch_group_count: p.groups,
        ..Default::default()
    };
    Ok(lx.b.convolution(x, gy, &dims, &win)?)
}

/// Padding of the transposed conv that maps `[.., in]` to `[.., out]`.
fn t_pad(k: &[i64], inp: &[i64], out: &[i64], p: &Params) -> Vec<(i64, i64)> {
    (0..k.len())
        .map(|i| {
            let lo = p.dilation[i] * (k[i] - 1) - p.padding[i];
            let hi = out[i] - (inp[i] - 1) * p.stride[i] - 1 - lo + p.dilation[i] * (k[i] - 1);
            (lo, hi)
        })
        .collect()
}

fn sym(pad: &[i64]) -> Vec<(i64, i64)> {
    pad.iter().map(|&p| (p, p)).collect()
}

/// convolution_overrideable(input, weight, bias?, stride, padding, dilation,
/// transposed, output_padding, groups)
fn convolution(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let (x, w) = (args.tensor(0)?.clone(), args.tensor(1)?.clone());
    check_dtype(lx, x.dtype)?;
    if x.shape.len() < 3 || x.shape.len() != w.shape.len() {
        bail!(Runtime, "{}: expected input {:?} and weight {:?} of equal rank 3, 4 or 5", lx.op, x.shape, w.shape);
    }
    if x.dtype != w.dtype {
        bail!(Runtime, "{}: Input type ({}) and weight type ({}) should be the same", lx.op, dtypes::name(x.dtype), dtypes::name(w.dtype));
    }
    let n = x.shape.len() - 2;
    let p = params(lx, args, 3, n)?;
    let a = acc(x.dtype);
    let xv = lx.cast(x.value, a)?;
    let wv = lx.cast(w.value, a)?;
    let k = &w.shape[2..];
    let y = if p.transposed {
        let out: Vec<i64> = (0..n)
            .map(|i| (x.shape[2 + i] - 1) * p.stride[i] - 2 * p.padding[i] + p.dilation[i] * (k[i] - 1) + p.output_padding[i] + 1)
            .collect();
        let pad = t_pad(k, &x.shape[2..], &out, &p);
        conv_t(lx, xv, wv, &p.stride, &pad, &p.dilation, p.groups)?
    } else {
        conv(lx, xv, wv, &p.stride, &sym(&p.padding), &p.dilation, p.groups)?
    };
    let y = match args.opt_tensor(2) {
        Some(bias) => {
            let bv = lx.cast(bias.value, a)?;
            let ys = lx.shape(y);
            let bb = lx.b.broadcast_in_dim(bv, &ys, &[1])?;
            lx.b.add(y, bb)?
        }
        None => y,
    };
    Ok(vec![lx.cast(y, x.dtype)?])
}

/// Slices or zero-pads the spatial dims of `v` to `want` (high side).
fn fit(lx: &mut Lower, v: Value, want: &[i64]) -> Result<Value> {
    let s = lx.shape(v);
    if s == want {
        return Ok(v);
    }
    let zero = lx.b.constant_f64(lx.dtype(v), 0.0);
    let lo = vec![0; s.len()];
    let hi: Vec<i64> = s.iter().zip(want).map(|(a, b)| b - a).collect();
    Ok(lx.b.pad(v, zero, &lo, &hi, &lo)?)
}

/// convolution_backward_overrideable(grad_output, input, weight, stride,
/// padding, dilation, transposed, output_padding, groups, output_mask)
/// -> (grad_input, grad_weight, grad_bias)
fn convolution_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    lx.honor_output_mask(args, 9);
    let (gy, x, w) = (args.tensor(0)?.clone(), args.tensor(1)?.clone(), args.tensor(2)?.clone());
    check_dtype(lx, x.dtype)?;
    let n = x.shape.len() - 2;
    let p = params(lx, args, 3, n)?;
    let a = acc(x.dtype);
    let gv = lx.cast(gy.value, a)?;
    let xv = lx.cast(x.value, a)?;
    let wv = lx.cast(w.value, a)?;
    let k = w.shape[2..].to_vec();
    let (gx, gw) = if p.transposed {
        // y = conv_t(x, w)  <=>  <gy, conv_t(x, w)> = <conv(gy, w), x>
        let gx = conv(lx, gv, wv, &p.stride, &sym(&p.padding), &p.dilation, p.groups)?;
        let gx = fit(lx, gx, &x.shape)?;
        let gw = conv_grad_weight(lx, gv, xv, &k, &p)?;
        (gx, gw)
    } else {
        let pad = t_pad(&k, &gy.shape[2..], &x.shape[2..], &p);
        let gx = conv_t(lx, gv, wv, &p.stride, &pad, &p.dilation, p.groups)?;
        let gw = conv_grad_weight(lx, xv, gv, &k, &p)?;
        (gx, gw)
    };
    let mut dims = vec![0];
    dims.extend(2..2 + n as i64);
    let gb = lx.b.reduce_sum(gv, &dims)?;
    Ok(vec![lx.cast(gx, x.dtype)?, lx.cast(gw, w.dtype)?, lx.cast(gb, gy.dtype)?])
}
