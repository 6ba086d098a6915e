//! Indexing ops: `stablehlo.gather`, `stablehlo.scatter`, `stablehlo.dynamic_slice`
//! and `stablehlo.dynamic_update_slice`, with their dimension-number structs.
//!
//! Index vectors live along `index_vector_dim` of the index tensor; when
//! `index_vector_dim == rank(indices)` each index is an implicit 1-vector.
//! Out-of-bounds start indices are clamped by the runtime (StableHLO semantics).

use crate::builder::{Builder, Value};
use crate::check::{dims_sorted, dims_valid, is_scalar};
use crate::error::{bail, Result};
use crate::literal::{dims_list, i64_array};
use crate::types::TensorType;

/// Dimension numbers of `stablehlo.gather` (field meanings as in the spec).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GatherDims {
    /// Result dimensions that hold the (non-collapsed) slice dimensions; sorted.
    pub offset_dims: Vec<i64>,
    /// Operand dimensions whose slice size is 1 and which are dropped; sorted.
    pub collapsed_slice_dims: Vec<i64>,
    /// Operand dimensions batched with `start_indices_batching_dims`; sorted.
    pub operand_batching_dims: Vec<i64>,
    pub start_indices_batching_dims: Vec<i64>,
    /// Operand dimension indexed by each component of an index vector.
    pub start_index_map: Vec<i64>,
    pub index_vector_dim: i64,
}

/// Dimension numbers of `stablehlo.scatter` (field meanings as in the spec).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ScatterDims {
    /// Dimensions of `updates` that hold window (slice) elements; sorted.
    pub update_window_dims: Vec<i64>,
    /// Operand dimensions with an implicit window size of 1; sorted.
    pub inserted_window_dims: Vec<i64>,
    pub input_batching_dims: Vec<i64>,
    pub scatter_indices_batching_dims: Vec<i64>,
    /// Operand dimension indexed by each component of an index vector.
    pub scatter_dims_to_operand_dims: Vec<i64>,
    pub index_vector_dim: i64,
}

impl GatherDims {
    /// Single elements of a 1-D operand at indices shaped [n, 1]: result [n].
    pub fn points_1d() -> GatherDims {
        GatherDims {
            offset_dims: vec![],
            collapsed_slice_dims: vec![0],
            operand_batching_dims: vec![],
            start_indices_batching_dims: vec![],
            start_index_map: vec![0],
            index_vector_dim: 1,
        }
    }
}

impl ScatterDims {
    /// Single elements of a 1-D operand at indices shaped [n, 1], updates [n].
    pub fn points_1d() -> ScatterDims {
        ScatterDims {
            update_window_dims: vec![],
            inserted_window_dims: vec![0],
            input_batching_dims: vec![],
            scatter_indices_batching_dims: vec![],
            scatter_dims_to_operand_dims: vec![0],
            index_vector_dim: 1,
        }
    }
}

/// `name = [..]` fields of a dimension-numbers attribute, skipping empty lists.
fn fields(list: &[(&str, &[i64])], index_vector_dim: i64) -> String {
    let mut out: Vec<String> = list
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k} = {}", dims_list(v)))
        .collect();
    out.push(format!("index_vector_dim = {index_vector_dim}"));
    out.join(", ")
}

/// Checks the index tensor against `index_vector_dim` and the batching dims;
/// returns (index vector length, batch dimension sizes of the indices).
fn index_batch(
    op: &'static str,
    idx: &TensorType,
    index_vector_dim: i64,
    batching_dims: &[i64],
) -> Result<(i64, Vec<i64>)> {
    if !idx.dtype.is_integer() {
        bail!(op, "indices must have integer elements, got {idx}");
    }
    let ri = idx.rank() as i64;
    if index_vector_dim < 0 || index_vector_dim > ri {
        bail!(
            op,
            "index_vector_dim {index_vector_dim} out of range for indices {idx}"
        );
    }
    dims_valid(op, "indices batching dims", batching_dims, idx.rank())?;
    if batching_dims.contains(&index_vector_dim) {
        bail!(
            op,
            "indices batching dims {batching_dims:?} contain index_vector_dim {index_vector_dim}"
        );
    }
    let vec_len = if index_vector_dim < ri {
        idx.shape[index_vector_dim as usize]
    } else {
        1
    };
    let batch = (0..ri)
        .filter(|&d| d != index_vector_dim)
        .map(|d| idx.shape[d as usize])
        .collect();
    Ok((vec_len, batch))
}

