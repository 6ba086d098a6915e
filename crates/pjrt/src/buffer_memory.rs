//! Bytes held by live device buffers, process-wide, with the peak.
//!
//! Counted from each buffer's dense size when it is wrapped and released
//! when it is dropped or donated to an execution (its memory then belongs to
//! an output). Storages can share buffers and programs keep temporaries
//! inside the plugin, so this is the figure that shows what donation saves.
use std::sync::atomic::{AtomicI64, Ordering};

static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);

pub(crate) fn add(bytes: i64) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

pub(crate) fn sub(bytes: i64) {
    LIVE.fetch_sub(bytes, Ordering::Relaxed);
}

/// (bytes held by live buffers now, peak since the last reset).
pub fn buffer_memory() -> (i64, i64) {
    (LIVE.load(Ordering::Relaxed), PEAK.load(Ordering::Relaxed))
}

/// Restarts the peak from the current figure.
pub fn reset_buffer_memory_peak() {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
}
