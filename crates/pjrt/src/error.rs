//! The crate's error type: a PJRT status code plus a human-readable message,
//! either read from a plugin `PJRT_Error` or produced by this wrapper.

use std::fmt;

/// PJRT error codes (`PJRT_Error_Code`, based on absl status codes).
pub mod code {
    pub const OK: i32 = 0;
    pub const CANCELLED: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const INVALID_ARGUMENT: i32 = 3;
    pub const DEADLINE_EXCEEDED: i32 = 4;
    pub const NOT_FOUND: i32 = 5;
    pub const ALREADY_EXISTS: i32 = 6;
    pub const PERMISSION_DENIED: i32 = 7;
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    pub const FAILED_PRECONDITION: i32 = 9;
    pub const ABORTED: i32 = 10;
    pub const OUT_OF_RANGE: i32 = 11;
    pub const UNIMPLEMENTED: i32 = 12;
    pub const INTERNAL: i32 = 13;
    pub const UNAVAILABLE: i32 = 14;
    pub const DATA_LOSS: i32 = 15;
    pub const UNAUTHENTICATED: i32 = 16;
}

/// An error from the PJRT plugin (code and message as reported by
/// `PJRT_Error_GetCode` / `PJRT_Error_Message`) or from this wrapper's own
/// argument checks (which use the same code space).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// A PJRT error code; see [`code`].
    pub code: i32,
    /// The plugin's message (or the wrapper's explanation).
    pub message: String,
}

/// `std::result::Result` specialised to [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Builds an error with the given code and message.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Error {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_ARGUMENT, message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(code::INTERNAL, message)
    }

    /// The symbolic name of [`Error::code`], e.g. `"INVALID_ARGUMENT"`.
    pub fn code_name(&self) -> &'static str {
        match self.code {
            code::OK => "OK",
            code::CANCELLED => "CANCELLED",
            code::UNKNOWN => "UNKNOWN",
            code::INVALID_ARGUMENT => "INVALID_ARGUMENT",
            code::DEADLINE_EXCEEDED => "DEADLINE_EXCEEDED",
            code::NOT_FOUND => "NOT_FOUND",
            code::ALREADY_EXISTS => "ALREADY_EXISTS",
            code::PERMISSION_DENIED => "PERMISSION_DENIED",
            code::RESOURCE_EXHAUSTED => "RESOURCE_EXHAUSTED",
            code::FAILED_PRECONDITION => "FAILED_PRECONDITION",
            code::ABORTED => "ABORTED",
            code::OUT_OF_RANGE => "OUT_OF_RANGE",
            code::UNIMPLEMENTED => "UNIMPLEMENTED",
            code::INTERNAL => "INTERNAL",
            code::UNAVAILABLE => "UNAVAILABLE",
            code::DATA_LOSS => "DATA_LOSS",
            code::UNAUTHENTICATED => "UNAUTHENTICATED",
            _ => "UNKNOWN_CODE",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PJRT error {} ({}): {}",
            self.code_name(),
            self.code,
            self.message
        )
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_includes_code_and_message() {
        let e = Error::new(code::INVALID_ARGUMENT, "bad shape");
        assert_eq!(e.to_string(), "PJRT error INVALID_ARGUMENT (3): bad shape");
        assert_eq!(Error::new(99, "x").code_name(), "UNKNOWN_CODE");
    }
}
