//! Shape-manipulating ops: broadcast_in_dim, reshape, transpose, slice,
//! concatenate, pad, reverse, plus numpy-style broadcasting helpers.

use crate::builder::{Builder, Value};
use crate::check::{dims_valid, is_scalar, shape_valid};
use crate::error::{bail, Result};
use crate::literal::i64_array;
use crate::types::TensorType;

/// Numpy broadcasting of two shapes (right-aligned; each pair of dimensions
/// must be equal or one of them 1).
pub fn broadcast_shapes(a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
    let rank = a.len().max(b.len());
    let mut out = vec![0; rank];
    for i in 0..rank {
        let da = if i < rank - a.len() {
            1
        } else {
            a[i - (rank - a.len())]
        };
        let db = if i < rank - b.len() {
            1
        } else {
            b[i - (rank - b.len())]
        };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => bail!(
                "broadcast_shapes",
                "shapes {a:?} and {b:?} are not broadcast-compatible"
            ),
        };
    }
    Ok(out)
}

impl Builder {
    /// Numpy broadcasting of two shapes; see [`broadcast_shapes`].
    pub fn broadcast_shapes(&self, a: &[i64], b: &[i64]) -> Result<Vec<i64>> {
        broadcast_shapes(a, b)
    }

    /// `stablehlo.broadcast_in_dim`: operand dimension `i` maps to result
    /// dimension `dims[i]` and must be 1 or equal to it.
    pub fn broadcast_in_dim(&mut self, v: Value, shape: &[i64], dims: &[i64]) -> Result<Value> {
        const OP: &str = "stablehlo.broadcast_in_dim";
        let t = self.type_of(OP, v)?;
        shape_valid(OP, shape)?;
        if dims.len() != t.rank() {
            bail!(
                OP,
                "broadcast_dimensions {dims:?} must have one entry per dimension of {t}"
            );
        }
        dims_valid(OP, "broadcast_dimensions", dims, shape.len())?;
        for (i, &d) in dims.iter().enumerate() {
            if t.shape[i] != 1 && t.shape[i] != shape[d as usize] {
                bail!(
                    OP,
                    "operand {t} dimension {i} cannot broadcast to dimension {d} of {shape:?}"
                );
            }
        }
        let attrs = [("broadcast_dimensions", i64_array(dims))];
        Ok(self.emit1(OP, &[v], &attrs, TensorType::new(t.dtype, shape)))
    }

    /// Numpy-style broadcast of `v` to `shape` (right-aligned). Returns `v`
    /// unchanged if it already has that shape.
    pub fn broadcast_to(&mut self, v: Value, shape: &[i64]) -> Result<Value> {
        const OP: &str = "broadcast_to";
        let t = self.type_of(OP, v)?;
        if t.shape == shape {
            return Ok(v);
        }
        let ok = t.rank() <= shape.len()
            && broadcast_shapes(&t.shape, shape)
                .map(|s| s == shape)
                .unwrap_or(false);
        if !ok {
            bail!(OP, "cannot broadcast {t} to shape {shape:?}");
        }
        let offset = (shape.len() - t.rank()) as i64;
        let dims: Vec<i64> = (0..t.rank() as i64).map(|i| i + offset).collect();
        self.broadcast_in_dim(v, shape, &dims)
    }

    /// `stablehlo.reshape` to a shape with the same element count.
    pub fn reshape(&mut self, v: Value, shape: &[i64]) -> Result<Value> {
        const OP: &str = "stablehlo.reshape";
        let t = self.type_of(OP, v)?;
        shape_valid(OP, shape)?;
        let out = TensorType::new(t.dtype, shape);
        if out.numel() != t.numel() {
            bail!(
                OP,
                "cannot reshape {t} ({} elements) to {out} ({} elements)",
                t.numel(),
                out.numel()
            );
        }
        Ok(self.emit1(OP, &[v], &[], out))
    }

    /// `stablehlo.transpose`: result dimension `i` is operand dimension `perm[i]`.
    pub fn transpose(&mut self, v: Value, perm: &[i64]) -> Result<Value> {
        const OP: &str = "stablehlo.transpose";
        let t = self.type_of(OP, v)?;
        if perm.len() != t.rank() {
            bail!(
                OP,
                "permutation {perm:?} is not a permutation of the dimensions of {t}"
            );
        }
        dims_valid(OP, "permutation", perm, t.rank())?;
        let shape: Vec<i64> = perm.iter().map(|&p| t.shape[p as usize]).collect();
        let attrs = [("permutation", i64_array(perm))];
        Ok(self.emit1(OP, &[v], &attrs, TensorType::new(t.dtype, shape)))
    }

