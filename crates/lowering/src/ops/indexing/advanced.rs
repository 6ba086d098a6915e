//! Advanced indexing: `index.Tensor` (x[i, :, j]), `index_put` (x[i] = v,
//! with accumulate) and `masked_scatter`.
//!
//! Integer index tensors broadcast together to a shape B; the indexed dims
//! are moved to the front, one gather/scatter takes index vectors of length
//! m (the number of indexed dims), and the result puts B where PyTorch does:
//! in place of the indexed dims when they are adjacent, else in front.
//! A boolean mask as an index gives a data-dependent shape: `index` with one
//! reads the mask's count back first (a host sync, as on CUDA) and indexes
//! with the mask's nonzero() columns. `index_put` with a mask does not need the
//! count: the k-th true position takes row k of the values (a prefix sum of
//! the mask finds k), and a check raises if the counts differ.
use stablehlo::{CompareDir, DType, GatherDims, ScatterDims, Value};

use super::{as_index, checked, take_rows, OutOfRange};
use crate::ops::dynamic;
use crate::args::{Args, TensorArg};
use crate::bail;
use crate::ctx::Lower;
use crate::error::Result;

/// How an indexing expression maps self's dims.
struct Plan {
    /// Self's dims with the indexed ones first.
    perm: Vec<i64>,
    /// Number of indexed dims.
    m: usize,
    /// Sizes of the other dims, in order.
    rest: Vec<i64>,
    /// The broadcast shape of the index tensors.
    bshape: Vec<i64>,
    /// [..bshape, m] i64 index vectors, wrapped and checked (None if B is empty).
    coords: Option<Value>,
    /// Where B sits in the result (the first indexed dim when they are adjacent).
    front: usize,
}

impl Plan {
    fn result_shape(&self) -> Vec<i64> {
        let mut s = self.rest[..self.front].to_vec();
        s.extend(&self.bshape);
        s.extend(&self.rest[self.front..]);
        s
    }
    fn nb(&self) -> usize {
        self.bshape.len()
    }
    /// Permutation from the gathered layout [B, rest] to the result layout.
    fn gathered_to_result(&self) -> Vec<i64> {
        let (nb, f, nr) = (self.nb() as i64, self.front as i64, self.rest.len() as i64);
        (nb..nb + f).chain(0..nb).chain(nb + f..nb + nr).collect()
    }
    /// Permutation from the result layout to [B, rest].
    fn result_to_gathered(&self) -> Vec<i64> {
        let (nb, f, nr) = (self.nb() as i64, self.front as i64, self.rest.len() as i64);
        (f..f + nb).chain(0..f).chain(f + nb..nb + nr).collect()
    }
}

fn is_mask(t: &TensorArg) -> bool {
    matches!(t.dtype, DType::Bool | DType::U8)
}

fn identity(p: &[i64]) -> bool {
    p.iter().enumerate().all(|(i, &x)| i as i64 == x)
}

fn transpose(lx: &mut Lower, v: Value, perm: &[i64]) -> Result<Value> {
    if identity(perm) {
        return Ok(v);
    }
    Ok(lx.b.transpose(v, perm)?)
}

