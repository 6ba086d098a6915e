//! `stablehlo.dot_general`: batched tensor contraction.
//!
//! Result dimensions are, in order: the batch dimensions (in `lhs_batch` order),
//! the remaining lhs dimensions, then the remaining rhs dimensions.

use crate::builder::{Builder, Value};
use crate::check::dims_valid;
use crate::error::{bail, Result};
use crate::literal::dims_list;
use crate::types::TensorType;
use crate::DType;

const OP: &str = "stablehlo.dot_general";

impl Builder {
    /// Contracts `lhs_contract` of `lhs` with `rhs_contract` of `rhs`, batching
    /// over the paired batch dimensions. Operands must share an element type;
    /// `out_dtype` (default: that type) selects the accumulation/result type.
    #[allow(clippy::too_many_arguments)]
    pub fn dot_general(
        &mut self,
        lhs: Value,
        rhs: Value,
        lhs_batch: &[i64],
        rhs_batch: &[i64],
        lhs_contract: &[i64],
        rhs_contract: &[i64],
        out_dtype: Option<DType>,
    ) -> Result<Value> {
        let (l, r) = (self.type_of(OP, lhs)?, self.type_of(OP, rhs)?);
        if l.dtype != r.dtype {
            bail!(
                OP,
                "operands must have the same element type (lhs {l}, rhs {r})"
            );
        }
        if lhs_batch.len() != rhs_batch.len() {
            bail!(OP, "batching dims {lhs_batch:?} and {rhs_batch:?} have different lengths (lhs {l}, rhs {r})");
        }
        if lhs_contract.len() != rhs_contract.len() {
            bail!(OP, "contracting dims {lhs_contract:?} and {rhs_contract:?} have different lengths (lhs {l}, rhs {r})");
        }
        let lhs_all: Vec<i64> = lhs_batch.iter().chain(lhs_contract).copied().collect();
        let rhs_all: Vec<i64> = rhs_batch.iter().chain(rhs_contract).copied().collect();
        dims_valid(
            OP,
            &format!("lhs batching+contracting dims of {l}:"),
            &lhs_all,
            l.rank(),
        )?;
        dims_valid(
            OP,
            &format!("rhs batching+contracting dims of {r}:"),
            &rhs_all,
            r.rank(),
        )?;
        for (&a, &b) in lhs_batch.iter().zip(rhs_batch) {
            let (sa, sb) = (l.shape[a as usize], r.shape[b as usize]);
            if sa != sb {
                bail!(
                    OP,
                    "batch dims have different sizes {sa} and {sb} (lhs {l}, rhs {r})"
                );
            }
        }
        for (&a, &b) in lhs_contract.iter().zip(rhs_contract) {
            let (sa, sb) = (l.shape[a as usize], r.shape[b as usize]);
            if sa != sb {
                bail!(
                    OP,
                    "contracting dims have different sizes {sa} and {sb} (lhs {l}, rhs {r})"
                );
            }
        }
        let mut shape: Vec<i64> = lhs_batch.iter().map(|&d| l.shape[d as usize]).collect();
        shape.extend(
            (0..l.rank() as i64)
                .filter(|d| !lhs_all.contains(d))
                .map(|d| l.shape[d as usize]),
        );
        shape.extend(
            (0..r.rank() as i64)
                .filter(|d| !rhs_all.contains(d))
                .map(|d| r.shape[d as usize]),
        );

        let mut fields = Vec::new();
        if !lhs_batch.is_empty() {
            fields.push(format!(
                "lhs_batching_dimensions = {}",
                dims_list(lhs_batch)
            ));
            fields.push(format!(
                "rhs_batching_dimensions = {}",
                dims_list(rhs_batch)
            ));
        }
        fields.push(format!(
            "lhs_contracting_dimensions = {}",
            dims_list(lhs_contract)
        ));
        fields.push(format!(
            "rhs_contracting_dimensions = {}",
            dims_list(rhs_contract)
        ));
        let attrs = [(
            "dot_dimension_numbers",
            format!("#stablehlo.dot<{}>", fields.join(", ")),
        )];
        let out = TensorType::new(out_dtype.unwrap_or(l.dtype), shape);
        Ok(self.emit1(OP, &[lhs, rhs], &attrs, out))
    }
}
