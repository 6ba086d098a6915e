//! Counters that make compiles, cache hits, executions, host syncs and
//! fallbacks visible (`torch_tpu_rs.metrics()`).
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

#[derive(Default)]
pub struct Metrics {
    pub compiles: AtomicU64,
    pub compile_nanos: AtomicU64,
    pub cache_hits_memory: AtomicU64,
    /// Executables loaded from the disk cache (disk_cache.rs) instead of compiled.
    pub cache_hits_disk: AtomicU64,
    /// Disk cache entries found unusable (deleted and recompiled).
    pub cache_disk_corrupt: AtomicU64,
    pub executions: AtomicU64,
    /// Input buffers handed to an execution for reuse by its outputs.
    pub donated_buffers: AtomicU64,
    pub host_syncs: AtomicU64,
    pub graph_flushes: AtomicU64,
    /// Compiled graphs run again from their recorded program (replay.rs).
    pub graph_replays: AtomicU64,
    /// Fused Eager graphs at new sizes run by a bucketed program instead (`_fused_buckets.py`).
    pub bucketed_regions: AtomicU64,
    pub flush_reasons: Mutex<BTreeMap<String, u64>>,
    pub fallbacks: Mutex<BTreeMap<String, u64>>,
    pub recompile_reasons: Mutex<BTreeMap<String, u64>>,
    pub sync_sources: Mutex<BTreeMap<String, u64>>,
}

impl Metrics {
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    pub fn bump(map: &Mutex<BTreeMap<String, u64>>, key: &str) -> u64 {
        let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
        let e = m.entry(key.to_string()).or_insert(0);
        *e += 1;
        *e
    }
    pub fn host_sync(&self, source: &str) {
        Self::inc(&self.host_syncs);
        Self::bump(&self.sync_sources, source);
    }
    pub fn snapshot_map(map: &Mutex<BTreeMap<String, u64>>) -> BTreeMap<String, u64> {
        map.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
}