fn plan(lx: &mut Lower, t: &TensorArg, indices: &[Option<TensorArg>]) -> Result<Plan> {
    let r = t.shape.len();
    if indices.len() > r {
        bail!(
            Index,
            "{}: too many indices for tensor of dimension {r} (got {})",
            lx.op,
            indices.len()
        );
    }
    let indexed: Vec<(usize, &TensorArg)> = indices
        .iter()
        .enumerate()
        .filter_map(|(d, i)| i.as_ref().map(|i| (d, i)))
        .collect();
    let mut bshape: Vec<i64> = vec![];
    for (_, it) in &indexed {
        bshape = lx.b.broadcast_shapes(&bshape, &it.shape).map_err(|_| {
            let all: Vec<String> = indexed.iter().map(|(_, i)| format!("{:?}", i.shape)).collect();
            crate::error::LowerError::new(
                crate::error::ErrorKind::Index,
                format!("{}: shape mismatch: indexing tensors could not be broadcast together with shapes {}", lx.op, all.join(", ")),
            )
        })?;
    }
    let dims: Vec<usize> = indexed.iter().map(|(d, _)| *d).collect();
    let adjacent = dims.windows(2).all(|w| w[1] == w[0] + 1);
    let others: Vec<usize> = (0..r).filter(|d| !dims.contains(d)).collect();
    let perm: Vec<i64> = dims.iter().chain(&others).map(|&d| d as i64).collect();
    let rest: Vec<i64> = others.iter().map(|&d| t.shape[d]).collect();
    let front = if adjacent { dims[0] } else { 0 };
    let nb = bshape.len();
    let coords = if bshape.iter().product::<i64>() == 0 {
        None
    } else {
        let mut with1 = bshape.clone();
        with1.push(1);
        let mut parts = Vec::with_capacity(indexed.len());
        for (d, it) in &indexed {
            if t.shape[*d] == 0 {
                bail!(
                    Index,
                    "{}: index is out of bounds for dimension {d} with size 0",
                    lx.op
                );
            }
            let idx = as_index(lx, it)?;
            let idx = lx.expand(idx, &bshape)?;
            let what = format!("input shape {:?}, index shape {:?}", t.shape, it.shape);
            let idx = checked(lx, idx, t.shape[*d], *d, true, &what, OutOfRange::IndexError)?;
            parts.push(lx.b.reshape(idx, &with1)?);
        }
        Some(if parts.len() == 1 {
            parts[0]
        } else {
            lx.b.concatenate(&parts, nb as i64)?
        })
    };
    Ok(Plan {
        perm,
        m: indexed.len(),
        rest,
        bshape,
        coords,
        front,
    })
}

/// Whether an index call has a boolean mask among its indices (argument 1):
/// its result then has as many rows as the mask has true values.
pub(super) fn has_mask_index(arg_dtypes: &[Vec<DType>]) -> bool {
    arg_dtypes.get(1).is_some_and(|ds| ds.iter().any(|d| matches!(d, DType::Bool | DType::U8)))
}

/// The one boolean mask among `ind`: (its place in the list, the first dim
/// of self it covers). Its shape must match self's dims there, as on the CPU.
fn the_mask(lx: &Lower, t: &TensorArg, ind: &[Option<TensorArg>]) -> Result<(usize, usize)> {
    let masks: Vec<usize> = (0..ind.len()).filter(|&i| ind[i].as_ref().is_some_and(is_mask)).collect();
    if masks.len() != 1 {
        bail!(
            NotImplemented,
            "{}: indexing with {} boolean masks at once is not supported on tpu; index with one mask, or with \
             mask.nonzero() columns",
            lx.op,
            masks.len()
        );
    }
    let i = masks[0];
    let m = ind[i].as_ref().expect("a mask");
    // Each earlier entry covers one dim of self (entries after a mask cover
    // the dims after the mask's).
    let dim = i;
    if m.shape.is_empty() {
        bail!(NotImplemented, "{}: a 0-dim boolean mask as an index is not supported on tpu", lx.op);
    }
    for (j, &n) in m.shape.iter().enumerate() {
        if t.shape.get(dim + j) != Some(&n) {
            bail!(
                Index,
                "The shape of the mask {:?} at index {} does not match the shape of the indexed tensor {:?} at index {}",
                m.shape,
                j,
                t.shape,
                dim + j
            );
        }
    }
    Ok((i, dim))
}

/// index's size lowering: how many true values its boolean mask has.
pub(super) fn index_mask_count(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let ind = args.opt_tensors(1)?;
    let (i, _) = the_mask(lx, t, &ind)?;
    let mask = dynamic::flat_mask(lx, ind[i].as_ref().expect("a mask").value)?;
    Ok(vec![dynamic::count(lx, mask)?])
}

