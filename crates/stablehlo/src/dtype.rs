//! Element types of StableHLO tensors and their properties.
//!
//! Only the element types this project needs are modelled; the MLIR spelling of
//! each is returned by [`DType::mlir`] (signless `iN` for signed integers, `uiN`
//! for unsigned ones, `i1` for booleans).

/// A tensor element type.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    Bool,
    U8,
    U32,
    U64,
    I8,
    I16,
    I32,
    I64,
    F16,
    BF16,
    F32,
    F64,
    /// Complex of two f32 (real, imag), torch.complex64.
    C64,
    /// Complex of two f64, torch.complex128.
    C128,
}

impl DType {
    /// Every real element type, in declaration order (the complex types are
    /// left out: most ops are defined on these only).
    pub const ALL: [DType; 12] = [
        DType::Bool,
        DType::U8,
        DType::U32,
        DType::U64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];

    /// The MLIR spelling used inside `tensor<...>`.
    pub fn mlir(self) -> &'static str {
        match self {
            DType::Bool => "i1",
            DType::U8 => "ui8",
            DType::U32 => "ui32",
            DType::U64 => "ui64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::C64 => "complex<f32>",
            DType::C128 => "complex<f64>",
        }
    }

    /// Bytes one element occupies in a dense host buffer (bool takes one byte).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::U32 | DType::I32 | DType::F32 => 4,
            DType::U64 | DType::I64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    /// Width in bits as StableHLO counts it (bool is 1 bit).
    pub fn bit_width(self) -> u32 {
        match self {
            DType::Bool => 1,
            other => 8 * other.size_bytes() as u32,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }

    /// The float type of each part of a complex type.
    pub fn complex_part(self) -> Option<DType> {
        match self {
            DType::C64 => Some(DType::F32),
            DType::C128 => Some(DType::F64),
            _ => None,
        }
    }

    /// The complex type whose parts are `self` (f16 and bf16 widen to
    /// complex64: there is no complex32 here).
    pub fn complex_of(self) -> DType {
        match self {
            DType::F64 | DType::C128 => DType::C128,
            _ => DType::C64,
        }
    }

    /// Signed or unsigned integer; `Bool` is not an integer here.
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            DType::U8 | DType::U32 | DType::U64 | DType::I8 | DType::I16 | DType::I32 | DType::I64
        )
    }

    /// Whether the type can represent negative values: signed integers and floats.
    pub fn is_signed(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64) || self.is_float()
    }

    pub fn is_unsigned_integer(self) -> bool {
        matches!(self, DType::U8 | DType::U32 | DType::U64)
    }

    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }

    /// (exponent bits, explicit mantissa bits) of a float type.
    pub(crate) fn float_format(self) -> Option<(u32, u32)> {
        match self {
            DType::F16 => Some((5, 10)),
            DType::BF16 => Some((8, 7)),
            DType::F32 => Some((8, 23)),
            DType::F64 => Some((11, 52)),
            _ => None,
        }
    }

    /// Smallest and largest value of an integer or bool type, as i128.
    pub fn int_range(self) -> Option<(i128, i128)> {
        let r = match self {
            DType::Bool => (0, 1),
            DType::U8 => (0, u8::MAX as i128),
            DType::U32 => (0, u32::MAX as i128),
            DType::U64 => (0, u64::MAX as i128),
            DType::I8 => (i8::MIN as i128, i8::MAX as i128),
            DType::I16 => (i16::MIN as i128, i16::MAX as i128),
            DType::I32 => (i32::MIN as i128, i32::MAX as i128),
            DType::I64 => (i64::MIN as i128, i64::MAX as i128),
            _ => return None,
        };
        Some(r)
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.mlir())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_and_sizes() {
        assert_eq!(DType::Bool.mlir(), "i1");
        assert_eq!(DType::U32.mlir(), "ui32");
        assert_eq!(DType::BF16.mlir(), "bf16");
        assert_eq!(DType::U64.size_bytes(), 8);
        assert_eq!(DType::F16.size_bytes(), 2);
        assert!(DType::I8.is_signed() && !DType::U8.is_signed() && !DType::Bool.is_signed());
        assert!(!DType::Bool.is_integer() && DType::U64.is_integer());
        assert!(DType::BF16.is_float() && !DType::I32.is_float());
    }
}
