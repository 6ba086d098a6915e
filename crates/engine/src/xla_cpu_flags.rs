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
use std::path::Path;

/// The file the XLA CPU PJRT plugin ships as.
const XLA_CPU_PLUGIN_FILE: &str = "pjrt_c_api_cpu_plugin.so";

pub const YNN_FUSIONS: &str = "--xla_cpu_experimental_ynn_fusion_type=individual_dot";

fn is_xla_cpu_plugin(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == XLA_CPU_PLUGIN_FILE)
}

/// Runs `start` (loading the plugin and creating its client) with the XLA
/// CPU plugin's flags added to `XLA_FLAGS`, unless the user set that flag.
pub fn while_starting<T>(plugin: &Path, start: impl FnOnce() -> T) -> T {
    let old = std::env::var_os("XLA_FLAGS");
    let user = old.as_ref().and_then(|v| v.to_str()).unwrap_or("");
    if !is_xla_cpu_plugin(plugin) || user.contains("xla_cpu_experimental_ynn_fusion_type") {
        return start();
    }
    // The environment is process-wide and not locked against C code
    // reading it at the same moment; this runs once, when the engine
    // starts (during `import torch`), before any tpu work.
    std::env::set_var("XLA_FLAGS", format!("{user} {YNN_FUSIONS}").trim());
    let result = start();
    match old {
        Some(v) => std::env::set_var("XLA_FLAGS", v),
        None => std::env::remove_var("XLA_FLAGS"),
    }
    result
}