/// `ind` with its boolean mask replaced by one int64 index of `count`
/// positions per dim it covers (the mask's nonzero() columns), as PyTorch
/// expands masks before indexing.
fn mask_as_coordinates(lx: &mut Lower, t: &TensorArg, ind: Vec<Option<TensorArg>>, count: i64) -> Result<Vec<Option<TensorArg>>> {
    let (i, _) = the_mask(lx, t, &ind)?;
    let m = ind[i].clone().expect("a mask");
    let coords = if count == 0 {
        (0..m.shape.len()).map(|_| lx.full(DType::I64, 0.0, &[0])).collect::<Result<Vec<_>>>()?
    } else {
        let mask = dynamic::flat_mask(lx, m.value)?;
        let flat = dynamic::true_positions(lx, mask, count)?;
        dynamic::unravel(lx, flat, &m.shape, count)?
    };
    let mut out = ind[..i].to_vec();
    out.extend(coords.into_iter().map(|value| Some(TensorArg { value, dtype: DType::I64, shape: vec![count], wrapped_number: false, contiguous: true })));
    out.extend(ind[i + 1..].iter().cloned());
    Ok(out)
}

/// index.Tensor(self, indices): x[i, :, j] with integer index tensors, or
/// with one boolean mask (x[mask]: its count was read back first, a host
/// sync, as on CUDA).
pub(super) fn index(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let ind = args.opt_tensors(1)?;
    if ind.iter().all(|i| i.is_none()) {
        return Ok(vec![t.value]);
    }
    let ind = if ind.iter().flatten().any(is_mask) {
        let Some(count) = lx.dynamic_size else { bail!(Runtime, "{}: mask count not computed (internal error)", lx.op) };
        mask_as_coordinates(lx, t, ind, count)?
    } else {
        ind
    };
    let p = plan(lx, t, &ind)?;
    let shape = p.result_shape();
    let Some(coords) = p.coords.filter(|_| shape.iter().product::<i64>() > 0) else {
        return Ok(vec![lx.full(t.dtype, 0.0, &shape)?]);
    };
    let xt = transpose(lx, t.value, &p.perm)?;
    let (nb, m, nr) = (p.nb() as i64, p.m as i64, p.rest.len() as i64);
    let mut slice = vec![1; p.m];
    slice.extend(&p.rest);
    let dims = GatherDims {
        offset_dims: (nb..nb + nr).collect(),
        collapsed_slice_dims: (0..m).collect(),
        start_index_map: (0..m).collect(),
        index_vector_dim: nb,
        ..Default::default()
    };
    let g = lx.b.gather(xt, coords, &dims, &slice, false)?;
    Ok(vec![transpose(lx, g, &p.gathered_to_result())?])
}

fn values_and_flag(lx: &mut Lower, args: &Args, t: &TensorArg) -> Result<(TensorArg, bool)> {
    let v = args.tensor_or_cpu_scalar(2)?;
    if v.dtype != t.dtype {
        bail!(
            Runtime,
            "{}: Index put requires the source and destination dtypes match, got {} for the destination and {} for the source.",
            lx.op,
            crate::dtypes::name(t.dtype),
            crate::dtypes::name(v.dtype)
        );
    }
    Ok((v, args.bool_or(3, false)?))
}

fn broadcast_error(lx: &Lower, v: &TensorArg, shape: &[i64]) -> crate::error::LowerError {
    crate::error::LowerError::new(
        crate::error::ErrorKind::Runtime,
        format!(
            "{}: shape mismatch: value tensor of shape {:?} cannot be broadcast to indexing result of shape {:?}",
            lx.op, v.shape, shape
        ),
    )
}

