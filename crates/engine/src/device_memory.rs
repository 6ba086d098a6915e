//! How much memory a device has, and how much of it is free
//! (`torch.tpu.mem_get_info`, `torch.accelerator.get_memory_info`, and the
//! out-of-memory check at allocation).
//!
//! The XLA CPU plugin's buffers are host memory, so its device is the host's
//! physical memory. Other plugins are asked through `PJRT_Device_MemoryStats`
//! (TPU and GPU plugins report a byte limit; the CPU plugin does not).

use lowering::ErrorKind;

use crate::error::{EngineError, Result};

extern "C" {
    fn sysconf(name: i32) -> i64;
}
const SC_PAGESIZE: i32 = 30; // glibc's _SC_PAGESIZE
const SC_PHYS_PAGES: i32 = 85; // glibc's _SC_PHYS_PAGES
const SC_AVPHYS_PAGES: i32 = 86; // glibc's _SC_AVPHYS_PAGES

fn host_pages(which: i32) -> Option<u64> {
    // SAFETY: sysconf only reads system configuration.
    let (page, pages) = unsafe { (sysconf(SC_PAGESIZE), sysconf(which)) };
    (page > 0 && pages > 0).then(|| page as u64 * pages as u64)
}

fn is_host(platform: &str) -> bool {
    platform.eq_ignore_ascii_case("cpu")
}

/// (free, total) bytes of `device`, like cudaMemGetInfo; None where the
/// plugin reports neither.
fn report(platform: &str, client: &pjrt::Client, device: pjrt::Device) -> Option<(u64, u64)> {
    if is_host(platform) {
        return Some((host_pages(SC_AVPHYS_PAGES)?, host_pages(SC_PHYS_PAGES)?));
    }
    let stats = device.memory_stats(client.api()).ok()?;
    let total = stats.bytes_limit.filter(|l| *l > 0)? as u64;
    Some((total.saturating_sub(stats.bytes_in_use.max(0) as u64), total))
}

/// A device's memory in bytes, where known. Read once, when the engine
/// starts: every allocation checks it.
pub fn capacity_bytes(platform: &str, client: &pjrt::Client, device: pjrt::Device) -> Option<u64> {
    report(platform, client, device).map(|(_, total)| total)
}

/// (free, total) bytes of a device now.
pub fn free_and_total(engine: &crate::Engine, device_index: i32) -> Option<(u64, u64)> {
    report(&engine.platform, &engine.client, engine.device(device_index).ok()?)
}

/// Refuses a storage of `nbytes` the device can never hold. Storages get
/// their buffer lazily, so without this a request is refused only at first
/// use; CUDA refuses it at allocation. New outputs of ops are checked too,
/// before their program runs: a program that fails for memory would leave
/// the tensors it updates in place holding its error.
pub fn check_capacity(nbytes: usize, device_index: i32) -> Result<()> {
    crate::fork::refuse_in_child()?;
    let oom = |detail: String| {
        Err(EngineError::new(
            ErrorKind::OutOfMemory,
            format!(
                "tpu out of memory: tried to allocate {} on tpu:{device_index}, {detail}; use smaller \
                 tensors or batches",
                bytes(nbytes as u64)
            ),
        ))
    };
    if let Some(limit) = crate::storage::MEMORY.limit(device_index) {
        let held = crate::storage::MEMORY.get(device_index).0.max(0) as u64;
        if held + nbytes as u64 > limit as u64 {
            return oom(format!(
                "with {} already allocated and this process limited to {} by \
                 torch.tpu.set_per_process_memory_fraction",
                bytes(held),
                bytes(limit as u64)
            ));
        }
    }
    let Some(total) = crate::runtime::engine().ok().and_then(|e| e.capacity) else { return Ok(()) };
    if nbytes as u64 <= total {
        return Ok(());
    }
    oom(format!("more than the device's {} in total", bytes(total)))
}

/// A byte count as people read it: "1.50 GiB", "3.00 MiB", "4.00 KiB", "12 bytes".
fn bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    match UNITS.iter().find(|(size, _)| n >= *size) {
        Some((size, unit)) => format!("{:.2} {unit}", n as f64 / *size as f64),
        None => format!("{n} bytes"),
    }
}
