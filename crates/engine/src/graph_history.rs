//! What a Fused Eager graph about to compile shares with graphs compiled
//! before: it names the recompile reason (a changing batch or sequence
//! size shows up as such in the metrics) and tells when view offsets move
//! between otherwise equal graphs, so they stop being program constants.
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use crate::call::{Call, CallValue, TensorRef};

/// Running hashes of a recorded graph: its ops, the sizes/strides/dtypes
/// they saw, and the view offsets they read at.
#[derive(Default, Clone, Copy)]
pub struct GraphKey {
    ops: u64,
    shapes: u64,
    offsets: u64,
}

fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(23)
}

fn hash_of(v: impl Hash) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

impl GraphKey {
    pub fn add(&mut self, call: &Call) {
        self.ops = mix(self.ops, hash_of(call.op));
        // Plain folds, not SipHash: this runs for every recorded op.
        let mut tensor = |t: &TensorRef| {
            let mut h = mix(mix(t.dtype as u8 as u64, t.storage.nbytes as u64), t.sizes.len() as u64);
            for &v in t.sizes.iter().chain(t.strides.iter()) {
                h = mix(h, v as u64);
            }
            self.shapes = mix(self.shapes, h);
            self.offsets = mix(self.offsets, t.offset as u64);
        };
        for a in &call.args {
            match &a.value {
                CallValue::Tensor(t) => tensor(t),
                CallValue::TensorList(ts) => ts.iter().flatten().for_each(&mut tensor),
                _ => {}
            }
        }
    }
}

/// How a graph about to compile relates to graphs compiled before.
#[derive(Debug, PartialEq)]
pub enum Novelty {
    /// Its op sequence was never compiled.
    NewOps,
    /// The same ops on other sizes or dtypes.
    NewSizes,
    /// The same ops and sizes, reading at other view offsets.
    NewOffsets,
    /// The same ops, sizes and offsets (which results are live or donated differs).
    NewLiveness,
}

/// Per op sequence: the sizes compiled for it, each with its view offsets.
type Seen = HashMap<u64, HashMap<u64, HashSet<u64>>>;
static SEEN: Mutex<Option<Seen>> = Mutex::new(None);

/// Records `key` as compiled and says what is new about it. `fused_eager`:
/// the graph comes from Fused Eager, not from a torch.compile graph (where
/// Dynamo decides which sizes get a program), so it may carry the hint below.
pub fn note_compile(key: &GraphKey, fused_eager: bool) -> Novelty {
    let mut guard = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let by_ops = guard.get_or_insert_with(HashMap::new);
    let known_ops = by_ops.contains_key(&key.ops);
    let by_shapes = by_ops.entry(key.ops).or_default();
    let known_shapes = by_shapes.contains_key(&key.shapes);
    let new_offsets = by_shapes.entry(key.shapes).or_default().insert(key.offsets);
    let novelty = match (known_ops, known_shapes, new_offsets) {
        (false, _, _) => Novelty::NewOps,
        (true, false, _) => Novelty::NewSizes,
        (true, true, true) => Novelty::NewOffsets,
        (true, true, false) => Novelty::NewLiveness,
    };
    // (Not while Fused Eager's shape buckets trace: those sizes get buckets.)
    let hint = fused_eager
        && novelty == Novelty::NewSizes
        && by_shapes.len() == SIZES_BEFORE_HINT
        && !crate::fused::region_tracing();
    drop(guard); // a warning may run Python code
    if hint {
        crate::python_warning::warn(&changing_sizes_hint(SIZES_BEFORE_HINT));
    }
    novelty
}

/// How many other sizes `key`'s op sequence compiled for before, if these
/// sizes are new to it (nothing is recorded).
pub fn other_sizes_seen(key: &GraphKey) -> usize {
    let guard = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref().and_then(|by_ops| by_ops.get(&key.ops)) {
        Some(by_shapes) if !by_shapes.contains_key(&key.shapes) => by_shapes.len(),
        _ => 0,
    }
}

/// Fused Eager records concrete sizes, so each new size of a step compiles
/// a new program (bucketing needs the symbolic sizes only Dynamo traces).
/// When one graph has compiled for this many sizes, say once, for that
/// graph, what avoids it.
pub const SIZES_BEFORE_HINT: usize = 4;

fn changing_sizes_hint(sizes: usize) -> String {
    format!(
        "Fused Eager has built the same graph of ops for {sizes} different sizes: each new batch or sequence size \
         needs a new program, compiled or loaded from the disk cache (counted in \
         torch_tpu_rs.metrics()['recompile_reasons']). In a training loop, Fused Eager buckets them by powers \
         of two from the end of the next optimizer step on (see torch_tpu_rs.metrics()['bucketed_regions']; \
         TORCH_TPU_FUSED_BUCKETS=0 turns that off). Elsewhere, for sizes that change \
         from step to step, compile the model with torch.compile(model, backend=\"tpu\", dynamic=True): its \
         programs are bucketed by powers of two, so sizes 1 to 512 need at most 10 programs."
    )
}