/// index_put(self, indices, values, accumulate=False) and _index_put_impl_.
pub(super) fn index_put(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let ind = args.opt_tensors(1)?;
    let (v, accumulate) = values_and_flag(lx, args, t)?;
    if ind.iter().flatten().any(is_mask) {
        return mask_put(lx, t, &ind, &v, accumulate);
    }
    if ind.iter().all(|i| i.is_none()) {
        let vv =
            lx.b.broadcast_to(v.value, &t.shape)
                .map_err(|_| broadcast_error(lx, &v, &t.shape))?;
        return Ok(vec![if accumulate {
            lx.b.add(t.value, vv)?
        } else {
            vv
        }]);
    }
    let p = plan(lx, t, &ind)?;
    let shape = p.result_shape();
    let vv =
        lx.b.broadcast_to(v.value, &shape)
            .map_err(|_| broadcast_error(lx, &v, &shape))?;
    let Some(coords) = p.coords.filter(|_| shape.iter().product::<i64>() > 0) else {
        return Ok(vec![t.value]);
    };
    let upd = transpose(lx, vv, &p.result_to_gathered())?;
    let xt = transpose(lx, t.value, &p.perm)?;
    let (nb, m, nr) = (p.nb() as i64, p.m as i64, p.rest.len() as i64);
    let dims = ScatterDims {
        update_window_dims: (nb..nb + nr).collect(),
        inserted_window_dims: (0..m).collect(),
        scatter_dims_to_operand_dims: (0..m).collect(),
        index_vector_dim: nb,
        ..Default::default()
    };
    let out = lx.b.scatter(xt, coords, upd, &dims, move |rb, cur, u| {
        Ok(vec![if accumulate {
            rb.add(cur[0], u[0])?
        } else {
            u[0]
        }])
    })?;
    let mut inv = vec![0i64; p.perm.len()];
    for (i, &d) in p.perm.iter().enumerate() {
        inv[d as usize] = i as i64;
    }
    Ok(vec![transpose(lx, out, &inv)?])
}

/// For a flattened mask [M]: (rank of each position among the true ones,
/// clamped to [0, limit-1]; the number of true positions, rank 0).
fn mask_ranks(lx: &mut Lower, mflat: Value, limit: i64) -> Result<(Value, Value)> {
    let n = lx.shape(mflat)[0];
    let ones = lx.b.convert(mflat, DType::I64)?;
    let cs = crate::ops::dynamic::prefix_sum(lx, ones)?;
    let last = lx.b.slice(cs, &[n - 1], &[n], &[])?;
    let count = lx.b.reshape(last, &[])?;
    let one = lx.b.splat_i64(DType::I64, 1, &[n])?;
    let r = lx.b.sub(cs, one)?;
    let lo = lx.b.constant_i64(DType::I64, 0);
    let hi = lx.b.constant_i64(DType::I64, (limit - 1).max(0));
    Ok((lx.b.clamp(lo, r, hi)?, count))
}

