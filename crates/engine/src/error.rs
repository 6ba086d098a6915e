//! The engine's error: a message and the Python exception type it becomes.
pub use lowering::ErrorKind;

#[derive(Clone, Debug)]
pub struct EngineError {
    pub kind: ErrorKind,
    pub message: String,
    /// The op has no lowering (the CPU fallback may take it).
    pub not_lowered: bool,
}

pub type Result<T> = std::result::Result<T, EngineError>;

impl EngineError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        EngineError { kind, message: message.into(), not_lowered: false }
    }
    pub fn runtime(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Runtime, message)
    }
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<lowering::LowerError> for EngineError {
    fn from(e: lowering::LowerError) -> Self {
        EngineError::new(e.kind, e.message)
    }
}

impl From<pjrt::Error> for EngineError {
    fn from(e: pjrt::Error) -> Self {
        EngineError::runtime(format!("PJRT error: {}", e))
    }
}

impl From<stablehlo::Error> for EngineError {
    fn from(e: stablehlo::Error) -> Self {
        EngineError::runtime(e.to_string())
    }
}