    /// `stablehlo.slice` of `[start, limit)` with `strides` (empty `strides`
    /// means all 1).
    pub fn slice(
        &mut self,
        v: Value,
        start: &[i64],
        limit: &[i64],
        strides: &[i64],
    ) -> Result<Value> {
        const OP: &str = "stablehlo.slice";
        let t = self.type_of(OP, v)?;
        let ones = vec![1; t.rank()];
        let strides = if strides.is_empty() {
            &ones[..]
        } else {
            strides
        };
        if start.len() != t.rank() || limit.len() != t.rank() || strides.len() != t.rank() {
            bail!(OP, "start {start:?}, limit {limit:?} and strides {strides:?} must each have rank {} entries for {t}", t.rank());
        }
        let mut shape = Vec::with_capacity(t.rank());
        for i in 0..t.rank() {
            let (s, l, st) = (start[i], limit[i], strides[i]);
            if s < 0 || s > l || l > t.shape[i] || st <= 0 {
                bail!(
                    OP,
                    "invalid slice of {t} in dimension {i}: start {s}, limit {l}, stride {st}"
                );
            }
            shape.push((l - s + st - 1) / st);
        }
        let attrs = [
            ("start_indices", i64_array(start)),
            ("limit_indices", i64_array(limit)),
            ("strides", i64_array(strides)),
        ];
        Ok(self.emit1(OP, &[v], &attrs, TensorType::new(t.dtype, shape)))
    }

    /// `stablehlo.concatenate` along `dim`; all inputs share dtype, rank and
    /// every other dimension.
    pub fn concatenate(&mut self, inputs: &[Value], dim: i64) -> Result<Value> {
        const OP: &str = "stablehlo.concatenate";
        let Some(&first) = inputs.first() else {
            bail!(OP, "needs at least one input")
        };
        let t0 = self.type_of(OP, first)?;
        if dim < 0 || dim as usize >= t0.rank() {
            bail!(OP, "dimension {dim} out of range for {t0}");
        }
        let d = dim as usize;
        let mut shape = t0.shape.clone();
        shape[d] = 0;
        for &v in inputs {
            let t = self.type_of(OP, v)?;
            let compatible = t.dtype == t0.dtype
                && t.rank() == t0.rank()
                && (0..t.rank()).all(|i| i == d || t.shape[i] == t0.shape[i]);
            if !compatible {
                bail!(OP, "cannot concatenate {t0} and {t} along dimension {dim}");
            }
            shape[d] += t.shape[d];
        }
        let attrs = [("dimension", format!("{dim} : i64"))];
        Ok(self.emit1(OP, inputs, &attrs, TensorType::new(t0.dtype, shape)))
    }

    /// `stablehlo.pad` with edge padding `lo`/`hi` (may be negative) and
    /// `interior` padding (>= 0) between elements; `pad_value` is rank 0.
    pub fn pad(
        &mut self,
        v: Value,
        pad_value: Value,
        lo: &[i64],
        hi: &[i64],
        interior: &[i64],
    ) -> Result<Value> {
        const OP: &str = "stablehlo.pad";
        let t = self.type_of(OP, v)?;
        let p = self.type_of(OP, pad_value)?;
        is_scalar(OP, "padding value", &p)?;
        if p.dtype != t.dtype {
            bail!(OP, "padding value {p} must have the element type of {t}");
        }
        let r = t.rank();
        if lo.len() != r || hi.len() != r || interior.len() != r {
            bail!(
                OP,
                "lo {lo:?}, hi {hi:?} and interior {interior:?} must each have {r} entries for {t}"
            );
        }
        let mut shape = Vec::with_capacity(r);
        for i in 0..r {
            if interior[i] < 0 {
                bail!(OP, "interior padding {interior:?} must be non-negative");
            }
            let n = t.shape[i];
            let size = lo[i] + n + (n - 1).max(0) * interior[i] + hi[i];
            if size < 0 {
                bail!(
                    OP,
                    "padding {t} with lo {lo:?}, hi {hi:?} gives negative dimension {i}"
                );
            }
            shape.push(size);
        }
        let attrs = [
            ("edge_padding_low", i64_array(lo)),
            ("edge_padding_high", i64_array(hi)),
            ("interior_padding", i64_array(interior)),
        ];
        Ok(self.emit1(OP, &[v, pad_value], &attrs, TensorType::new(t.dtype, shape)))
    }

    /// `stablehlo.reverse` along `dims`.
    pub fn reverse(&mut self, v: Value, dims: &[i64]) -> Result<Value> {
        const OP: &str = "stablehlo.reverse";
        let t = self.type_of(OP, v)?;
        dims_valid(OP, "dimensions", dims, t.rank())?;
        let attrs = [("dimensions", i64_array(dims))];
        Ok(self.emit1(OP, &[v], &attrs, t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_broadcasting() {
        assert_eq!(
            broadcast_shapes(&[2, 1, 3], &[4, 1]).unwrap(),
            vec![2, 4, 3]
        );
        assert_eq!(broadcast_shapes(&[], &[5]).unwrap(), vec![5]);
        assert_eq!(broadcast_shapes(&[0], &[1]).unwrap(), vec![0]);
        let e = broadcast_shapes(&[2, 3], &[4]).unwrap_err();
        assert!(
            e.to_string().contains("[2, 3]") && e.to_string().contains("[4]"),
            "{e}"
        );
    }
}
