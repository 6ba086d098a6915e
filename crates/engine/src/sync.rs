//! Host syncs and deferred input checks.
//!
//! Some bad input (an out-of-range index) is only visible on the device. The
//! program computes a flag; in Strict Eager the flag is kept here and read at
//! the next host sync, which raises IndexError naming the op (RuntimeError
//! for bad values that are not indices). Debug Eager reads it at once.
use std::sync::{Arc, Mutex};

use crate::error::{EngineError, Result};
use crate::runtime::Engine;

#[derive(Default)]
pub struct PendingChecks {
    list: Mutex<Vec<(Arc<pjrt::Buffer>, String)>>,
}

/// Reads one flag; Err with the message when it is set. A check that
/// quotes device values (`Lower::check_quoting`) has an i64 vector, the
/// flag first, instead of one i1.
pub fn read_flag(flag: &pjrt::Buffer, message: &str) -> Result<()> {
    let quoted = lowering::check_message::quoted_count(message);
    let values: Vec<i64> = if quoted == 0 {
        let mut byte = [0u8; 1];
        flag.to_host(&mut byte)?;
        vec![byte[0] as i64]
    } else {
        let mut raw = vec![0u8; 8 * (quoted + 1)];
        flag.to_host(&mut raw)?;
        raw.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
    };
    if values[0] != 0 {
        let (kind, text) = lowering::check_message::raised(message, &values[1..]);
        return Err(EngineError::new(kind, text));
    }
    Ok(())
}

impl PendingChecks {
    pub fn push(&self, flag: Arc<pjrt::Buffer>, message: String) {
        self.list.lock().unwrap_or_else(|e| e.into_inner()).push((flag, message));
    }

    pub fn len(&self) -> usize {
        self.list.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads every pending flag; the first set one is raised. All are
    /// cleared either way, so one bad op raises once.
    pub fn drain(&self) -> Result<()> {
        let pending = std::mem::take(&mut *self.list.lock().unwrap_or_else(|e| e.into_inner()));
        let mut first: Option<EngineError> = None;
        for (flag, message) in pending {
            if let Err(e) = read_flag(&flag, &message) {
                first.get_or_insert(e);
            }
        }
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Waits for all work on every device and raises any deferred error.
pub fn synchronize(engine: &Engine, source: &str) -> Result<()> {
    crate::fused::flush_if_pending(engine, "synchronize")?;
    wait(engine, source)
}

/// [`synchronize`] for one device's queue (a stream or event of that
/// device): other devices' pending graphs keep recording.
pub fn synchronize_device(engine: &Engine, device: i32, source: &str) -> Result<()> {
    crate::fused::flush_device_if_pending(engine, device, "synchronize")?;
    wait(engine, source)
}

fn wait(engine: &Engine, source: &str) -> Result<()> {
    engine.metrics.host_sync(source);
    engine.checks.drain()?;
    crate::dispatch::wait_recent()
}
