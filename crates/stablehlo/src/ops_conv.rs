//! `stablehlo.convolution`: N-d grouped, strided, dilated, padded convolution
//! with explicit dimension numbers.
//!
//! Printed as e.g.
//! `dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>`,
//! each list naming, per dimension of that tensor, its role.

use crate::builder::{Builder, Value};
use crate::error::{bail, Result};
use crate::literal::{dense, i64_array};
use crate::types::TensorType;
use crate::DType;

const OP: &str = "stablehlo.convolution";

/// Which dimension of each tensor plays which role. `*_spatial[k]` of lhs,
/// rhs and output all refer to spatial dimension `k`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvDims {
    pub lhs_batch: i64,
    pub lhs_feature: i64,
    pub lhs_spatial: Vec<i64>,
    pub rhs_out_feature: i64,
    pub rhs_in_feature: i64,
    pub rhs_spatial: Vec<i64>,
    pub out_batch: i64,
    pub out_feature: i64,
    pub out_spatial: Vec<i64>,
}

impl ConvDims {
    /// PyTorch's layout: input `[N, C, *]`, weight `[O, I, *]`, output `[N, O, *]`.
    pub fn nchw(spatial: usize) -> Self {
        let s: Vec<i64> = (2..2 + spatial as i64).collect();
        ConvDims {
            lhs_batch: 0,
            lhs_feature: 1,
            lhs_spatial: s.clone(),
            rhs_out_feature: 0,
            rhs_in_feature: 1,
            rhs_spatial: s.clone(),
            out_batch: 0,
            out_feature: 1,
            out_spatial: s,
        }
    }

    fn labels(rank: usize, a: (i64, &str), b: (i64, &str), spatial: &[i64]) -> Result<String> {
        let mut l = vec![String::new(); rank];
        let mut put = |d: i64, s: String| -> Result<()> {
            match l.get_mut(d as usize) {
                Some(slot) if d >= 0 && slot.is_empty() => {
                    *slot = s;
                    Ok(())
                }
                _ => bail!(OP, "dimension {d} is out of range or used twice (rank {rank})"),
            }
        };
        put(a.0, a.1.to_string())?;
        put(b.0, b.1.to_string())?;
        for (k, &d) in spatial.iter().enumerate() {
            put(d, k.to_string())?;
        }
        Ok(format!("[{}]", l.join(", ")))
    }
}

/// Window attributes of one convolution. Empty vectors mean all ones / no padding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConvWindow {
    pub strides: Vec<i64>,
    /// `(low, high)` per spatial dimension; may be negative.
    pub padding: Vec<(i64, i64)>,
    pub lhs_dilation: Vec<i64>,
    pub rhs_dilation: Vec<i64>,
    pub feature_group_count: i64,
    pub batch_group_count: i64,
}

fn filled(v: &[i64], n: usize, what: &str) -> Result<Vec<i64>> {
    if v.is_empty() {
        return Ok(vec![1; n]);
    }
    if v.len() != n {
        bail!(OP, "{what} {v:?} must have {n} entries");
    }
    if v.iter().any(|&x| x <= 0) {
        bail!(OP, "{what} {v:?} must be positive");
    }
    Ok(v.to_vec())
}

