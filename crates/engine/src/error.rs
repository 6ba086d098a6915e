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
        EngineError::pjrt("PJRT error: ", e)
    }
}

impl EngineError {
    /// A PJRT error after `context` (e.g. "aten::mm: execution failed: ").
    /// The plugin running out of memory becomes `torch.OutOfMemoryError`,
    /// which scripts written for CUDA catch, with what to do next.
    pub fn pjrt(context: &str, e: pjrt::Error) -> Self {
        if e.code == pjrt::code::RESOURCE_EXHAUSTED {
            return EngineError::new(
                ErrorKind::OutOfMemory,
                format!(
                    "{context}{}. The tpu device is out of memory: free tensors that are no longer \
                     needed or use smaller batches; torch.tpu.memory_allocated() shows what tensors hold.",
                    e.to_string().trim_end_matches('.')
                ),
            );
        }
        EngineError::runtime(format!("{context}{e}"))
    }
}

impl From<stablehlo::Error> for EngineError {
    fn from(e: stablehlo::Error) -> Self {
        EngineError::runtime(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_out_of_memory_becomes_out_of_memory_error() {
        let oom = pjrt::Error::new(pjrt::code::RESOURCE_EXHAUSTED, "Out of memory allocating 40 bytes.");
        let e = EngineError::pjrt("aten::add: execution failed: ", oom);
        assert_eq!(e.kind, ErrorKind::OutOfMemory);
        assert!(e.message.starts_with("aten::add: execution failed: "), "{}", e.message);
        assert!(e.message.contains("40 bytes. The tpu device is out of memory"), "{}", e.message);
        let other = EngineError::pjrt("x: ", pjrt::Error::new(pjrt::code::INTERNAL, "boom"));
        assert_eq!(other.kind, ErrorKind::Runtime);
    }
}
