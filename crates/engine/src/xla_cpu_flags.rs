//! Flags the XLA CPU plugin needs, handed to it through `XLA_FLAGS` while
//! it starts: the plugin reads `XLA_FLAGS` once, when its client is
//! created. The process's own value is restored afterwards, so other XLA
//! users in the process (jax) never see a flag their XLA may not know.
//!
//! - YNNPACK fusions. The pinned plugin (lammps-jax-pjrt-cpu 0.11.2) hands
//!   a dot or a reduction fused with broadcast operands to YNNPACK, which
//!   computes wrong values: `(ones(64, 4) @ ones(4, 64)).sum()` in Fused
//!   Eager gave 4096 instead of 16384, larger sizes garbage or NaN, and
//!   softmax graphs NaN now and then. Plain dots stay with YNNPACK
//!   (`individual_dot`): without it the MLP benchmark step is 20% slower.
//! - Its log level. Told its device count (`xla_cpu_devices.rs`), the
//!   plugin logs "cpu_device_count set via create_options" at INFO level
//!   on stderr at every start. `TF_CPP_MIN_LOG_LEVEL=1` while it starts
//!   keeps its warnings and errors and drops that line, unless the user
//!   set a level.
use std::path::Path;

/// The file the XLA CPU PJRT plugin ships as.
const XLA_CPU_PLUGIN_FILE: &str = "pjrt_c_api_cpu_plugin.so";

pub const YNN_FUSIONS: &str = "--xla_cpu_experimental_ynn_fusion_type=individual_dot";

pub(crate) fn is_xla_cpu_plugin(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == XLA_CPU_PLUGIN_FILE)
}

const LOG_LEVEL_VAR: &str = "TF_CPP_MIN_LOG_LEVEL";

/// Runs `start` (loading the plugin and creating its client) with the XLA
/// CPU plugin's flags added to `XLA_FLAGS` and its log level at warnings,
/// unless the user set that flag or a level.
pub fn while_starting<T>(plugin: &Path, start: impl FnOnce() -> T) -> T {
    if !is_xla_cpu_plugin(plugin) {
        return start();
    }
    let old_flags = std::env::var_os("XLA_FLAGS");
    let old_level = std::env::var_os(LOG_LEVEL_VAR);
    let user = old_flags.as_ref().and_then(|v| v.to_str()).unwrap_or("");
    // The environment is process-wide and not locked against C code
    // reading it at the same moment; this runs once, when the engine
    // starts (during `import torch`), before any tpu work.
    if !user.contains("xla_cpu_experimental_ynn_fusion_type") {
        std::env::set_var("XLA_FLAGS", format!("{user} {YNN_FUSIONS}").trim());
    }
    if old_level.is_none() {
        std::env::set_var(LOG_LEVEL_VAR, "1");
    }
    let result = start();
    restore("XLA_FLAGS", old_flags);
    restore(LOG_LEVEL_VAR, old_level);
    result
}

fn restore(var: &str, old: Option<std::ffi::OsString>) {
    match old {
        Some(v) => std::env::set_var(var, v),
        None => std::env::remove_var(var),
    }
}
