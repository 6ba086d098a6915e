//! `torch.tpu.set_sync_debug_mode`, as torch.cuda's: report each host sync a
//! program makes without asking for one (`.item()`, `.cpu()`, printing,
//! data-dependent sizes such as `nonzero`), to find what stalls the device
//! or, in Fused Eager, cuts graphs. `torch.tpu.synchronize()` is never
//! reported: the program asked for it.
use std::sync::atomic::{AtomicU8, Ordering};

use crate::error::{EngineError, Result};
use crate::runtime::Engine;

/// 0: off, 1: warn, 2: error (torch.cuda's values).
static MODE: AtomicU8 = AtomicU8::new(0);

pub fn set_mode(mode: u8) {
    MODE.store(mode.min(2), Ordering::Relaxed);
}

pub fn mode() -> u8 {
    MODE.load(Ordering::Relaxed)
}

/// Counts a host sync the program did not ask for, warning or refusing
/// first as the debug mode says. Call it before the sync has any effect.
pub fn implicit_host_sync(engine: &Engine, source: &str) -> Result<()> {
    let message = || format!("called a synchronizing tpu operation: {source} (torch.tpu.set_sync_debug_mode)");
    match mode() {
        0 => {}
        1 => crate::python_warning::warn(&message()),
        _ => return Err(EngineError::runtime(message())),
    }
    engine.metrics.host_sync(source);
    Ok(())
}