fn disjoint(op: &'static str, a_name: &str, a: &[i64], b_name: &str, b: &[i64]) -> Result<()> {
    if let Some(d) = a.iter().find(|d| b.contains(d)) {
        bail!(op, "{a_name} {a:?} and {b_name} {b:?} share dimension {d}");
    }
    Ok(())
}

impl Builder {
    /// `stablehlo.gather` of slices of `slice_sizes` from `operand` starting at
    /// the index vectors in `indices`.
    pub fn gather(
        &mut self,
        operand: Value,
        indices: Value,
        dims: &GatherDims,
        slice_sizes: &[i64],
        indices_are_sorted: bool,
    ) -> Result<Value> {
        const OP: &str = "stablehlo.gather";
        let (t, idx) = (self.type_of(OP, operand)?, self.type_of(OP, indices)?);
        let r = t.rank();
        let (vec_len, batch) = index_batch(
            OP,
            &idx,
            dims.index_vector_dim,
            &dims.start_indices_batching_dims,
        )?;
        if slice_sizes.len() != r
            || (0..r).any(|i| slice_sizes[i] < 0 || slice_sizes[i] > t.shape[i])
        {
            bail!(
                OP,
                "slice_sizes {slice_sizes:?} must have one size in [0, dim] per dimension of {t}"
            );
        }
        for (name, list) in [
            ("collapsed_slice_dims", &dims.collapsed_slice_dims),
            ("operand_batching_dims", &dims.operand_batching_dims),
        ] {
            dims_valid(OP, name, list, r)?;
            dims_sorted(OP, name, list)?;
            if let Some(&d) = list.iter().find(|&&d| slice_sizes[d as usize] > 1) {
                bail!(OP, "{name} {list:?}: slice size of dimension {d} must be at most 1, got {slice_sizes:?}");
            }
        }
        disjoint(
            OP,
            "collapsed_slice_dims",
            &dims.collapsed_slice_dims,
            "operand_batching_dims",
            &dims.operand_batching_dims,
        )?;
        if dims.start_index_map.len() as i64 != vec_len {
            bail!(
                OP,
                "start_index_map {:?} must have {vec_len} entries (index vectors of {idx})",
                dims.start_index_map
            );
        }
        dims_valid(OP, "start_index_map", &dims.start_index_map, r)?;
        disjoint(
            OP,
            "start_index_map",
            &dims.start_index_map,
            "operand_batching_dims",
            &dims.operand_batching_dims,
        )?;
        if dims.operand_batching_dims.len() != dims.start_indices_batching_dims.len() {
            bail!(
                OP,
                "operand_batching_dims {:?} and start_indices_batching_dims {:?} differ in length",
                dims.operand_batching_dims,
                dims.start_indices_batching_dims
            );
        }
        for (&o, &i) in dims
            .operand_batching_dims
            .iter()
            .zip(&dims.start_indices_batching_dims)
        {
            if t.shape[o as usize] != idx.shape[i as usize] {
                bail!(
                    OP,
                    "batching dimension {o} of operand {t} and {i} of indices {idx} differ in size"
                );
            }
        }
        let offset_sizes: Vec<i64> = (0..r as i64)
            .filter(|d| {
                !dims.collapsed_slice_dims.contains(d) && !dims.operand_batching_dims.contains(d)
            })
            .map(|d| slice_sizes[d as usize])
            .collect();
        if dims.offset_dims.len() != offset_sizes.len() {
            bail!(OP, "offset_dims {:?} must have {} entries (operand {t} minus collapsed and batching dims)", dims.offset_dims, offset_sizes.len());
        }
        let out_rank = batch.len() + offset_sizes.len();
        dims_valid(OP, "offset_dims", &dims.offset_dims, out_rank)?;
        dims_sorted(OP, "offset_dims", &dims.offset_dims)?;
        let (mut off, mut bat) = (offset_sizes.iter(), batch.iter());
        let shape: Vec<i64> = (0..out_rank as i64)
            .map(|d| {
                if dims.offset_dims.contains(&d) {
                    *off.next().unwrap()
                } else {
                    *bat.next().unwrap()
                }
            })
            .collect();
        let dn = fields(
            &[
                ("offset_dims", &dims.offset_dims),
                ("collapsed_slice_dims", &dims.collapsed_slice_dims),
                ("operand_batching_dims", &dims.operand_batching_dims),
                (
                    "start_indices_batching_dims",
                    &dims.start_indices_batching_dims,
                ),
                ("start_index_map", &dims.start_index_map),
            ],
            dims.index_vector_dim,
        );
        let attrs = [
            ("dimension_numbers", format!("#stablehlo.gather<{dn}>")),
            ("slice_sizes", i64_array(slice_sizes)),
            ("indices_are_sorted", indices_are_sorted.to_string()),
        ];
        Ok(self.emit1(
            OP,
            &[operand, indices],
            &attrs,
            TensorType::new(t.dtype, shape),
        ))
    }

