//! Errors raised while lowering an op. They are values here and become
//! Python exceptions (of the matching type) only at the PyTorch boundary.

/// Which Python exception an error becomes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    Runtime,
    Index,
    Type,
    Value,
    NotImplemented,
    /// The device ran out of memory: `torch.OutOfMemoryError`, as on CUDA.
    OutOfMemory,
    /// A singular or indefinite matrix: `torch.linalg.LinAlgError`.
    LinAlg,
}

#[derive(Clone, Debug)]
pub struct LowerError {
    pub kind: ErrorKind,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, LowerError>;

impl LowerError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        LowerError { kind, message: message.into() }
    }
}

impl std::fmt::Display for LowerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<stablehlo::Error> for LowerError {
    fn from(e: stablehlo::Error) -> Self {
        LowerError::new(ErrorKind::Runtime, e.to_string())
    }
}

/// `bail!(Kind, "fmt", args..)` returns a LowerError of that kind.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($fmt:tt)+) => {
        return Err($crate::error::LowerError::new($crate::error::ErrorKind::$kind, format!($($fmt)+)))
    };
}
