//! Compiling for the XLA CPU plugin as if the machine had one core.
//!
//! XLA CPU splits loops across the cores the compiling thread may run on.
//! On small VMs (2 vCPUs here) the cross-core handoff costs far more than
//! the work it spreads: a 64K-element multiply measured 47 µs compiled for
//! 2 cores against 10 µs compiled for 1 (crates/pjrt/examples/exec_latency.rs).
//! So, on the CPU platform, the compiling thread is pinned to its current
//! core for the duration of the compile, then given its old mask back.
//! TORCH_TPU_XLA_CPU_PARALLEL=1 turns this off (large hosts, big programs).

const MASK_BYTES: usize = 128; // a glibc cpu_set_t: 1024 cpus

extern "C" {
    fn sched_getaffinity(pid: i32, size: usize, mask: *mut u8) -> i32;
    fn sched_setaffinity(pid: i32, size: usize, mask: *const u8) -> i32;
    fn sched_getcpu() -> i32;
}

fn enabled(platform: &str) -> bool {
    platform.eq_ignore_ascii_case("cpu")
        && !matches!(std::env::var("TORCH_TPU_XLA_CPU_PARALLEL").as_deref(), Ok("1") | Ok("true"))
}

/// Runs `f` (a compile) with the calling thread pinned to one cpu when the
/// platform is XLA CPU; restores the thread's affinity afterwards.
pub fn compile_single_core<T>(platform: &str, f: impl FnOnce() -> T) -> T {
    if !enabled(platform) {
        return f();
    }
    let mut old = [0u8; MASK_BYTES];
    // SAFETY: plain glibc calls on the calling thread with a buffer of the
    // size passed; failures leave the affinity untouched.
    let saved = unsafe { sched_getaffinity(0, MASK_BYTES, old.as_mut_ptr()) } == 0;
    let cpu = unsafe { sched_getcpu() };
    if !saved || cpu < 0 || cpu as usize >= MASK_BYTES * 8 {
        return f();
    }
    let mut one = [0u8; MASK_BYTES];
    one[cpu as usize / 8] |= 1 << (cpu % 8);
    let pinned = unsafe { sched_setaffinity(0, MASK_BYTES, one.as_ptr()) } == 0;
    if std::env::var("TORCH_TPU_DEBUG_AFFINITY").is_ok() {
        eprintln!("compile pinned to cpu {cpu}: {pinned}");
    }
    let out = f();
    if pinned {
        unsafe { sched_setaffinity(0, MASK_BYTES, old.as_ptr()) };
    }
    out
}
