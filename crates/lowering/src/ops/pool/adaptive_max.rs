//! Adaptive max pooling: gathers each (padded, masked) window and reduces
//! it with the max-pool order. Its backward is max pooling's.
use stablehlo::{DType, GatherDims, Value};

use super::expand;
use super::max::{argmax_body, lowest};
use crate::args::Args;
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

/// Window `[start, end)` of adaptive pooling output `o` along a dim.
fn adaptive_range(o: i64, input: i64, out: i64) -> (i64, i64) {
    ((o * input) / out, ((o + 1) * input + out - 1) / out)
}

/// adaptive_max_pool{2,3}d(self, output_size) -> (values, indices): gathers
/// each output's window (padded to the longest window, extra slots masked
/// to (lowest, i64::MAX)) and reduces it with the max-pool order.
pub(super) fn adaptive_max_pool(lx: &mut Lower, args: &Args, n: usize) -> Result<Vec<Value>> {
    let t = args.tensor(0)?.clone();
    if t.dtype == DType::Bool {
        bail!(NotImplemented, "{}: not implemented for 'Bool'", lx.op);
    }
    let rank = t.shape.len();
    if rank != n + 1 && rank != n + 2 {
        bail!(Runtime, "{}: Expected {}D or {}D tensor, got {:?}", lx.op, n + 1, n + 2, t.shape);
    }
    let out = expand(lx, args.ints(1)?, n, &[], "output_size")?;
    let lead = rank - n;
    let input = t.shape[lead..].to_vec();
    if input.contains(&0) || out.iter().any(|&o| o <= 0) {
        bail!(Runtime, "{}: input {:?} and output_size {:?} must be non-empty", lx.op, t.shape, out);
    }
    let planes: i64 = t.shape[..lead].iter().product();
    let lmax: Vec<i64> = (0..n)
        .map(|i| (0..out[i]).map(|o| { let (a, b) = adaptive_range(o, input[i], out[i]); b - a }).max().unwrap_or(1))
        .collect();
    // Index grid [o0, l0, o1, l1, ...]: per-dim coordinates, flat index, validity.
    let mut grid = Vec::new();
    for i in 0..n {
        grid.push(out[i]);
        grid.push(lmax[i]);
    }
    let total: i64 = grid.iter().product();
    let (mut coords, mut flat, mut valid) = (Vec::new(), Vec::new(), Vec::new());
    for e in 0..total {
        let mut rem = e;
        let mut c = vec![0; n];
        let mut ok = true;
        for i in (0..n).rev() {
            let l = rem % lmax[i];
            rem /= lmax[i];
            let o = rem % out[i];
            rem /= out[i];
            let (a, b) = adaptive_range(o, input[i], out[i]);
            ok &= a + l < b;
            c[i] = (a + l).min(input[i] - 1);
        }
        let f = (0..n).fold(0, |acc, i| acc * input[i] + c[i]);
        coords.extend(c);
        flat.push(if ok { f } else { i64::MAX });
        valid.push(ok as i64);
    }
    let mut ishape = grid.clone();
    ishape.push(n as i64);
    let idx = lx.b.constant_tensor_i64(DType::I64, &ishape, &coords)?;
    let mut pshape = vec![planes];
    pshape.extend(&input);
    let x = lx.b.reshape(t.value, &pshape)?;
    let dims = GatherDims {
        offset_dims: vec![0],
        collapsed_slice_dims: (1..=n as i64).collect(),
        start_index_map: (1..=n as i64).collect(),
        index_vector_dim: 2 * n as i64,
        ..Default::default()
    };
    let mut sizes = vec![planes];
    sizes.extend(vec![1; n]);
    let g = lx.b.gather(x, idx, &dims, &sizes, false)?;
    let mut gshape = vec![planes];
    gshape.extend(&grid);
    let gdims: Vec<i64> = (1..=2 * n as i64).collect();
    let fl = lx.b.constant_tensor_i64(DType::I64, &grid, &flat)?;
    let fl = lx.b.broadcast_in_dim(fl, &gshape, &gdims)?;
    let ok = lx.b.constant_tensor_i64(DType::Bool, &grid, &valid)?;
    let ok = lx.b.broadcast_in_dim(ok, &gshape, &gdims)?;
    let lo = lowest(lx, t.dtype);
    let lo_b = lx.b.broadcast_in_dim(lo, &gshape, &[])?;
    let g = lx.b.select(ok, g, lo_b)?;
    let init_i = lx.b.constant_i64(DType::I64, i64::MAX);
    let float = t.dtype.is_float();
    let red: Vec<i64> = (0..n as i64).map(|i| 2 + 2 * i).collect();
    let r = lx.b.reduce(&[g, fl], &[lo, init_i], &red, |b, l, r| argmax_body(b, l, r, float))?;
    let mut oshape = t.shape[..lead].to_vec();
    oshape.extend(&out);
    let v = lx.b.reshape(r[0], &oshape)?;
    let i = lx.b.reshape(r[1], &oshape)?;
    Ok(vec![v, i])
}
