//! Compiling for the XLA CPU plugin as if the machine had one core, for
//! small programs only.
//!
//! XLA CPU splits loops across the cores the compiling thread may run on.
//! On small VMs (2 vCPUs here) the cross-core handoff costs far more than
//! the work it spreads in a program of one op: a 64K-element multiply
//! measured 47 µs compiled for 2 cores against 10 µs compiled for 1
//! (crates/pjrt/examples/exec_latency.rs). In a long program the pool's
//! threads stay busy and the split pays: the Llama-style training step
//! compiled by `torch.compile` (graphs of 100+ ops on 64K-176K-element
//! tensors) went from 0.80-0.90x to 0.95-0.99x of PyTorch CPU eager
//! (bench/compile.py, alternating runs of one build).
//! So, on the CPU platform, a program of fewer than `PARALLEL_MIN_OPS` ATen
//! ops (every Strict Eager op; short Fused Eager graphs) compiles with the
//! compiling thread pinned to its current core, which then gets its old
//! mask back.
//! TORCH_TPU_XLA_CPU_PARALLEL=1 turns pinning off for every program.

/// Programs with at least this many ops compile for every core.
pub const PARALLEL_MIN_OPS: usize = 32;

/// Names the policy above in the disk cache's key: an executable compiled
/// under another policy (or for another number of cores) is another entry.
pub fn policy_tag() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("compile affinity: one core below {PARALLEL_MIN_OPS} ops, else {cores} cores")
}

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

/// Runs `f` (the compile of a program of `ops` ops) with the calling
/// thread pinned to one cpu when the platform is XLA CPU and the program
/// is small; restores the thread's affinity afterwards.
pub fn compile_for_size<T>(platform: &str, ops: usize, f: impl FnOnce() -> T) -> T {
    if !enabled(platform) || ops >= PARALLEL_MIN_OPS {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The cpus the calling thread may run on.
    fn allowed() -> Vec<u8> {
        let mut mask = [0u8; MASK_BYTES];
        assert_eq!(unsafe { sched_getaffinity(0, MASK_BYTES, mask.as_mut_ptr()) }, 0);
        mask.to_vec()
    }

    fn count(mask: &[u8]) -> u32 {
        mask.iter().map(|b| b.count_ones()).sum()
    }

    #[test]
    fn small_programs_compile_on_one_core_and_long_ones_on_all() {
        let before = allowed();
        let during_small = compile_for_size("cpu", 1, allowed);
        if enabled("cpu") {
            assert_eq!(count(&during_small), 1, "a one-op program compiles pinned to one cpu");
        } else {
            assert_eq!(during_small, before, "TORCH_TPU_XLA_CPU_PARALLEL=1 pins nothing");
        }
        assert_eq!(allowed(), before, "the thread's mask comes back after the compile");
        let during_long = compile_for_size("cpu", PARALLEL_MIN_OPS, allowed);
        assert_eq!(during_long, before, "a long program compiles for every cpu the thread may use");
        // Other platforms compile where the thread already runs.
        assert_eq!(compile_for_size("cuda", 1, allowed), before);
    }
}
