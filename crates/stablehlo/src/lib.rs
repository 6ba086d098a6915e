//! Build StableHLO programs in memory and print them as MLIR text.
//!
//! A [`Builder`] records ops (each checked by shape and dtype inference, returning
//! [`Error`] on mismatch) and [`Builder::finish`] prints a module with one
//! `func.func @main` in MLIR *generic* op form, e.g.
//! `%3 = "stablehlo.add"(%1, %2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>`,
//! which any StableHLO 1.x parser (e.g. the XLA PJRT plugins, format "mlir") accepts.
//!
//! Conventions: shapes are in elements, row-major, static; dimensions are
//! numbered from 0 (outermost); no implicit broadcasting.
//!
//! ```
//! use stablehlo::{Builder, DType, TensorType};
//! let mut b = Builder::new();
//! let x = b.arg(TensorType::new(DType::F32, [2, 3]));
//! let y = b.arg(TensorType::new(DType::F32, [3]));
//! let yb = b.broadcast_to(y, &[2, 3])?;
//! let p = b.mul(x, yb)?;
//! let s = b.reduce_sum(p, &[1])?;
//! assert_eq!(b.ty(s).to_string(), "tensor<2xf32>");
//! assert!(b.add(x, y).is_err()); // no implicit broadcasting
//! let text = b.finish(&[s]);
//! assert!(text.contains(r#""stablehlo.reduce"(%1, %2)"#));
//! # Ok::<(), stablehlo::Error>(())
//! ```

mod builder;
mod check;
mod dtype;
mod error;
pub mod literal;
mod math_erf;
mod ops_const;
mod ops_control;
mod ops_conv;
mod ops_dot;
mod ops_elementwise;
mod ops_fft;
mod ops_index;
mod ops_linalg;
mod ops_misc;
mod ops_reduce;
mod ops_shape;
mod types;

pub use builder::{Builder, Mark, Value};
pub use dtype::DType;
pub use error::{Error, Result};
pub use ops_conv::{ConvDims, ConvWindow};
pub use ops_elementwise::CompareDir;
pub use ops_fft::FftType;
pub use ops_index::{GatherDims, ScatterDims};
pub use ops_linalg::Transpose;
pub use ops_misc::RngAlgorithm;
pub use ops_shape::broadcast_shapes;
pub use types::TensorType;
