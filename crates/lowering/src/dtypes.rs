//! c10::ScalarType codes and their StableHLO element types.
use stablehlo::DType;

/// The StableHLO dtype of a c10::ScalarType code, or None for the dtypes the
/// engine does not handle (complex32, quantized, float8, ...).
pub fn from_torch(code: i32) -> Option<DType> {
    Some(match code {
        0 => DType::U8,
        1 => DType::I8,
        2 => DType::I16,
        3 => DType::I32,
        4 => DType::I64,
        5 => DType::F16,
        6 => DType::F32,
        7 => DType::F64,
        9 => DType::C64,
        10 => DType::C128,
        11 => DType::Bool,
        15 => DType::BF16,
        _ => return None,
    })
}

pub fn to_torch(d: DType) -> i32 {
    match d {
        DType::U8 => 0,
        DType::I8 => 1,
        DType::I16 => 2,
        DType::I32 => 3,
        DType::I64 => 4,
        DType::F16 => 5,
        DType::F32 => 6,
        DType::F64 => 7,
        DType::C64 => 9,
        DType::C128 => 10,
        DType::Bool => 11,
        DType::BF16 => 15,
        DType::U32 => 28,
        DType::U64 => 29,
    }
}

/// The Python spelling of a c10::ScalarType code, for error messages.
pub fn torch_name(code: i32) -> String {
    let name = match code {
        0 => "uint8",
        1 => "int8",
        2 => "int16",
        3 => "int32",
        4 => "int64",
        5 => "float16",
        6 => "float32",
        7 => "float64",
        8 => "complex32",
        9 => "complex64",
        10 => "complex128",
        11 => "bool",
        15 => "bfloat16",
        23 => "float8_e5m2",
        24 => "float8_e4m3fn",
        25 => "float8_e5m2fnuz",
        26 => "float8_e4m3fnuz",
        27 => "uint16",
        28 => "uint32",
        29 => "uint64",
        _ => return format!("torch dtype #{code}"),
    };
    format!("torch.{name}")
}

pub fn name(d: DType) -> String {
    torch_name(to_torch(d))
}
