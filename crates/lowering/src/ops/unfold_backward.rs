//! unfold_backward: the gradient of `Tensor.unfold(dim, size, step)` (a view
//! whose windows may overlap). Window element k of every window is spread
//! back with one `pad` (interior padding step - 1, offset k) and the `size`
//! spreads are summed, so overlapping windows accumulate as in ATen.
use stablehlo::Value;

use crate::args::{norm_dim, Args};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;
use crate::op;
use crate::table::OpEntry;

pub const OPS: &[OpEntry] = &[op!("unfold_backward", unfold_backward)];

/// unfold_backward(grad_in, input_sizes, dim, size, step)
fn unfold_backward(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let g = args.tensor(0)?.clone();
    let sizes = args.ints(1)?;
    let rank = sizes.len();
    let dim = if rank == 0 { 0 } else { norm_dim(lx.op, args.int(2)?, rank)? };
    let (size, step) = (args.int(3)?, args.int(4)?);
    if step <= 0 || size < 0 || g.shape.len() != rank + 1 {
        bail!(Runtime, "{}: grad of shape {:?} does not match input sizes {:?} unfolded with size {size}, step {step}", lx.op, g.shape, sizes);
    }
    if rank == 0 {
        // A 0-dim input unfolds into one window of one element.
        return Ok(vec![lx.b.reshape(g.value, &[])?]);
    }
    // The gradient broadcasts to the unfolded shape, as ATen's copy_ into
    // the unfolded view does (istft's window envelope passes a batch of 1).
    let windows = if sizes[dim] >= size { (sizes[dim] - size) / step + 1 } else { 0 };
    let mut unfolded = sizes.to_vec();
    unfolded[dim] = windows;
    unfolded.push(size);
    let g_value = lx.b.broadcast_to(g.value, &unfolded).map_err(|_| {
        crate::error::LowerError::new(
            crate::error::ErrorKind::Runtime,
            format!("{}: grad of shape {:?} does not broadcast to the unfolded shape {unfolded:?}", lx.op, g.shape),
        )
    })?;
    let g = crate::args::TensorArg { value: g_value, shape: unfolded, ..g };
    let zero = lx.full(g.dtype, 0.0, &[])?;
    let mut total = lx.full(g.dtype, 0.0, &sizes)?;
    for k in 0..size {
        let mut lo = vec![0; rank + 1];
        let mut hi: Vec<i64> = g.shape.clone();
        lo[rank] = k;
        hi[rank] = k + 1;
        let piece = lx.b.slice(g.value, &lo, &hi, &vec![1; rank + 1])?;
        let mut piece_shape = g.shape[..rank].to_vec();
        piece_shape[dim] = windows;
        let piece = lx.b.reshape(piece, &piece_shape)?;
        let (mut plo, mut phi, mut interior) = (vec![0; rank], vec![0; rank], vec![0; rank]);
        plo[dim] = k;
        interior[dim] = if windows > 0 { step - 1 } else { 0 };
        let spread = if windows > 0 { k + (windows - 1) * step + 1 } else { k };
        phi[dim] = sizes[dim] - spread;
        let placed = lx.b.pad(piece, zero, &plo, &phi, &interior)?;
        total = lx.b.add(total, placed)?;
    }
    Ok(vec![total])
}
