//! Small device buffers for runtime scalars and offsets. The same value is
//! uploaded once and reused, so loops that pass the same numbers do not pay
//! a host-to-device transfer per op.
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use stablehlo::DType;

use crate::error::Result;
use crate::runtime::Engine;
use crate::transfer::element_type;

const MAX_CACHED: usize = 4096;

type Key = (i32, u8, (u64, u64));

fn cache() -> &'static Mutex<HashMap<Key, Arc<pjrt::Buffer>>> {
    static C: OnceLock<Mutex<HashMap<Key, Arc<pjrt::Buffer>>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Little-endian bytes of a rank-0 value of `dtype`.
pub fn scalar_bytes(dtype: DType, f: f64, i: i64) -> Vec<u8> {
    match dtype {
        DType::F64 => f.to_le_bytes().to_vec(),
        DType::F32 => (f as f32).to_le_bytes().to_vec(),
        DType::F16 => f16_bits(f as f32).to_le_bytes().to_vec(),
        DType::BF16 => (((f as f32).to_bits() + 0x7fff + (((f as f32).to_bits() >> 16) & 1)) >> 16).to_le_bytes()[..2].to_vec(),
        DType::I64 => i.to_le_bytes().to_vec(),
        DType::I32 => (i as i32).to_le_bytes().to_vec(),
        DType::I16 => (i as i16).to_le_bytes().to_vec(),
        DType::I8 => (i as i8).to_le_bytes().to_vec(),
        DType::U8 => (i as u8).to_le_bytes().to_vec(),
        DType::U32 => (i as u32).to_le_bytes().to_vec(),
        DType::U64 => (i as u64).to_le_bytes().to_vec(),
        DType::Bool => vec![(i != 0) as u8],
        // (real, imaginary): a complex Scalar carries the imaginary part's
        // bits in `i` (call::CallValue::Scalar).
        DType::C64 | DType::C128 => {
            let part = dtype.complex_part().unwrap();
            let mut bytes = scalar_bytes(part, f, 0);
            bytes.extend(scalar_bytes(part, crate::call::imag_part(i), 0));
            bytes
        }
    }
}

fn f16_bits(x: f32) -> u16 {
    // Round-to-nearest-even conversion of an f32 to IEEE half.
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7fffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x800000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rounded = (m + half - 1 + ((m >> shift) & 1)) >> shift;
        return sign | rounded as u16;
    }
    let rounded = man + 0xfff + ((man >> 13) & 1);
    if rounded & 0x800000 != 0 {
        let e = e + 1;
        if e >= 0x1f {
            return sign | 0x7c00;
        }
        return sign | ((e as u16) << 10);
    }
    sign | ((e as u16) << 10) | (rounded >> 13) as u16
}

/// A device buffer holding one value of `dtype`.
pub fn scalar_buffer(engine: &Engine, device: i32, dtype: DType, f: f64, i: i64) -> Result<Arc<pjrt::Buffer>> {
    let bits = match dtype {
        d if d.is_complex() => (f.to_bits(), i as u64),
        d if d.is_float() => (f.to_bits(), 0),
        _ => (i as u64, 0),
    };
    let key = (device, lowering::dtypes::to_torch(dtype) as u8, bits);
    if let Some(b) = cache().lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(b.clone());
    }
    let bytes = scalar_bytes(dtype, f, i);
    let buf = Arc::new(engine.client.buffer_from_host(&bytes, element_type(dtype), &[], engine.device(device)?)?);
    let mut c = cache().lock().unwrap_or_else(|e| e.into_inner());
    if c.len() >= MAX_CACHED {
        c.clear();
    }
    c.insert(key, buf.clone());
    Ok(buf)
}
