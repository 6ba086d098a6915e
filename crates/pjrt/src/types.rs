//! [`ElementType`]: the array element types PJRT knows, with their
//! `PJRT_Buffer_Type` values and byte widths.

use crate::error::{Error, Result};
use crate::ffi::PJRT_Buffer_Type;

/// Element type of a device buffer. Discriminants are the `PJRT_Buffer_Type`
/// values of the C API (`PJRT_Buffer_Type_INVALID` = 0 is deliberately not
/// representable: the plugin aborts on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ElementType {
    /// Boolean, one byte per element (0 or 1).
    Pred = 1,
    S8 = 2,
    S16 = 3,
    S32 = 4,
    S64 = 5,
    U8 = 6,
    U16 = 7,
    U32 = 8,
    U64 = 9,
    F16 = 10,
    F32 = 11,
    F64 = 12,
    BF16 = 13,
    /// Complex of two f32 (real, imag).
    C64 = 14,
    /// Complex of two f64 (real, imag).
    C128 = 15,
    F8E5M2 = 16,
    F8E4M3FN = 17,
    F8E4M3B11FNUZ = 18,
    F8E5M2FNUZ = 19,
    F8E4M3FNUZ = 20,
    S4 = 21,
    U4 = 22,
    Token = 23,
    S2 = 24,
    U2 = 25,
    F8E4M3 = 26,
    F8E3M4 = 27,
    F8E8M0FNU = 28,
    F4E2M1FN = 29,
}

impl ElementType {
    /// All variants, in `PJRT_Buffer_Type` order.
    pub const ALL: [ElementType; 29] = [
        ElementType::Pred,
        ElementType::S8,
        ElementType::S16,
        ElementType::S32,
        ElementType::S64,
        ElementType::U8,
        ElementType::U16,
        ElementType::U32,
        ElementType::U64,
        ElementType::F16,
        ElementType::F32,
        ElementType::F64,
        ElementType::BF16,
        ElementType::C64,
        ElementType::C128,
        ElementType::F8E5M2,
        ElementType::F8E4M3FN,
        ElementType::F8E4M3B11FNUZ,
        ElementType::F8E5M2FNUZ,
        ElementType::F8E4M3FNUZ,
        ElementType::S4,
        ElementType::U4,
        ElementType::Token,
        ElementType::S2,
        ElementType::U2,
        ElementType::F8E4M3,
        ElementType::F8E3M4,
        ElementType::F8E8M0FNU,
        ElementType::F4E2M1FN,
    ];

    /// The `PJRT_Buffer_Type` value.
    pub fn as_raw(self) -> PJRT_Buffer_Type {
        self as i32
    }

    /// Maps a `PJRT_Buffer_Type` value back; `None` for INVALID or unknown.
    pub fn from_raw(raw: PJRT_Buffer_Type) -> Option<ElementType> {
        if (1..=29).contains(&raw) {
            Some(Self::ALL[(raw - 1) as usize])
        } else {
            None
        }
    }

    pub(crate) fn try_from_raw(raw: PJRT_Buffer_Type) -> Result<ElementType> {
        Self::from_raw(raw).ok_or_else(|| {
            Error::internal(format!(
                "PJRT plugin reported unknown buffer element type {raw}"
            ))
        })
    }

    /// Bytes per element in a dense host buffer, or `None` for sub-byte types
    /// (S2/U2/S4/U4/F4E2M1FN) and Token, whose host size this crate does not
    /// compute itself.
    pub fn byte_width(self) -> Option<usize> {
        use ElementType::*;
        match self {
            Pred | S8 | U8 | F8E5M2 | F8E4M3FN | F8E4M3B11FNUZ | F8E5M2FNUZ | F8E4M3FNUZ
            | F8E4M3 | F8E3M4 | F8E8M0FNU => Some(1),
            S16 | U16 | F16 | BF16 => Some(2),
            S32 | U32 | F32 => Some(4),
            S64 | U64 | F64 | C64 => Some(8),
            C128 => Some(16),
            S4 | U4 | S2 | U2 | F4E2M1FN | Token => None,
        }
    }
}

/// Number of elements of an array with these dimensions; errors on negative
/// dimensions or overflow.
pub(crate) fn element_count(dims: &[i64]) -> Result<usize> {
    let mut n: usize = 1;
    for &d in dims {
        let d = usize::try_from(d)
            .map_err(|_| Error::invalid_argument(format!("negative dimension in {dims:?}")))?;
        n = n
            .checked_mul(d)
            .ok_or_else(|| Error::invalid_argument(format!("dimensions {dims:?} overflow")))?;
    }
    Ok(n)
}

/// Dense host byte size of an array, if the element type has a byte width.
pub(crate) fn dense_byte_size(ty: ElementType, dims: &[i64]) -> Result<Option<usize>> {
    let n = element_count(dims)?;
    match ty.byte_width() {
        Some(w) => n
            .checked_mul(w)
            .map(Some)
            .ok_or_else(|| Error::invalid_argument(format!("dimensions {dims:?} overflow"))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_round_trip() {
        for t in ElementType::ALL {
            assert_eq!(ElementType::from_raw(t.as_raw()), Some(t));
        }
        assert_eq!(ElementType::from_raw(0), None);
        assert_eq!(ElementType::from_raw(30), None);
        assert_eq!(ElementType::F32.as_raw(), 11);
        assert_eq!(ElementType::BF16.as_raw(), 13);
        assert_eq!(ElementType::F4E2M1FN.as_raw(), 29);
    }

    #[test]
    fn sizes() {
        assert_eq!(
            dense_byte_size(ElementType::F32, &[2, 3]).unwrap(),
            Some(24)
        );
        assert_eq!(dense_byte_size(ElementType::F64, &[]).unwrap(), Some(8));
        assert_eq!(dense_byte_size(ElementType::S4, &[4]).unwrap(), None);
        assert_eq!(dense_byte_size(ElementType::F32, &[0, 5]).unwrap(), Some(0));
        assert!(dense_byte_size(ElementType::F32, &[-1]).is_err());
        assert!(dense_byte_size(ElementType::F64, &[i64::MAX, i64::MAX]).is_err());
    }
}
