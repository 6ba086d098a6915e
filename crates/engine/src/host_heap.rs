//! Keeps freed host memory in the process heap.
//!
//! On the XLA CPU plugin every device buffer is host memory from malloc.
//! glibc serves blocks above its mmap threshold (128 KiB at first) with
//! fresh mappings and unmaps them on free, so each op output of a few
//! hundred KiB paid page faults and page zeroing (about 6 % of a training
//! step's samples in `perf`). Raising the threshold to its maximum and the
//! trim threshold with it lets freed blocks be reused: a Strict Eager
//! Llama step went from ~39 to ~33 ms. Memory already freed stays mapped
//! (up to 1 GiB at the heap top), as with a caching allocator.
//!
//! A user's own MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ win, and
//! `TORCH_TPU_HOST_HEAP=0` leaves glibc's defaults alone.

/// glibc's largest mmap threshold on 64-bit (HEAP_MAX_SIZE / 2).
const MMAP_THRESHOLD: i32 = 32 << 20;
const TRIM_THRESHOLD: i32 = 1 << 30;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn keep_freed_memory() {
    extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    const M_TRIM_THRESHOLD: i32 = -1;
    const M_MMAP_THRESHOLD: i32 = -3;
    let set_by_user = |name: &str| std::env::var_os(name).is_some();
    if std::env::var("TORCH_TPU_HOST_HEAP").map(|v| v == "0").unwrap_or(false)
        || set_by_user("MALLOC_MMAP_THRESHOLD_")
        || set_by_user("MALLOC_TRIM_THRESHOLD_")
    {
        return;
    }
    // SAFETY: mallopt only changes allocator tunables; it is thread-safe.
    unsafe {
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn keep_freed_memory() {}
