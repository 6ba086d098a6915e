//! The in-memory compilation cache: call signature → compiled program.
//! Keys hold the op name and the full signature, so a hash collision can
//! never hand back the wrong executable.
//!
//! The cache is bounded (least recently used out first): every executable
//! the XLA CPU plugin JITs holds memory mappings (about three for one op, 45
//! for a fused graph of 160 ops), and a process may have only
//! `vm.max_map_count` (65530 by default) of them; past that, XLA's JIT fails
//! ("LLVM compilation error: Cannot allocate memory"). So the cache holds at
//! most `TORCH_TPU_MAX_CACHED_PROGRAMS` programs (default 4096), and fewer
//! when the process's mappings pass 60% of the limit (or
//! `TORCH_TPU_MAX_MAPPINGS`). Evicted programs come back from the disk cache
//! without compiling.
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

/// The map's keys are `hash_key` values already: hashing them again (SipHash
/// by default) would only cost time on every op.
#[derive(Default)]
struct KeyIsHash(u64);

impl Hasher for KeyIsHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ *b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

#[derive(Default)]
pub struct Cache {
    map: Mutex<HashMap<u64, Vec<Entry>, std::hash::BuildHasherDefault<KeyIsHash>>>,
    /// Use counter: each entry remembers the tick of its last use.
    tick: AtomicU64,
    evictions: AtomicU64,
    inserts: AtomicU64,
}

const DEFAULT_MAX_PROGRAMS: usize = 4096;

fn max_programs() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var("TORCH_TPU_MAX_CACHED_PROGRAMS").ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(DEFAULT_MAX_PROGRAMS)
    })
}

/// Past this many cached programs, the process's memory mappings are
/// counted every `MAP_CHECK_EVERY` inserts (reading /proc/self/maps costs
/// about a millisecond per 10,000 mappings; a compile costs more).
const MAP_CHECK_FROM: usize = 16;
const MAP_CHECK_EVERY: u64 = 8;

/// The memory mappings the cache lets the process reach: 60% of
/// `vm.max_map_count`, or `TORCH_TPU_MAX_MAPPINGS`.
fn mapping_budget() -> usize {
    static BUDGET: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| {
        let limit: usize = std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(65530);
        std::env::var("TORCH_TPU_MAX_MAPPINGS").ok().and_then(|v| v.parse().ok()).unwrap_or(limit * 3 / 5)
    })
}

/// Whether the process holds more memory mappings than `mapping_budget`
/// (Linux; elsewhere never).
fn over_mapping_budget() -> bool {
    let Ok(maps) = std::fs::read("/proc/self/maps") else { return false };
    maps.iter().filter(|&&b| b == b'\n').count() > mapping_budget()
}

/// A word-at-a-time hash (multiply-xorshift per 8 bytes, MurmurHash3's
/// finalizer at the end): the same in every process, and about 8x fewer
/// multiplies than byte-wise FNV-1a on the signature vectors hashed for
/// every eager op.
pub(crate) struct StableHasher(u64);

impl StableHasher {
    pub(crate) fn new() -> StableHasher {
        StableHasher(0xcbf29ce484222325)
    }

    #[inline]
    fn mix(&mut self, word: u64) {
        let h = (self.0 ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 29);
    }
}

impl Hasher for StableHasher {
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.mix(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            // The length tells "ab" from "ab\0".
            self.mix(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 59));
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.mix(v as u64 | 1 << 62);
    }
    fn write_u64(&mut self, v: u64) {
        self.mix(v);
    }
    fn write_usize(&mut self, v: usize) {
        self.mix(v as u64);
    }
    fn write_i64(&mut self, v: i64) {
        self.mix(v as u64);
    }
}

pub fn hash_key(op: &str, sig: &[i64]) -> u64 {
    let mut h = StableHasher::new();
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
        let inserts = self.inserts.fetch_add(1, Ordering::Relaxed) + 1;
        let check_maps = total >= MAP_CHECK_FROM && inserts.is_multiple_of(MAP_CHECK_EVERY);
        let over_maps = check_maps && over_mapping_budget();
        if total > max_programs() || over_maps {
            // Drop the least recently used eighth at once, so the scan is
            // rare; half when over the mapping budget, which the eighth
            // might not bring back under before the next check.
            let share = if over_maps { total / 2 } else { total / 8 };
            let mut uses: Vec<u64> = map.values().flatten().map(|e| e.3.load(Ordering::Relaxed)).collect();
            uses.sort_unstable();
            let cut = uses[total.saturating_sub(max_programs()).max(share).min(total - 1)];
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
