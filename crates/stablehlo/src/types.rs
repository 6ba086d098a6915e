//! Ranked tensor types: an element type plus a static shape.
//!
//! Invariant: shapes are in elements, row-major, every dimension >= 0 (zero-sized
//! dimensions are allowed). Dynamic dimensions are not modelled.

use crate::dtype::DType;

/// A static ranked tensor type, e.g. `tensor<2x3xf32>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    pub dtype: DType,
    /// Dimension sizes, outermost first.
    pub shape: Vec<i64>,
}

impl TensorType {
    pub fn new(dtype: DType, shape: impl Into<Vec<i64>>) -> Self {
        TensorType {
            dtype,
            shape: shape.into(),
        }
    }

    /// A rank-0 tensor type.
    pub fn scalar(dtype: DType) -> Self {
        TensorType {
            dtype,
            shape: Vec::new(),
        }
    }

    /// Number of elements (1 for rank 0).
    pub fn numel(&self) -> i64 {
        self.shape.iter().product()
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Size in bytes of a dense host buffer holding this tensor.
    pub fn size_bytes(&self) -> usize {
        self.numel().max(0) as usize * self.dtype.size_bytes()
    }
}

impl std::fmt::Display for TensorType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("tensor<")?;
        for d in &self.shape {
            write!(f, "{d}x")?;
        }
        write!(f, "{}>", self.dtype.mlir())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display() {
        assert_eq!(
            TensorType::new(DType::F32, [2, 3]).to_string(),
            "tensor<2x3xf32>"
        );
        assert_eq!(TensorType::scalar(DType::F32).to_string(), "tensor<f32>");
        assert_eq!(
            TensorType::new(DType::Bool, vec![0, 3]).to_string(),
            "tensor<0x3xi1>"
        );
        assert_eq!(TensorType::new(DType::I8, [0, 3]).numel(), 0);
        assert_eq!(TensorType::scalar(DType::I8).numel(), 1);
    }
}
