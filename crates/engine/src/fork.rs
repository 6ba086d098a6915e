//! A process forked after the engine started cannot use it: the plugin's
//! threads do not come along into the child, so its first wait on them
//! would hang forever (a `DataLoader` worker that touches tpu, or
//! `os.fork()`). As CUDA does, every tpu call in such a child raises, naming
//! the fix, and tpu memory inherited from the parent is left alone rather
//! than freed through the plugin. A child forked before the engine started
//! starts its own.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static IN_FORKED_CHILD: AtomicBool = AtomicBool::new(false);

const MESSAGE: &str = "Cannot re-initialize tpu in forked subprocess. To use tpu with multiprocessing, \
     you must use the 'spawn' start method (multiprocessing.set_start_method('spawn'), or \
     DataLoader(..., multiprocessing_context='spawn'))";

extern "C" {
    // POSIX; in the C library every Rust program links.
    fn pthread_atfork(
        prepare: Option<unsafe extern "C" fn()>,
        parent: Option<unsafe extern "C" fn()>,
        child: Option<unsafe extern "C" fn()>,
    ) -> i32;
}

unsafe extern "C" fn mark_child() {
    IN_FORKED_CHILD.store(true, Ordering::Relaxed);
}

/// Marks processes forked from now on as unable to use the engine. Called
/// when the engine starts.
pub fn watch_forks() {
    static ONCE: Once = Once::new();
    // SAFETY: registers a handler that only stores to an atomic, which is
    // async-signal-safe as a fork child handler must be.
    ONCE.call_once(|| unsafe {
        pthread_atfork(None, None, Some(mark_child));
    });
}

/// An error in a forked child (checked where tpu work enters the engine,
/// before any lock another thread of the parent may have held at the fork).
pub fn refuse_in_child() -> crate::error::Result<()> {
    if in_forked_child() {
        return Err(crate::error::EngineError::runtime(MESSAGE));
    }
    Ok(())
}

/// Whether this process was forked from one whose engine had started.
pub fn in_forked_child() -> bool {
    IN_FORKED_CHILD.load(Ordering::Relaxed)
}