/// index_put with one boolean mask (after optional leading full slices).
fn mask_put(
    lx: &mut Lower,
    t: &TensorArg,
    ind: &[Option<TensorArg>],
    v: &TensorArg,
    accumulate: bool,
) -> Result<Vec<Value>> {
    let given: Vec<(usize, &TensorArg)> = ind
        .iter()
        .enumerate()
        .filter_map(|(d, i)| i.as_ref().map(|i| (d, i)))
        .collect();
    if given.len() != 1 {
        bail!(
            NotImplemented,
            "{}: index_put with a boolean mask combined with other index tensors is not supported on tpu",
            lx.op
        );
    }
    let (p, mask) = given[0];
    let k = mask.shape.len();
    if p + k > t.shape.len() || t.shape[p..p + k] != mask.shape[..] {
        bail!(
            Index,
            "{}: The shape of the mask {:?} at index {p} does not match the shape of the indexed tensor {:?} at index {p}",
            lx.op,
            mask.shape,
            t.shape
        );
    }
    let pre = t.shape[..p].to_vec();
    let post = t.shape[p + k..].to_vec();
    let big_m: i64 = mask.shape.iter().product();
    let rank = pre.len() + 1 + post.len();
    if v.shape.len() > rank {
        bail!(Runtime, "{}: shape mismatch: value tensor of shape {:?} cannot be broadcast to the indexing result", lx.op, v.shape);
    }
    let mut vs = vec![1; rank - v.shape.len()];
    vs.extend(&v.shape);
    let target: Vec<i64> = pre
        .iter()
        .copied()
        .chain([vs[p]])
        .chain(post.iter().copied())
        .collect();
    if vs.iter().zip(&target).any(|(&a, &b)| a != 1 && a != b) {
        bail!(Runtime, "{}: shape mismatch: value tensor of shape {:?} cannot be broadcast to indexing result of shape {:?}", lx.op, v.shape, target);
    }
    let mb = lx.cast(mask.value, DType::Bool)?;
    let mdims: Vec<i64> = (p..p + k).map(|d| d as i64).collect();
    let mask_b = lx.b.broadcast_in_dim(mb, &t.shape, &mdims)?;
    let vr = lx.b.reshape(v.value, &vs)?;
    let vb = lx.b.broadcast_to(vr, &target)?;
    let vals = if vs[p] == 1 {
        let mut s = pre.clone();
        s.extend(std::iter::repeat_n(1, k));
        s.extend(&post);
        let x = lx.b.reshape(vb, &s)?;
        lx.b.broadcast_to(x, &t.shape)?
    } else {
        let mflat = lx.b.reshape(mb, &[big_m])?;
        let (ranks, count) = mask_ranks(lx, mflat, vs[p])?;
        let want = lx.b.constant_i64(DType::I64, vs[p]);
        let bad = lx.b.compare(count, want, CompareDir::Ne)?;
        lx.check(
            bad,
            format!(
                "{}: shape mismatch: value tensor of shape {:?} cannot be broadcast to indexing result (the mask does not have {} true elements)",
                lx.op, v.shape, vs[p]
            ),
        );
        let g = take_rows(lx, vb, ranks, p)?;
        lx.b.reshape(g, &t.shape)?
    };
    let new = if accumulate {
        lx.b.add(t.value, vals)?
    } else {
        vals
    };
    Ok(vec![lx.b.select(mask_b, new, t.value)?])
}

/// masked_scatter(self, mask, source): the k-th true position of the mask
/// takes the k-th element of source.
pub(super) fn masked_scatter(lx: &mut Lower, args: &Args) -> Result<Vec<Value>> {
    let t = args.tensor(0)?;
    let mask = args.tensor(1)?;
    let src = args.tensor(2)?;
    if src.dtype != t.dtype {
        bail!(
            Runtime,
            "{}: masked_scatter_: expected self and source to have same dtypes but got {} and {}",
            lx.op,
            crate::dtypes::name(t.dtype),
            crate::dtypes::name(src.dtype)
        );
    }
    if !is_mask(mask) {
        bail!(
            Runtime,
            "{}: masked_scatter_ only supports boolean masks, but got mask with dtype {}",
            lx.op,
            crate::dtypes::name(mask.dtype)
        );
    }
    let mb = lx.cast(mask.value, DType::Bool)?;
    let mask_b = lx.b.broadcast_to(mb, &t.shape).map_err(|_| {
        crate::error::LowerError::new(
            crate::error::ErrorKind::Runtime,
            format!(
                "{}: mask of shape {:?} cannot broadcast to self of shape {:?}",
                lx.op, mask.shape, t.shape
            ),
        )
    })?;
    let m: i64 = t.shape.iter().product();
    let s: i64 = src.shape.iter().product();
    if m == 0 {
        return Ok(vec![t.value]);
    }
    let mflat = lx.b.reshape(mask_b, &[m])?;
    let (ranks, count) = mask_ranks(lx, mflat, s)?;
    let have = lx.b.constant_i64(DType::I64, s);
    let bad = lx.b.compare(count, have, CompareDir::Gt)?;
    lx.check_runtime(
        bad,
        format!(
            "{}: masked_scatter_: Number of elements of source < number of ones in mask",
            lx.op
        ),
    );
    if s == 0 {
        return Ok(vec![t.value]);
    }
    let sflat = lx.b.reshape(src.value, &[s])?;
    let g = take_rows(lx, sflat, ranks, 0)?;
    let g = lx.b.reshape(g, &t.shape)?;
    Ok(vec![lx.b.select(mask_b, g, t.value)?])
}
