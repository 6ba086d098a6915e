//! `stablehlo.fft`: discrete Fourier transforms over the innermost dimensions.

use crate::builder::{Builder, Value};
use crate::error::{bail, Result};
use crate::literal::i64_array;
use crate::types::TensorType;
use crate::DType;

/// The kind of a `stablehlo.fft`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum FftType {
    /// Complex to complex, forward.
    Fft,
    /// Complex to complex, inverse; XLA scales the result by 1/n.
    Ifft,
    /// Real to complex; the last dimension becomes `n/2 + 1`.
    Rfft,
    /// Complex (half spectrum) to real, scaled by 1/n; the last dimension
    /// becomes the last `length`.
    Irfft,
}

impl FftType {
    pub fn mlir(self) -> &'static str {
        match self {
            FftType::Fft => "FFT",
            FftType::Ifft => "IFFT",
            FftType::Rfft => "RFFT",
            FftType::Irfft => "IRFFT",
        }
    }
}

impl Builder {
    /// A transform over the `length.len()` (1 to 3) innermost dimensions of `v`.
    pub fn fft(&mut self, v: Value, kind: FftType, length: &[i64]) -> Result<Value> {
        const OP: &str = "stablehlo.fft";
        let t = self.type_of(OP, v)?;
        let k = length.len();
        if k == 0 || k > 3 || k > t.rank() {
            bail!(OP, "length {length:?} must name 1 to 3 of the innermost dimensions of {t}");
        }
        let inner = t.rank() - k;
        let mut shape = t.shape.clone();
        let dtype = match kind {
            FftType::Fft | FftType::Ifft => {
                if !t.dtype.is_complex() || t.shape[inner..] != *length {
                    bail!(OP, "{} needs complex input with innermost dimensions {length:?}, got {t}", kind.mlir());
                }
                t.dtype
            }
            FftType::Rfft => {
                if !matches!(t.dtype, DType::F32 | DType::F64) || t.shape[inner..] != *length {
                    bail!(OP, "RFFT needs f32/f64 input with innermost dimensions {length:?}, got {t}");
                }
                shape[t.rank() - 1] = length[k - 1] / 2 + 1;
                t.dtype.complex_of()
            }
            FftType::Irfft => {
                let half = length[k - 1] / 2 + 1;
                let leading_ok = t.shape[inner..t.rank() - 1] == length[..k - 1];
                if !t.dtype.is_complex() || !leading_ok || t.shape[t.rank() - 1] != half {
                    bail!(OP, "IRFFT of length {length:?} needs complex input ending in {half}, got {t}");
                }
                shape[t.rank() - 1] = length[k - 1];
                t.dtype.complex_part().expect("complex")
            }
        };
        let attrs = [
            ("fft_type", format!("#stablehlo<fft_type {}>", kind.mlir())),
            ("fft_length", i64_array(length)),
        ];
        Ok(self.emit1(OP, &[v], &attrs, TensorType::new(dtype, shape)))
    }
}
