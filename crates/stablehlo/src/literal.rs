//! Printing of attribute literals: dense i64 arrays, dimension lists, and the
//! element values of `dense<...>` constants.
//!
//! Float elements always print in a form MLIR parses back to the exact same bits:
//! finite f32/f64 values print as the shortest decimal that round-trips the value
//! *as an f64* (an f32 widened to f64 is exact, so MLIR's decimal → f64 → f32 path
//! is exact too); non-finite values, negative zero and every f16/bf16 value print
//! as a hex bit pattern (`0x7F800000`).

use crate::dtype::DType;
use crate::types::TensorType;

/// `array<i64: 1, 0>` (or `array<i64>` when empty).
pub(crate) fn i64_array(values: &[i64]) -> String {
    if values.is_empty() {
        return "array<i64>".to_string();
    }
    format!("array<i64: {}>", join(values))
}

/// `[1, 2, 3]` as used inside `#stablehlo.dot<...>` and friends.
pub(crate) fn dims_list(values: &[i64]) -> String {
    format!("[{}]", join(values))
}

pub(crate) fn join<T: std::fmt::Display>(values: &[T]) -> String {
    values
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rounds `v` to the nearest value (ties to even) of a binary float format with
/// `ebits` exponent bits and `mbits` explicit mantissa bits; returns its bits.
/// Overflow gives infinity, NaN gives a quiet NaN, subnormals are kept.
pub fn f64_to_float_bits(v: f64, ebits: u32, mbits: u32) -> u64 {
    let sign = (v.to_bits() >> 63) << (ebits + mbits);
    let exp_ones: u64 = (1u64 << ebits) - 1;
    if v.is_nan() {
        return sign | (exp_ones << mbits) | (1u64 << (mbits - 1));
    }
    if v.is_infinite() {
        return sign | (exp_ones << mbits);
    }
    if v == 0.0 {
        return sign;
    }
    if ebits == 11 && mbits == 52 {
        return v.to_bits();
    }
    let bits = v.abs().to_bits();
    let (efield, frac) = ((bits >> 52) as i64, bits & ((1u64 << 52) - 1));
    // |v| = m * 2^e with m an integer.
    let (m, e) = if efield == 0 {
        (frac, -1074i64)
    } else {
        (frac | (1u64 << 52), efield - 1075)
    };
    let lg = e + 63 - m.leading_zeros() as i64; // floor(log2 |v|)
    let bias = (1i64 << (ebits - 1)) - 1;
    let target_exp = lg.max(1 - bias);
    let quantum_exp = target_exp - mbits as i64;
    let shift = quantum_exp - e; // > 0 because mbits < 52
    let q: u64 = if shift >= 64 {
        0
    } else {
        let q = m >> shift;
        let rem = m & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        if rem > half || (rem == half && q & 1 == 1) {
            q + 1
        } else {
            q
        }
    };
    // Works for subnormals (target_exp = 1 - bias) and carries into the exponent.
    let mag = (((target_exp + bias - 1) as u64) << mbits) + q;
    let inf = exp_ones << mbits;
    sign | mag.min(inf)
}

/// Bits of a float format back to f64 (exact for all formats up to f64).
pub fn float_bits_to_f64(bits: u64, ebits: u32, mbits: u32) -> f64 {
    let sign = if (bits >> (ebits + mbits)) & 1 == 1 {
        -1.0
    } else {
        1.0
    };
    let efield = ((bits >> mbits) & ((1u64 << ebits) - 1)) as i64;
    let frac = bits & ((1u64 << mbits) - 1);
    let bias = (1i64 << (ebits - 1)) - 1;
    if efield == (1i64 << ebits) - 1 {
        return if frac == 0 {
            sign * f64::INFINITY
        } else {
            f64::NAN
        };
    }
    let (m, e) = if efield == 0 {
        (frac as f64, 1 - bias - mbits as i64)
    } else {
        (
            (frac | (1u64 << mbits)) as f64,
            efield - bias - mbits as i64,
        )
    };
    sign * m * (2f64).powi(e as i32)
}

/// One float element of a dense literal.
fn float_element(dtype: DType, v: f64) -> String {
    let (ebits, mbits) = dtype.float_format().expect("float dtype");
    let bits = f64_to_float_bits(v, ebits, mbits);
    let exact = float_bits_to_f64(bits, ebits, mbits);
    let hex_digits = ((ebits + mbits + 1) / 4) as usize;
    let decimal_ok = matches!(dtype, DType::F32 | DType::F64)
        && exact.is_finite()
        && !(exact == 0.0 && exact.is_sign_negative());
    if !decimal_ok {
        return format!("0x{:0width$X}", bits, width = hex_digits);
    }
    let s = format!("{:e}", exact);
    let (mant, exp) = s.split_once('e').expect("{:e} has an exponent");
    if mant.contains('.') {
        format!("{mant}e{exp}")
    } else {
        format!("{mant}.0e{exp}")
    }
}

/// Wraps an integer to the width of `dtype` (two's complement) and prints it.
fn int_element(dtype: DType, v: i128) -> String {
    if dtype == DType::Bool {
        return if v != 0 { "true" } else { "false" }.to_string();
    }
    let width = dtype.bit_width();
    let mask = (1i128 << width) - 1;
    let low = v & mask;
    if dtype.is_signed() && low >> (width - 1) == 1 {
        (low - (1i128 << width)).to_string()
    } else {
        low.to_string()
    }
}

/// A literal element from an f64: floats round to the dtype, integers truncate
/// toward zero and saturate to the dtype's range (NaN → 0), bool is `v != 0`.
pub(crate) fn element_from_f64(dtype: DType, v: f64) -> String {
    if let Some(part) = dtype.complex_part() {
        // A real value: imaginary part zero.
        format!("({}, {})", float_element(part, v), float_element(part, 0.0))
    } else if dtype.is_float() {
        float_element(dtype, v)
    } else if dtype == DType::Bool {
        int_element(dtype, (v != 0.0) as i128)
    } else {
        let (lo, hi) = dtype.int_range().expect("integer dtype");
        int_element(dtype, (v as i128).clamp(lo, hi))
    }
}

/// A literal element from an i64: integers wrap to the dtype's width, floats
/// round to nearest.
pub(crate) fn element_from_i64(dtype: DType, v: i64) -> String {
    if dtype.is_float() || dtype.is_complex() {
        element_from_f64(dtype, v as f64)
    } else {
        int_element(dtype, v as i128)
    }
}

/// `dense<...> : tensor<...>` from already-printed row-major elements.
/// An empty tensor prints as `dense<>`; rank 0 prints the single element bare.
pub(crate) fn dense(ty: &TensorType, elements: &[String]) -> String {
    debug_assert_eq!(elements.len() as i64, ty.numel());
    if ty.numel() == 0 {
        return format!("dense<> : {ty}");
    }
    let mut out = String::from("dense<");
    nest(&ty.shape, elements, &mut out);
    out.push_str(&format!("> : {ty}"));
    out
}

fn nest(shape: &[i64], elements: &[String], out: &mut String) {
    match shape.split_first() {
        None => out.push_str(&elements[0]),
        Some((&d, rest)) => {
            let chunk = elements.len() / d as usize;
            out.push('[');
            for i in 0..d as usize {
                if i > 0 {
                    out.push_str(", ");
                }
                nest(rest, &elements[i * chunk..(i + 1) * chunk], out);
            }
            out.push(']');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_rounding_matches_rust_casts() {
        let samples = [
            0.0,
            1.0,
            -1.5,
            0.1,
            1e-40,
            3.4e38,
            3.5e38,
            1e-46,
            7.0e-46,
            65504.0,
            65520.0,
            1e-8,
            6.1e-5,
            123456.789,
            -2.0f64.powi(-149),
            f64::MIN_POSITIVE,
        ];
        for &v in &samples {
            assert_eq!(
                f64_to_float_bits(v, 8, 23) as u32,
                (v as f32).to_bits(),
                "{v}"
            );
            let back = float_bits_to_f64(f64_to_float_bits(v, 8, 23), 8, 23);
            assert_eq!(back, (v as f32) as f64, "{v}");
        }
        assert_eq!(f64_to_float_bits(1.0, 8, 7), 0x3F80);
        assert_eq!(f64_to_float_bits(1.0, 5, 10), 0x3C00);
        assert_eq!(f64_to_float_bits(65504.0, 5, 10), 0x7BFF);
        assert_eq!(f64_to_float_bits(65520.0, 5, 10), 0x7C00); // rounds to inf
        assert_eq!(f64_to_float_bits(2f64.powi(-24), 5, 10), 0x0001); // smallest subnormal
        assert_eq!(f64_to_float_bits(1.0 + 2f64.powi(-8), 8, 7), 0x3F80); // tie to even
        assert_eq!(f64_to_float_bits(1.0 + 3.0 * 2f64.powi(-8), 8, 7), 0x3F82);
        assert_eq!(f64_to_float_bits(f64::NEG_INFINITY, 8, 7), 0xFF80);
    }

    #[test]
    fn elements() {
        assert_eq!(element_from_f64(DType::F32, 1.0), "1.0e0");
        assert_eq!(element_from_f64(DType::F32, 0.1), "1.0000000149011612e-1");
        assert_eq!(element_from_f64(DType::F64, 0.1), "1.0e-1");
        assert_eq!(element_from_f64(DType::F32, f64::INFINITY), "0x7F800000");
        assert_eq!(element_from_f64(DType::F32, -0.0), "0x80000000");
        assert_eq!(
            element_from_f64(DType::F64, f64::NEG_INFINITY),
            "0xFFF0000000000000"
        );
        assert_eq!(element_from_f64(DType::BF16, 1.0), "0x3F80");
        assert_eq!(element_from_f64(DType::I32, -3.7), "-3");
        assert_eq!(element_from_f64(DType::Bool, 2.0), "true");
        assert_eq!(element_from_f64(DType::I8, 1000.0), "127");
        assert_eq!(element_from_f64(DType::U32, f64::NEG_INFINITY), "0");
        assert_eq!(element_from_i64(DType::U8, -1), "255");
        assert_eq!(element_from_i64(DType::I8, 200), "-56");
        assert_eq!(element_from_i64(DType::U64, -1), "18446744073709551615");
        assert_eq!(element_from_i64(DType::I64, i64::MIN), i64::MIN.to_string());
    }

    #[test]
    fn dense_nesting() {
        let ty = TensorType::new(DType::I32, [2, 2]);
        let e: Vec<String> = (1..=4).map(|i| i.to_string()).collect();
        assert_eq!(dense(&ty, &e), "dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>");
        let empty = TensorType::new(DType::I32, [0, 2]);
        assert_eq!(dense(&empty, &[]), "dense<> : tensor<0x2xi32>");
        assert_eq!(i64_array(&[]), "array<i64>");
        assert_eq!(i64_array(&[1, 0]), "array<i64: 1, 0>");
    }
}