impl Builder {
    /// `stablehlo.convolution` of `lhs` (input) with `rhs` (kernel); both share
    /// an element type, which the result has.
    pub fn convolution(
        &mut self,
        lhs: Value,
        rhs: Value,
        dims: &ConvDims,
        window: &ConvWindow,
    ) -> Result<Value> {
        let (l, r) = (self.type_of(OP, lhs)?, self.type_of(OP, rhs)?);
        if l.dtype != r.dtype {
            bail!(OP, "lhs {l} and rhs {r} must have the same element type");
        }
        let n = dims.lhs_spatial.len();
        if l.rank() != n + 2 || r.rank() != n + 2 || dims.rhs_spatial.len() != n || dims.out_spatial.len() != n {
            bail!(OP, "lhs {l} and rhs {r} must both have rank {} for dimension numbers {dims:?}", n + 2);
        }
        let lhs_l = ConvDims::labels(n + 2, (dims.lhs_batch, "b"), (dims.lhs_feature, "f"), &dims.lhs_spatial)?;
        let rhs_l = ConvDims::labels(n + 2, (dims.rhs_out_feature, "o"), (dims.rhs_in_feature, "i"), &dims.rhs_spatial)?;
        let out_l = ConvDims::labels(n + 2, (dims.out_batch, "b"), (dims.out_feature, "f"), &dims.out_spatial)?;
        let strides = filled(&window.strides, n, "window_strides")?;
        let lhs_dil = filled(&window.lhs_dilation, n, "lhs_dilation")?;
        let rhs_dil = filled(&window.rhs_dilation, n, "rhs_dilation")?;
        let padding = if window.padding.is_empty() { vec![(0, 0); n] } else { window.padding.clone() };
        if padding.len() != n {
            bail!(OP, "padding {padding:?} must have {n} entries");
        }
        let (fg, bg) = (window.feature_group_count.max(1), window.batch_group_count.max(1));
        if fg > 1 && bg > 1 {
            bail!(OP, "feature_group_count {fg} and batch_group_count {bg} cannot both exceed 1");
        }
        let batch = l.shape[dims.lhs_batch as usize];
        let in_f = l.shape[dims.lhs_feature as usize];
        let k_in = r.shape[dims.rhs_in_feature as usize];
        let k_out = r.shape[dims.rhs_out_feature as usize];
        if in_f != k_in * fg || k_out % fg != 0 {
            bail!(OP, "lhs {l} features must equal rhs {r} input features times feature_group_count {fg}, and output features must divide by it");
        }
        if batch % bg != 0 || k_out % bg != 0 {
            bail!(OP, "batch of lhs {l} and output features of rhs {r} must divide by batch_group_count {bg}");
        }
        let mut shape = vec![0; n + 2];
        shape[dims.out_batch as usize] = batch / bg;
        shape[dims.out_feature as usize] = k_out;
        for k in 0..n {
            let x = l.shape[dims.lhs_spatial[k] as usize];
            let w = r.shape[dims.rhs_spatial[k] as usize];
            let dilated = if x == 0 { 0 } else { (x - 1) * lhs_dil[k] + 1 };
            let padded = padding[k].0 + dilated + padding[k].1;
            let dw = if w == 0 { 0 } else { (w - 1) * rhs_dil[k] + 1 };
            shape[dims.out_spatial[k] as usize] = if padded < dw || padded < 0 { 0 } else { (padded - dw) / strides[k] + 1 };
        }
        let flat: Vec<String> = padding.iter().flat_map(|&(a, b)| [a.to_string(), b.to_string()]).collect();
        let attrs = [
            ("window_strides", i64_array(&strides)),
            ("padding", dense(&TensorType::new(DType::I64, [n as i64, 2]), &flat)),
            ("lhs_dilation", i64_array(&lhs_dil)),
            ("rhs_dilation", i64_array(&rhs_dil)),
            ("dimension_numbers", format!("#stablehlo.conv<{lhs_l}x{rhs_l}->{out_l}>")),
            ("feature_group_count", format!("{fg} : i64")),
            ("batch_group_count", format!("{bg} : i64")),
        ];
        Ok(self.emit1(OP, &[lhs, rhs], &attrs, TensorType::new(l.dtype, shape)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv2d_shape_and_text() {
        let mut b = Builder::new();
        let x = b.arg(TensorType::new(DType::F32, [2, 4, 9, 9]));
        let w = b.arg(TensorType::new(DType::F32, [6, 2, 3, 3]));
        let win = ConvWindow {
            strides: vec![2, 2],
            padding: vec![(1, 1), (1, 1)],
            feature_group_count: 2,
            ..Default::default()
        };
        let y = b.convolution(x, w, &ConvDims::nchw(2), &win).unwrap();
        assert_eq!(b.ty(y).to_string(), "tensor<2x6x5x5xf32>");
        let text = b.finish(&[y]);
        assert!(text.contains("#stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>"), "{text}");
        assert!(text.contains("feature_group_count = 2 : i64"));
    }
}
