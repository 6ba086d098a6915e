//! The in-memory compilation cache: call signature → compiled program.
//! Keys hold the op name and the full signature, so a hash collision can
//! never hand back the wrong executable.
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use crate::program::Program;

pub struct Compiled {
    pub program: Program,
    pub executable: pjrt::Executable,
}

#[derive(Default)]
pub struct Cache {
    map: Mutex<HashMap<u64, Vec<(String, Vec<i64>, Arc<Compiled>)>>>,
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
        map.get(&hash)?.iter().find(|(o, s, _)| o == op && s == sig).map(|(_, _, c)| c.clone())
    }

    pub fn insert(&self, hash: u64, op: &str, sig: Vec<i64>, compiled: Arc<Compiled>) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(hash).or_default().push((op.to_string(), sig, compiled));
    }

    /// Whether any program of this op was compiled before (for the
    /// recompile reason: "new op" versus "new shape").
    pub fn has_op(&self, op: &str) -> bool {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.values().any(|v| v.iter().any(|(o, _, _)| o == op))
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).values().map(|v| v.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
