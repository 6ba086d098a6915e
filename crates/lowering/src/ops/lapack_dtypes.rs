//! The dtypes the linear algebra lowerings take: those LAPACK takes on the
//! CPU (float32/float64/complex64/complex128). Others raise what the CPU
//! raises, NotImplementedError, naming the dtype as torch does.
use stablehlo::DType;

use crate::bail;
use crate::error::Result;

/// Ok for a LAPACK dtype; otherwise the error `api` (e.g. "linalg.solve")
/// raises for `dtype`.
pub(super) fn check(api: &str, dtype: DType) -> Result<()> {
    let name = super::elementwise::type_name(dtype);
    match dtype {
        DType::F32 | DType::F64 | DType::C64 | DType::C128 => Ok(()),
        DType::F16 | DType::BF16 => bail!(
            NotImplemented,
            "{api}: Low precision dtypes not supported. Got {name} (tpu supports float32/float64/complex64/complex128)"
        ),
        _ => bail!(NotImplemented, "{api}: Expected a floating point or complex tensor as input. Got {name}"),
    }
}
