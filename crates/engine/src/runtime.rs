//! The process-wide engine: the PJRT plugin, its client and devices, the
//! compilation cache and the metrics. Created on first use.
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use crate::cache::Cache;
use crate::error::{EngineError, Result};
use crate::metrics::Metrics;
use crate::sync::PendingChecks;

pub struct Engine {
    pub client: Arc<pjrt::Client>,
    pub devices: Vec<pjrt::Device>,
    pub plugin_path: PathBuf,
    pub platform: String,
    /// A device's memory in bytes, where known (`device_memory.rs`).
    pub capacity: Option<u64>,
    pub cache: Cache,
    pub metrics: Metrics,
    pub checks: PendingChecks,
}

static ENGINE: OnceLock<std::result::Result<Engine, String>> = OnceLock::new();

/// The plugin to load: $TORCH_TPU_PJRT_PLUGIN, else the pinned XLA CPU
/// plugin installed beside the package.
pub fn plugin_path() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("TORCH_TPU_PJRT_PLUGIN") {
        if !p.is_empty() {
            return Some(PathBuf::from(p));
        }
    }
    pjrt::default_plugin_path()
}

fn start() -> std::result::Result<Engine, String> {
    // First: a fork while the plugin starts must not leave a child waiting.
    crate::fork::watch_forks();
    crate::host_heap::keep_freed_memory();
    let path = plugin_path().ok_or_else(|| {
        "torch_tpu_rs: no PJRT plugin found. Set TORCH_TPU_PJRT_PLUGIN to a PJRT plugin .so \
         (the XLA CPU plugin is installed by the setup script)"
            .to_string()
    })?;
    let options = crate::xla_cpu_devices::client_options(&path)?;
    let client = crate::xla_cpu_flags::while_starting(&path, || {
        let api = pjrt::Api::load(&path).map_err(|e| format!("torch_tpu_rs: {e}"))?;
        pjrt::Client::with_options(api, &options)
            .map_err(|e| format!("torch_tpu_rs: creating a PJRT client with {} failed: {e}", path.display()))
    })?;
    let devices = client.addressable_devices();
    if devices.is_empty() {
        return Err(format!("torch_tpu_rs: the PJRT plugin {} reports no devices", path.display()));
    }
    let platform = client.platform_name();
    Ok(Engine {
        capacity: crate::device_memory::capacity_bytes(&platform, &client, devices[0]),
        platform,
        client,
        devices,
        plugin_path: path,
        cache: Cache::default(),
        metrics: Metrics::default(),
        checks: PendingChecks::default(),
    })
}

/// The engine, started on first use. A failed start is remembered and
/// reported the same way every time. In a process forked after the engine
/// started, an error that says to use 'spawn' (`fork.rs`).
pub fn engine() -> Result<&'static Engine> {
    crate::fork::refuse_in_child()?;
    match ENGINE.get_or_init(start) {
        Ok(e) => Ok(e),
        Err(msg) => Err(EngineError::runtime(msg.clone())),
    }
}

/// The engine if it started, without starting it (None in a forked child).
pub fn started() -> Option<&'static Engine> {
    if crate::fork::in_forked_child() {
        return None;
    }
    ENGINE.get().and_then(|r| r.as_ref().ok())
}

/// How many devices there are, also in a forked child, where the engine
/// cannot be used but the count it found is still known: torch.cuda's
/// device_count works there too, and device indices stay valid in errors.
pub fn device_count() -> usize {
    match ENGINE.get() {
        Some(Ok(e)) => e.devices.len(),
        _ => engine().map(|e| e.devices.len()).unwrap_or(0),
    }
}

impl Engine {
    pub fn device(&self, index: i32) -> Result<pjrt::Device> {
        self.devices.get(index.max(0) as usize).copied().ok_or_else(|| {
            EngineError::new(
                lowering::ErrorKind::Runtime,
                format!("invalid tpu device index {index}: {} device(s) available", self.devices.len()),
            )
        })
    }

    pub fn platform_name(&self) -> String {
        self.client.platform_name()
    }
}
