//! The error type returned when shape or dtype inference rejects an op.

/// An inference failure: which op rejected its inputs and why.
///
/// Displays as `"<op>: <message>"`, e.g.
/// `stablehlo.add: operands must have the same type, got tensor<2xf32> and tensor<3xf32>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The StableHLO op name (or helper name) that failed, e.g. `"stablehlo.dot_general"`.
    pub op: &'static str,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(op: &'static str, message: impl Into<String>) -> Self {
        Error {
            op,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.op, self.message)
    }
}

impl std::error::Error for Error {}

/// Returns `Err(Error::new(op, format!(...)))` from the enclosing function.
macro_rules! bail {
    ($op:expr, $($fmt:tt)*) => {
        return Err($crate::error::Error::new($op, format!($($fmt)*)))
    };
}
pub(crate) use bail;
