//! PyTorch's type promotion (torch.result_type), over the dtypes tpu handles.
use stablehlo::DType;

use crate::args::{Operand, PromoClass};

fn category(d: DType) -> u8 {
    match d {
        DType::Bool => 0,
        d if d.is_float() => 2,
        d if d.is_complex() => 3,
        _ => 1,
    }
}

/// torch.promote_types for two dtypes.
pub fn promote_types(a: DType, b: DType) -> DType {
    use DType::*;
    if a == b {
        return a;
    }
    if a.is_complex() || b.is_complex() {
        // The wider of the two parts' float types.
        let part = |d: DType| d.complex_part().unwrap_or(if d == F64 { F64 } else { F32 });
        return if part(a) == F64 || part(b) == F64 { C128 } else { C64 };
    }
    match (category(a), category(b)) {
        (0, _) => return b,
        (_, 0) => return a,
        (2, 1) => return a,
        (1, 2) => return b,
        _ => {}
    }
    if category(a) == 2 {
        // Two different floats.
        return match (a, b) {
            (F16, BF16) | (BF16, F16) => F32,
            _ => {
                if a.size_bytes() >= b.size_bytes() {
                    a
                } else {
                    b
                }
            }
        };
    }
    // Two different integers.
    let rank = |d: DType| match d {
        U8 => 0,
        I8 => 1,
        I16 => 2,
        I32 => 3,
        I64 => 4,
        U32 => 5,
        U64 => 6,
        _ => 0,
    };
    match (a, b) {
        (U8, I8) | (I8, U8) => I16,
        (U8, x) | (x, U8) => x,
        _ => {
            if rank(a) >= rank(b) {
                a
            } else {
                b
            }
        }
    }
}

fn combine(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
    match (higher, lower) {
        // A complex operand of a lower class makes a float result complex at
        // the float's precision (float64 tensor * complex64 scalar: complex128).
        (Some(h), Some(l)) if category(h) == 2 && l.is_complex() => Some(h.complex_of()),
        (Some(h), _) if category(h) >= 2 => Some(h),
        (Some(h), Some(l)) if h == DType::Bool || category(l) >= 2 => Some(promote_types(h, l)),
        (Some(h), _) => Some(h),
        (None, l) => l,
    }
}

/// The result dtype of an elementwise op over these operands (Python
/// floats count as float32, Python ints as int64).
pub fn result_type(operands: &[&Operand]) -> DType {
    let mut classes: [Option<DType>; 3] = [None, None, None];
    for o in operands {
        let (slot, d) = match o.class {
            PromoClass::Dimensioned => (0, o.dtype),
            PromoClass::ZeroDim => (1, o.dtype),
            PromoClass::Wrapped => (
                2,
                match category(o.dtype) {
                    3 => DType::C64,
                    2 => DType::F32,
                    1 => DType::I64,
                    _ => DType::Bool,
                },
            ),
        };
        classes[slot] = Some(match classes[slot] {
            None => d,
            Some(prev) => promote_types(prev, d),
        });
    }
    combine(classes[0], combine(classes[1], classes[2])).unwrap_or(DType::F32)
}

/// Whether a value of `from` may be written into a tensor of `to` by an
/// in-place or out= op (torch.can_cast).
pub fn can_cast(from: DType, to: DType) -> bool {
    category(from) <= category(to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stablehlo::{Builder, TensorType};

    fn op(d: DType, class: PromoClass) -> Operand {
        let mut b = Builder::new();
        let value = b.arg(TensorType::scalar(d));
        Operand { value, dtype: d, shape: vec![], class }
    }

    #[test]
    fn promotion_matches_torch() {
        use DType::*;
        use PromoClass::*;
        assert_eq!(result_type(&[&op(I64, Dimensioned), &op(F64, Wrapped)]), F32);
        assert_eq!(result_type(&[&op(C64, Dimensioned), &op(F64, Dimensioned)]), C128);
        assert_eq!(result_type(&[&op(C64, Dimensioned), &op(F64, Wrapped)]), C64);
        assert_eq!(result_type(&[&op(F64, Dimensioned), &op(C64, ZeroDim)]), C128);
        assert_eq!(result_type(&[&op(BF16, Dimensioned), &op(C64, Dimensioned)]), C64);
        assert_eq!(result_type(&[&op(I32, Dimensioned), &op(C128, ZeroDim)]), C128);
        assert_eq!(result_type(&[&op(F16, Dimensioned), &op(F64, Wrapped)]), F16);
        assert_eq!(result_type(&[&op(I32, Dimensioned), &op(I64, Wrapped)]), I32);
        assert_eq!(result_type(&[&op(Bool, Dimensioned), &op(I64, Wrapped)]), I64);
        assert_eq!(result_type(&[&op(F32, Dimensioned), &op(F64, ZeroDim)]), F32);
        assert_eq!(result_type(&[&op(I64, Dimensioned), &op(F64, ZeroDim)]), F64);
        assert_eq!(result_type(&[&op(U8, Dimensioned), &op(I8, Dimensioned)]), I16);
        assert_eq!(result_type(&[&op(F16, Dimensioned), &op(BF16, Dimensioned)]), F32);
        assert_eq!(promote_types(I32, F16), F16);
    }
}
