//! Eager modes. Strict (default): ops are enqueued and the host waits only
//! for values. Debug (TPU_LAUNCH_BLOCKING=1): every op completes and is
//! checked before the next one starts, so errors name the failing op.
//! Fused (TORCH_TPU_DEFER_AND_FUSE=1): ops are recorded into one pending
//! graph, compiled and run as one program when a value is needed.
use std::sync::atomic::{AtomicU8, Ordering};

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Strict = 0,
    Debug = 1,
    Fused = 2,
}

static MODE: AtomicU8 = AtomicU8::new(255);

fn env_on(name: &str) -> bool {
    matches!(std::env::var(name).as_deref(), Ok("1") | Ok("true") | Ok("TRUE") | Ok("True"))
}

fn from_env() -> Mode {
    if env_on("TPU_LAUNCH_BLOCKING") {
        Mode::Debug
    } else if env_on("TORCH_TPU_DEFER_AND_FUSE") {
        Mode::Fused
    } else {
        Mode::Strict
    }
}

pub fn current() -> Mode {
    match MODE.load(Ordering::Relaxed) {
        0 => Mode::Strict,
        1 => Mode::Debug,
        2 => Mode::Fused,
        _ => {
            let m = from_env();
            MODE.store(m as u8, Ordering::Relaxed);
            m
        }
    }
}

pub fn set(m: Mode) {
    MODE.store(m as u8, Ordering::Relaxed);
}

pub fn parse(name: &str) -> Option<Mode> {
    match name {
        "strict" => Some(Mode::Strict),
        "debug" => Some(Mode::Debug),
        "fused" => Some(Mode::Fused),
        _ => None,
    }
}

pub fn name(m: Mode) -> &'static str {
    match m {
        Mode::Strict => "strict",
        Mode::Debug => "debug",
        Mode::Fused => "fused",
    }
}