    /// `stablehlo.scatter` of `updates` into `operand` at `indices`; `body(region,
    /// current, update)` gets one rank-0 value each and returns the stored value
    /// (return `update[0]` to assign, `current + update` to accumulate).
    pub fn scatter(
        &mut self,
        operand: Value,
        indices: Value,
        updates: Value,
        dims: &ScatterDims,
        body: impl FnOnce(&mut Builder, &[Value], &[Value]) -> Result<Vec<Value>>,
    ) -> Result<Value> {
        const OP: &str = "stablehlo.scatter";
        let (t, idx, u) = (
            self.type_of(OP, operand)?,
            self.type_of(OP, indices)?,
            self.type_of(OP, updates)?,
        );
        if u.dtype != t.dtype {
            bail!(OP, "updates {u} must have the element type of operand {t}");
        }
        let r = t.rank();
        let (vec_len, batch) = index_batch(
            OP,
            &idx,
            dims.index_vector_dim,
            &dims.scatter_indices_batching_dims,
        )?;
        dims_valid(OP, "update_window_dims", &dims.update_window_dims, u.rank())?;
        dims_sorted(OP, "update_window_dims", &dims.update_window_dims)?;
        for (name, list) in [
            ("inserted_window_dims", &dims.inserted_window_dims),
            ("input_batching_dims", &dims.input_batching_dims),
        ] {
            dims_valid(OP, name, list, r)?;
            dims_sorted(OP, name, list)?;
        }
        disjoint(
            OP,
            "inserted_window_dims",
            &dims.inserted_window_dims,
            "input_batching_dims",
            &dims.input_batching_dims,
        )?;
        if dims.update_window_dims.len()
            + dims.inserted_window_dims.len()
            + dims.input_batching_dims.len()
            != r
        {
            bail!(OP, "update_window_dims, inserted_window_dims and input_batching_dims must add up to the rank of operand {t}");
        }
        if dims.scatter_dims_to_operand_dims.len() as i64 != vec_len {
            bail!(OP, "scatter_dims_to_operand_dims {:?} must have {vec_len} entries (index vectors of {idx})", dims.scatter_dims_to_operand_dims);
        }
        dims_valid(
            OP,
            "scatter_dims_to_operand_dims",
            &dims.scatter_dims_to_operand_dims,
            r,
        )?;
        disjoint(
            OP,
            "scatter_dims_to_operand_dims",
            &dims.scatter_dims_to_operand_dims,
            "input_batching_dims",
            &dims.input_batching_dims,
        )?;
        if dims.input_batching_dims.len() != dims.scatter_indices_batching_dims.len() {
            bail!(
                OP,
                "input_batching_dims {:?} and scatter_indices_batching_dims {:?} differ in length",
                dims.input_batching_dims,
                dims.scatter_indices_batching_dims
            );
        }
        for (&o, &i) in dims
            .input_batching_dims
            .iter()
            .zip(&dims.scatter_indices_batching_dims)
        {
            if t.shape[o as usize] != idx.shape[i as usize] {
                bail!(
                    OP,
                    "batching dimension {o} of operand {t} and {i} of indices {idx} differ in size"
                );
            }
        }
        if u.rank() != dims.update_window_dims.len() + batch.len() {
            bail!(
                OP,
                "updates {u} must have rank {} (window dims + index batch dims of {idx})",
                dims.update_window_dims.len() + batch.len()
            );
        }
        let scatter_dims: Vec<i64> = (0..u.rank() as i64)
            .filter(|d| !dims.update_window_dims.contains(d))
            .collect();
        for (&ud, &b) in scatter_dims.iter().zip(&batch) {
            if u.shape[ud as usize] != b {
                bail!(OP, "updates {u} dimension {ud} must match the index batch dimensions {batch:?} of {idx}");
            }
        }
        let window_operand_dims = (0..r as i64).filter(|d| {
            !dims.inserted_window_dims.contains(d) && !dims.input_batching_dims.contains(d)
        });
        for (&ud, od) in dims.update_window_dims.iter().zip(window_operand_dims) {
            if u.shape[ud as usize] > t.shape[od as usize] {
                bail!(
                    OP,
                    "updates {u} window dimension {ud} is larger than operand {t} dimension {od}"
                );
            }
        }
        let scalar = TensorType::scalar(t.dtype);
        let (region, ret) = self.region(OP, &[scalar.clone(), scalar.clone()], |b, a| {
            body(b, &a[..1], &a[1..])
        })?;
        if ret != [scalar] {
            bail!(OP, "body must return one rank-0 {}", t.dtype);
        }
        let dn = fields(
            &[
                ("update_window_dims", &dims.update_window_dims),
                ("inserted_window_dims", &dims.inserted_window_dims),
                ("input_batching_dims", &dims.input_batching_dims),
                (
                    "scatter_indices_batching_dims",
                    &dims.scatter_indices_batching_dims,
                ),
                (
                    "scatter_dims_to_operand_dims",
                    &dims.scatter_dims_to_operand_dims,
                ),
            ],
            dims.index_vector_dim,
        );
        let attrs = [
            (
                "scatter_dimension_numbers",
                format!("#stablehlo.scatter<{dn}>"),
            ),
            ("indices_are_sorted", "false".to_string()),
            ("unique_indices", "false".to_string()),
        ];
        Ok(self.emit(OP, &[operand, indices, updates], &[region], &attrs, vec![t])[0])
    }

