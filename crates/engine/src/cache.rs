//! The in-memory compilation cache: call signature → compiled program.
//! Keys hold the op name and the full signature, so a hash collision can
//! never hand back the wrong executable.
//!
//! The cache is bounded (least recently used out first): every executable
//! the XLA CPU plugin JITs holds about three memory mappings, and a process
//! may have only `vm.max_map_count` (65530 by default) of them; past that,
//! XLA's JIT fails inside libgcc's unwinder. `TORCH_TPU_MAX_CACHED_PROGRAMS`
//! changes the bound (default 4096); evicted programs come back from the
//! disk cache without compiling.
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::program::Program;

pub struct Compiled {
    pub program: Program,
    pub executable: pjrt::Executable,
}

type Entry = (String, Vec<i64>, Arc<Compiled>, AtomicU64);

#[derive(Default)]
pub struct Cache {
    map: Mutex<HashMap<u64, Vec<Entry>>>,
    /// Use counter: each entry remembers the tick of its last use.
    tick: AtomicU64,
    evictions: AtomicU64,
}

const DEFAULT_MAX_PROGRAMS: usize = 4096;

fn max_programs() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var("TORCH_TPU_MAX_CACHED_PROGRAMS").ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(DEFAULT_MAX_PROGRAMS)
    })
}

/// FNV-1a: fast for the short keys used here.
struct Fnv(u64);
impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= *b as u64;
            self.0 = self.0.wrapping_mul(0x100000001b3);
        }
    }
}

pub fn hash_key(op: &str, sig: &[i64]) -> u64 {
    let mut h = Fnv(0xcbf29ce484222325);
    op.hash(&mut h);
    sig.hash(&mut h);
    h.finish()
}

impl Cache {
    pub fn get(&self, hash: u64, op: &str, sig: &[i64]) -> Option<Arc<Compiled>> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let (_, _, c, used) = map.get(&hash)?.iter().find(|(o, s, _, _)| o == op && s == sig)?;
        used.store(self.tick.fetch_add(1, Ordering::Relaxed), Ordering::Relaxed);
        Some(c.clone())
    }

    pub fn insert(&self, hash: u64, op: &str, sig: Vec<i64>, compiled: Arc<Compiled>) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.tick.fetch_add(1, Ordering::Relaxed);
        map.entry(hash).or_default().push((op.to_string(), sig, compiled, AtomicU64::new(now)));
        let total: usize = map.values().map(|v| v.len()).sum();
        if total > max_programs() {
            // Drop the least recently used eighth at once, so the scan is rare.
            let mut uses: Vec<u64> = map.values().flatten().map(|e| e.3.load(Ordering::Relaxed)).collect();
            uses.sort_unstable();
            let cut = uses[(total - max_programs()).max(total / 8).min(total - 1)];
            let before = total;
            for v in map.values_mut() {
                v.retain(|e| e.3.load(Ordering::Relaxed) > cut);
            }
            map.retain(|_, v| !v.is_empty());
            let after: usize = map.values().map(|v| v.len()).sum();
            self.evictions.fetch_add((before - after) as u64, Ordering::Relaxed);
        }
    }

    /// Programs dropped to keep the cache within its bound.
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// Whether any program of this op was compiled before (for the
    /// recompile reason: "new op" versus "new shape").
    pub fn has_op(&self, op: &str) -> bool {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.values().any(|v| v.iter().any(|(o, _, _, _)| o == op))
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).values().map(|v| v.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
