//! How much memory a device has, and how much of it is free
//! (`torch.tpu.mem_get_info`, `torch.accelerator.get_memory_info`, and the
//! out-of-memory check at allocation).
//!
//! The XLA CPU plugin's buffers are host memory, so its device is the host's
//! physical memory. Other plugins are asked through `PJRT_Device_MemoryStats`
//! (TPU and GPU plugins report a byte limit; the CPU plugin does not).

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