    /// Checks rank-0 integer start indices of one common type, one per dimension.
    fn start_indices(&self, op: &'static str, t: &TensorType, starts: &[Value]) -> Result<()> {
        if starts.len() != t.rank() {
            bail!(
                op,
                "needs {} start indices for {t}, got {}",
                t.rank(),
                starts.len()
            );
        }
        let mut first = None;
        for &s in starts {
            let st = self.type_of(op, s)?;
            is_scalar(op, "start index", &st)?;
            if !st.dtype.is_integer() || first.is_some_and(|d| d != st.dtype) {
                bail!(
                    op,
                    "start indices must be rank-0 integers of one type, got {st}"
                );
            }
            first = Some(st.dtype);
        }
        Ok(())
    }

    /// `stablehlo.dynamic_slice`: a `sizes` block starting at runtime indices
    /// (clamped so the block stays in bounds).
    pub fn dynamic_slice(&mut self, v: Value, starts: &[Value], sizes: &[i64]) -> Result<Value> {
        const OP: &str = "stablehlo.dynamic_slice";
        let t = self.type_of(OP, v)?;
        self.start_indices(OP, &t, starts)?;
        if sizes.len() != t.rank() || (0..t.rank()).any(|i| sizes[i] < 0 || sizes[i] > t.shape[i]) {
            bail!(
                OP,
                "slice sizes {sizes:?} must have one size in [0, dim] per dimension of {t}"
            );
        }
        let operands: Vec<Value> = std::iter::once(v).chain(starts.iter().copied()).collect();
        let attrs = [("slice_sizes", i64_array(sizes))];
        Ok(self.emit1(OP, &operands, &attrs, TensorType::new(t.dtype, sizes)))
    }

    /// `stablehlo.dynamic_update_slice`: writes `update` into `v` at runtime
    /// start indices (clamped so the block stays in bounds).
    pub fn dynamic_update_slice(
        &mut self,
        v: Value,
        update: Value,
        starts: &[Value],
    ) -> Result<Value> {
        const OP: &str = "stablehlo.dynamic_update_slice";
        let (t, u) = (self.type_of(OP, v)?, self.type_of(OP, update)?);
        if u.dtype != t.dtype
            || u.rank() != t.rank()
            || (0..t.rank()).any(|i| u.shape[i] > t.shape[i])
        {
            bail!(
                OP,
                "update {u} must have the element type and rank of operand {t} and fit inside it"
            );
        }
        self.start_indices(OP, &t, starts)?;
        let operands: Vec<Value> = [v, update]
            .into_iter()
            .chain(starts.iter().copied())
            .collect();
        Ok(self.emit1(OP, &operands, &[], t))
    }
}
