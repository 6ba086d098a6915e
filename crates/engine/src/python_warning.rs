//! Python warnings raised from the engine. The extension sets the hook
//! (C++'s TORCH_WARN, which reaches Python from any thread, with or without
//! the GIL); without it (Rust tests) warnings are dropped.
use std::sync::OnceLock;

pub type WarnHook = fn(&str);
static WARN_HOOK: OnceLock<WarnHook> = OnceLock::new();

pub fn set_hook(hook: WarnHook) {
    let _ = WARN_HOOK.set(hook);
}

pub fn warn(message: &str) {
    if let Some(hook) = WARN_HOOK.get() {
        hook(message);
    }
}
