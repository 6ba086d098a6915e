//! Fused Eager: ops are recorded into a pending graph instead of running,
//! one graph per device, and a graph runs as one StableHLO program when it
//! is flushed:
//! - a value is needed (a host read, `.item()`, printing, saving, an op
//!   with a data-dependent shape), or `torch.tpu.synchronize()`;
//! - the graph reaches `MAX_GRAPH_OPS` (a loop that never syncs is then
//!   cut every period from there on: `step_period`);
//! - the op sequence repeats the previous flushed graph's (the end of a
//!   training step), so every step runs the same program;
//! - the graph's tail is a loop body twice over (a generation loop that
//!   never syncs): it is cut there, then every period (`step_period`);
//! - the mode changes, or any non-fused path touches device data.
//!
//! Graphs are per device because an executable runs on one device, and
//! threads driving several devices at once (`nn.DataParallel`'s replicas)
//! would otherwise cut each other's graphs at every switch. A graph only
//! ever touches its own device's storages: data moves between devices
//! through the host (`cross_device.rs`), which flushes the source's graph.
//!
//! A storage written in the graph is `pending`: its value is a graph value
//! until the flush assigns the output buffer. Storages read from their
//! buffers are captured as graph arguments at record time (PJRT buffers are
//! immutable, so later writes cannot change what the graph sees). Programs
//! are cached by the hash of their text: same structure, shapes and dtypes
//! reuse the executable, and runtime scalars are arguments.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use stablehlo::{Builder, DType, TensorType, Value};

use crate::cache::Compiled;
use crate::call::Call;
use crate::dispatch::{resolve_input, NewTensor, RetValue};
use crate::error::{EngineError, Result};
use crate::metrics::Metrics;
use crate::program::{collect_slots, record, slot_layout, Output, Program, SlotSource, Slots};
use crate::runtime::Engine;
use crate::storage::Storage;

/// Flush once a graph holds this many ops (compile time grows with size).
const MAX_GRAPH_OPS: usize = 3000;
/// A repeated op sequence at least this long is a step boundary.
const MIN_REPEAT_OPS: usize = 32;
/// How often (in ops) a growing graph's tail is checked for a loop body.
const LOOP_CHECK_EVERY: usize = 16;

struct Pending {
    storage: *const Storage,
    value: Value,
    dtype: DType,
}

/// Where a graph argument came from, so a compiled graph can be replayed
/// (`replay.rs`) with new buffers for the same program.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Source {
    /// The buffer of this storage (by id) when it was first read.
    Storage(u64),
    /// A value fixed by the recorded ops: a Python number in the op's
    /// arguments or a view offset.
    Const,
    /// Seed and offset drawn from the default generator for `count` numbers.
    Rng(u64),
    /// Not reproducible from the graph's tensors alone.
    Unreplayable(&'static str),
}

struct Graph {
    b: Builder,
    device: i32,
    /// Buffers fed to the graph's arguments, in argument order.
    inputs: Vec<Arc<pjrt::Buffer>>,
    /// Where each of `inputs` came from.
    sources: Vec<Source>,
    /// Why this graph cannot be replayed, if something outside its
    /// arguments changed what it computes.
    replay_blocker: Option<&'static str>,
    /// Storages read as zeros (never written): a replay may only do the
    /// same if the graph created them.
    zero_reads: Vec<u64>,
    /// Recorded for replay (a compiled graph): numbers are program constants.
    static_constants: bool,
    /// View offsets are program constants (see STATIC_OFFSETS).
    static_offsets: bool,
    /// Storages read from their buffers: id → (argument, dtype).
    captured: HashMap<u64, (Value, DType)>,
    /// Storages whose current value is a graph value, in first-write order.
    order: Vec<u64>,
    pending: HashMap<u64, Pending>,
    checks: Vec<(Value, String)>,
    ops: Vec<String>,
    /// Storages this graph created: everything else it touches existed
    /// before it (the model's weights, caches, inputs).
    created: HashSet<u64>,
    /// Per op, its name and the storages from before the graph it touches:
    /// a loop's steps touch the same ones, while a model's layers, whose
    /// ops look alike, each touch their own weights (pending or not).
    loop_trace: crate::step_period::LoopTrace,
    /// Per op, whether it touches any storage from before the graph.
    touches_old: Vec<bool>,
    /// Its ops, shapes and offsets, to name why it compiles (graph_history.rs).
    key: crate::graph_history::GraphKey,
}

// SAFETY: the raw storage pointers are only dereferenced under the GRAPHS
// lock, after checking the storage is still alive (not in DEAD).
unsafe impl Send for Graph {}

/// The pending graph of each device that has one.
static GRAPHS: Mutex<BTreeMap<i32, Graph>> = Mutex::new(BTreeMap::new());
/// Pending storages freed before their graph ran: their values need no output.
static DEAD: Mutex<Option<HashSet<u64>>> = Mutex::new(None);
/// The op sequence of each device's last flushed graph, to spot repeating steps.
static PREVIOUS_OPS: Mutex<BTreeMap<i32, Vec<String>>> = Mutex::new(BTreeMap::new());

fn graphs() -> std::sync::MutexGuard<'static, BTreeMap<i32, Graph>> {
    GRAPHS.lock().unwrap_or_else(|e| e.into_inner())
}

fn previous_ops() -> std::sync::MutexGuard<'static, BTreeMap<i32, Vec<String>>> {
    PREVIOUS_OPS.lock().unwrap_or_else(|e| e.into_inner())
}
/// Set while a caller marks graph ends itself (a compiled graph runs and then
/// flushes): the repeat detector must not cut such a graph in two, nor flush
/// before the caller has dropped its intermediates.
static EXPLICIT_BOUNDARIES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether graphs take view offsets as constants (about 9% off a Llama
/// step: XLA slices statically and fuses across slices). A program that
/// slices at a new place each step (a decode loop walking its cache) would
/// then compile every step, so the first time a graph compiles again for
/// new offsets alone, offsets become arguments for the rest of the process.
static STATIC_OFFSETS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Set while a compiled graph is recorded for replay (`replay.rs`).
static CAPTURING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Marks graphs recorded from now on as captures for replay (or not).
pub fn set_capturing(on: bool) {
    CAPTURING.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Turns the repeat detector off (`true`) or on; returns the previous setting.
pub fn set_explicit_boundaries(on: bool) -> bool {
    EXPLICIT_BOUNDARIES.swap(on, std::sync::atomic::Ordering::Relaxed)
}

/// Whether a torch.compile graph is running: only then are graph
/// boundaries explicit (`_replay._recording`).
pub fn in_compiled_graph() -> bool {
    EXPLICIT_BOUNDARIES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Fused Eager's shape buckets (`_fused_buckets.py`): called with a graph's
/// device, its live pending storages (handles), whether its exact program
/// is cached, and whether its ops compile for yet another size (as many as
/// the changing-sizes hint waits for, or more). It may give every one of
/// those storages its value from a bucketed program (true: it must have,
/// as the storages are not looked at again), and the graph then does not
/// run. Called at every flush while regions are traced, otherwise only
/// when a graph would compile.
pub type BucketHook = Arc<dyn Fn(i32, &[usize], bool, bool) -> bool + Send + Sync>;
static BUCKET_HOOK: Mutex<Option<BucketHook>> = Mutex::new(None);
/// While the bucket hook traces regions, a repeating op sequence does not
/// cut the graph inside the op that completes it: the trace could not end
/// there. The optimizer's step hook and value reads cut it instead.
static REGION_TRACING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

thread_local! {
    /// The hook's own work flushes graphs too: those run as they are (and
    /// the hook is not entered again from inside itself, where torch may
    /// have released the GIL that the outer call took).
    static IN_BUCKET_HOOK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

pub fn set_bucket_hook(hook: Option<BucketHook>) {
    *BUCKET_HOOK.lock().unwrap_or_else(|e| e.into_inner()) = hook;
}

pub fn set_region_tracing(on: bool) {
    REGION_TRACING.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether the bucket hook traces regions (new sizes are then bucketed).
pub fn region_tracing() -> bool {
    REGION_TRACING.load(std::sync::atomic::Ordering::Relaxed)
}

fn bucket_hook() -> Option<BucketHook> {
    BUCKET_HOOK.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Called when a pending storage is freed.
pub fn forget(id: u64) {
    DEAD.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashSet::new).insert(id);
}

/// Whether an op can be recorded: it returns no host number and its output
/// shapes do not depend on values.
pub fn fusible(call: &Call, entry: &lowering::OpEntry) -> bool {
    crate::dispatch::data_dependent(call, entry).is_none() && !call.ret_kind.contains(&crate::call::RET_NUMBER)
}

struct GraphSlots<'g> {
    inputs: &'g mut Vec<Arc<pjrt::Buffer>>,
    sources: &'g mut Vec<Source>,
    zero_reads: &'g mut Vec<u64>,
    static_constants: bool,
    static_offsets: bool,
    captured: &'g mut HashMap<u64, (Value, DType)>,
    pending: &'g HashMap<u64, Pending>,
}

impl SlotSource for GraphSlots<'_> {
    fn constants_are_static(&self) -> bool {
        self.static_constants
    }

    fn offsets_are_static(&self) -> bool {
        self.static_constants || self.static_offsets
    }

    fn read(&mut self, b: &mut Builder, slots: &Slots, slot: usize, reader: DType) -> Result<(Value, DType)> {
        let storage = slots.storages[slot];
        if let Some(p) = self.pending.get(&storage.id) {
            return Ok((p.value, p.dtype));
        }
        if let Some(c) = self.captured.get(&storage.id) {
            return Ok(*c);
        }
        let (dtype, n) = slot_layout(storage, reader);
        let st = storage.state();
        let v = match st.buffer {
            Some(buf) => {
                self.inputs.push(buf);
                self.sources.push(Source::Storage(storage.id));
                b.arg(TensorType::new(dtype, [n]))
            }
            None => {
                self.zero_reads.push(storage.id);
                b.splat(dtype, 0.0, &[n])?
            }
        };
        self.captured.insert(storage.id, (v, dtype));
        Ok((v, dtype))
    }
}

/// Records one op into the pending graph and returns its results (fresh
/// tensors are pending storages).
pub fn record_op(engine: &Engine, call: &Call, entry: &lowering::OpEntry) -> Result<Vec<RetValue>> {
    let _held = crate::graph_lock::hold();
    let device = call.device();
    let rets = {
        let mut guard = graphs();
        let g = guard.entry(device).or_insert_with(|| Graph {
            b: Builder::new(),
            device,
            inputs: Vec::new(),
            sources: Vec::new(),
            replay_blocker: None,
            zero_reads: Vec::new(),
            static_constants: CAPTURING.load(std::sync::atomic::Ordering::Relaxed),
            static_offsets: STATIC_OFFSETS.load(std::sync::atomic::Ordering::Relaxed),
            captured: HashMap::new(),
            order: Vec::new(),
            pending: HashMap::new(),
            checks: Vec::new(),
            ops: Vec::new(),
            created: HashSet::new(),
            loop_trace: Default::default(),
            touches_old: Vec::new(),
            key: Default::default(),
        });
        record_into(engine, g, call, entry, device)?
    };
    maybe_flush_at_boundary(engine, device)?;
    Ok(rets)
}

/// How long a graph's append-only parts were before an op was recorded, so
/// that an op failing halfway (a lowering error after some of its arguments
/// were added) leaves the graph exactly as it was.
struct Undo {
    builder: stablehlo::Mark,
    inputs: usize,
    zero_reads: usize,
}

impl Undo {
    fn of(g: &Graph) -> Undo {
        Undo { builder: g.b.mark(), inputs: g.inputs.len(), zero_reads: g.zero_reads.len() }
    }

    fn apply(self, g: &mut Graph) {
        g.b.truncate(self.builder);
        g.inputs.truncate(self.inputs);
        g.sources.truncate(self.inputs);
        g.zero_reads.truncate(self.zero_reads);
        // Storages first read by the failed op were captured as values it made.
        let values = self.builder.values();
        g.captured.retain(|_, (v, _)| v.index() < values);
    }
}

/// Lowers `call` into the graph and adds the arguments it needs.
fn record_inputs(
    engine: &Engine,
    g: &mut Graph,
    call: &Call,
    slots: &crate::program::Slots,
    entry: &lowering::OpEntry,
    device: i32,
) -> Result<crate::program::Recorded> {
    let mut other_inputs = Vec::new();
    let rec = {
        let Graph { b, inputs, sources, zero_reads, captured, pending, static_constants, static_offsets, .. } = g;
        let mut source = GraphSlots {
            inputs,
            sources,
            zero_reads,
            captured,
            pending,
            static_constants: *static_constants,
            static_offsets: *static_offsets,
        };
        record(b, call, slots, entry, None, &mut source, &mut other_inputs)?
    };
    for input in &other_inputs {
        g.inputs.push(resolve_input(engine, call, slots, input, device)?);
        g.sources.push(input_source(call, input));
    }
    Ok(rec)
}

fn record_into(engine: &Engine, g: &mut Graph, call: &Call, entry: &lowering::OpEntry, device: i32) -> Result<Vec<RetValue>> {
    let slots = collect_slots(call);
    // Storages from before the graph, for the loop trace. A fresh output
    // PyTorch allocated for an `.out` op (no value yet) is created here.
    let mut old = Vec::new();
    for st in &slots.storages {
        if g.created.contains(&st.id) {
            continue;
        }
        if g.pending.contains_key(&st.id) || g.captured.contains_key(&st.id) || st.state().buffer.is_some() {
            old.push(st.id);
        } else {
            g.created.insert(st.id);
        }
    }
    let undo = Undo::of(g);
    let rec = match record_inputs(engine, g, call, &slots, entry, device) {
        Ok(rec) => rec,
        Err(e) => {
            undo.apply(g);
            return Err(e);
        }
    };
    g.ops.push(call.op.to_string());
    let mut h = crate::cache::StableHasher::new();
    std::hash::Hash::hash(&(call.op, &old), &mut h);
    g.loop_trace.push(std::hash::Hasher::finish(&h));
    g.touches_old.push(!old.is_empty());
    g.key.add(call);

    let mut new_storage = |idx: usize| -> Result<NewTensor> {
        match &rec.outputs[idx] {
            Output::New { dtype, shape, strides } => {
                let numel: i64 = shape.iter().product();
                let nbytes = numel.max(0) as usize * dtype.size_bytes();
                let storage = Storage::new(nbytes, device);
                storage.pending.store(true, std::sync::atomic::Ordering::Relaxed);
                let id = storage.id;
                let handle = storage.into_handle();
                g.created.insert(id);
                g.order.push(id);
                g.pending.insert(id, Pending { storage: handle as *const Storage, value: rec.results[idx], dtype: *dtype });
                Ok(NewTensor {
                    storage: handle,
                    nbytes,
                    dtype: *dtype,
                    device,
                    sizes: shape.clone(),
                    strides: strides.clone(),
                })
            }
            _ => Err(EngineError::runtime("internal error: return is not a new tensor")),
        }
    };
    let rets = crate::dispatch::map_rets(&rec.rets, &mut new_storage, |_| {
        Err(EngineError::runtime("internal error: a number in a fused graph"))
    })?;
    for (o, v) in rec.outputs.iter().zip(&rec.results) {
        match o {
            Output::Slot { slot, dtype } => {
                let storage = slots.storages[*slot];
                storage.pending.store(true, std::sync::atomic::Ordering::Relaxed);
                if !g.pending.contains_key(&storage.id) {
                    g.order.push(storage.id);
                }
                g.pending.insert(storage.id, Pending { storage: storage as *const Storage, value: *v, dtype: *dtype });
            }
            Output::Check { message } => g.checks.push((*v, message.clone())),
            _ => {}
        }
    }
    Ok(rets)
}

/// Where a non-storage argument of a recorded op comes from.
fn input_source(call: &Call, input: &crate::program::Input) -> Source {
    use crate::call::CallValue;
    use crate::program::Input;
    match input {
        Input::Offset { .. } | Input::ScalarList { .. } => Source::Const,
        Input::Scalar { arg, .. } => match &call.args[*arg].value {
            CallValue::Scalar { from_tensor: true, .. } => Source::Unreplayable("it reads a CPU tensor as a number"),
            _ => Source::Const,
        },
        Input::Host { .. } => Source::Unreplayable("it copies a CPU tensor in"),
        Input::Rng { count } => {
            let explicit = call.args.iter().any(|a| matches!(a.value, CallValue::Generator(p) if !p.is_null()));
            if explicit {
                Source::Unreplayable("it draws from an explicit torch.Generator")
            } else {
                Source::Rng(*count)
            }
        }
        Input::Slot { .. } => Source::Unreplayable("internal: a slot input outside the graph's storages"),
    }
}

fn maybe_flush_at_boundary(engine: &Engine, device: i32) -> Result<()> {
    let (len, repeats) = {
        let g = graphs();
        let Some(g) = g.get(&device) else { return Ok(()) };
        let prev = previous_ops();
        let prev = prev.get(&device).map(|p| p.as_slice()).unwrap_or(&[]);
        // Short sequences repeat by chance (printing reads element after
        // element); only a long one is taken for a step boundary.
        let explicit = EXPLICIT_BOUNDARIES.load(std::sync::atomic::Ordering::Relaxed);
        let tracing = region_tracing();
        (g.ops.len(), !explicit && !tracing && prev.len() >= MIN_REPEAT_OPS && prev.len() == g.ops.len() && prev == g.ops)
    };
    if repeats {
        flush_device(engine, device, "repeating op sequence (end of a step)")?;
    } else if let Some(period) = loop_body(device, len) {
        // A loop whose steps never sync (a generation loop): one program per
        // step from here on, rather than one program for the whole loop,
        // compiled again for every new number of steps.
        flush_device(engine, device, "repeating loop body")?;
        previous_ops().insert(device, period);
    } else if len >= MAX_GRAPH_OPS {
        // Cut here, then every period of the loop: the next graphs are one
        // period each, the same program every time.
        let period = graphs()
            .get(&device)
            .and_then(|g| crate::step_period::tail_period(&g.ops, MIN_REPEAT_OPS).map(|p| g.ops[g.ops.len() - p..].to_vec()));
        flush_device(engine, device, "graph size bound")?;
        if let Some(period) = period {
            previous_ops().insert(device, period);
        }
    }
    Ok(())
}

/// The op names of one loop body, if the tail of `device`'s graph of `len`
/// ops is two copies of it that touch the same storages from before the
/// graph (checked every LOOP_CHECK_EVERY ops).
fn loop_body(device: i32, len: usize) -> Option<Vec<String>> {
    if len < 2 * MIN_REPEAT_OPS || len % LOOP_CHECK_EVERY != 0 || EXPLICIT_BOUNDARIES.load(std::sync::atomic::Ordering::Relaxed) {
        return None;
    }
    let g = graphs();
    let g = g.get(&device)?;
    let p = g.loop_trace.tail_period(MIN_REPEAT_OPS)?;
    // A run of one op that touches nothing from before the graph is no loop:
    // an optimizer filling the zeros of its first step's state repeats
    // `zero_` alike. (A loop that reads no weight, `x = x * a + b`, must
    // still be cut early: XLA's compile time grows faster than linearly
    // with such a chain.)
    let body = &g.ops[len - p..];
    let reads_weights = g.touches_old[len - p..].iter().any(|&t| t);
    (reads_weights || body.iter().any(|op| op != &body[0])).then(|| body.to_vec())
}

/// Whether ops are waiting in any device's graph.
pub fn has_pending() -> bool {
    graphs().values().any(|g| !g.ops.is_empty())
}

fn has_pending_on(device: i32) -> bool {
    graphs().get(&device).is_some_and(|g| !g.ops.is_empty())
}

/// Before a host upload replaces the whole buffer of `storage`: whether the
/// pending graph must run first (it writes the storage, so its result would
/// land after the upload). Otherwise the graph keeps the old buffer it
/// captured (PJRT buffers are immutable) and forgets the capture, so ops
/// recorded later read the uploaded data: a batch copied in mid-graph does
/// not cut the graph.
pub fn host_overwrite_needs_flush(storage: &Storage) -> bool {
    let mut guard = graphs();
    let Some(g) = guard.get_mut(&storage.device) else { return false };
    if g.pending.contains_key(&storage.id) {
        return true;
    }
    if g.captured.remove(&storage.id).is_some() {
        g.replay_blocker = Some("a tensor it reads was overwritten from the host while it was recorded");
    }
    false
}

/// What a flush ran: enough to run the same program again on new buffers
/// (`replay.rs`).
pub struct Flushed {
    pub compiled: Arc<Compiled>,
    pub device: i32,
    /// The program's arguments and where each came from.
    pub inputs: Vec<Arc<pjrt::Buffer>>,
    pub sources: Vec<Source>,
    /// The storage (id) and dtype each leading result was written to.
    pub results: Vec<(u64, DType)>,
    /// Messages of the index checks, whose flags follow the results.
    pub checks: Vec<String>,
    /// Arguments donated to their results.
    pub donate: Vec<usize>,
    pub replay_blocker: Option<&'static str>,
    /// Storages read as zeros because they were never written.
    pub zero_reads: Vec<u64>,
}

/// Compiles (or reuses) and runs every device's pending graph, then gives
/// every live pending storage its buffer. `reason` is counted in the metrics.
pub fn flush(engine: &Engine, reason: &str) -> Result<()> {
    flush_reporting(engine, reason).map(|_| ())
}

/// [`flush`] for one device's graph.
pub fn flush_device(engine: &Engine, device: i32, reason: &str) -> Result<()> {
    let _held = crate::graph_lock::hold();
    let Some(g) = graphs().remove(&device) else { return Ok(()) };
    run_graph(engine, g, reason).map(|_| ())
}

/// [`flush`], returning what ran (None when nothing was pending). A capture
/// for replay records on one device; graphs of several are not replayable.
pub fn flush_reporting(engine: &Engine, reason: &str) -> Result<Option<Flushed>> {
    let _held = crate::graph_lock::hold();
    let all = std::mem::take(&mut *graphs());
    let several = all.values().filter(|g| !g.ops.is_empty()).count() > 1;
    let mut last = None;
    for g in all.into_values() {
        if let Some(f) = run_graph(engine, g, reason)? {
            last = Some(f);
        }
    }
    if several {
        if let Some(f) = last.as_mut() {
            f.replay_blocker = Some("it runs ops on more than one device");
        }
    }
    Ok(last)
}

/// Compiles (or reuses) and runs one graph taken out of GRAPHS.
fn run_graph(engine: &Engine, g: Graph, reason: &str) -> Result<Option<Flushed>> {
    if g.ops.is_empty() {
        return Ok(None);
    }
    Metrics::inc(&engine.metrics.graph_flushes);
    Metrics::bump(&engine.metrics.flush_reasons, reason);
    previous_ops().insert(g.device, g.ops.clone());

    // Only this graph's dead storages: the other devices' stay listed.
    let dead: HashSet<u64> = {
        let mut all = DEAD.lock().unwrap_or_else(|e| e.into_inner());
        let all = all.get_or_insert_with(HashSet::new);
        g.pending.keys().filter(|id| all.remove(id)).copied().collect()
    };
    let live_ids: Vec<u64> = g.order.iter().copied().filter(|id| !dead.contains(id) && g.pending.contains_key(id)).collect();
    let live: Vec<&Pending> = live_ids.iter().filter_map(|id| g.pending.get(id)).collect();
    let mut results: Vec<Value> = live.iter().map(|p| p.value).collect();
    results.extend(g.checks.iter().map(|(v, _)| *v));
    let aliases = donations(&g, &live);
    let text = g.b.finish_aliased(&results, &aliases);

    // Two independent hashes of the text (and its length) identify the graph.
    let (hash, second) = fingerprint(&text);
    let key = [text.len() as i64, second as i64];
    let cached = engine.cache.get(hash, "fused graph", &key);
    // (The cheap tests first: a cached graph outside tracing, every step of
    // a steady loop, takes no lock here.)
    let ask = (region_tracing() || cached.is_none()) && !in_compiled_graph() && !IN_BUCKET_HOOK.with(|h| h.get());
    if let Some(hook) = if ask { bucket_hook() } else { None } {
        // Sizes that keep changing, not the one odd size of a last partial batch.
        let new_sizes = cached.is_none()
            && crate::graph_history::other_sizes_seen(&g.key) >= crate::graph_history::SIZES_BEFORE_HINT - 1;
        // A storage it reads was overwritten from the host mid-graph: the
        // trace saw only the new value, so no storages (nothing to take over).
        let handles: Vec<usize> = match g.replay_blocker {
            Some(_) => Vec::new(),
            None => live.iter().map(|p| p.storage as usize).collect(),
        };
        // True: the hook gave each of them its value (and they may be gone
        // by now: Python code ran), so the graph is dropped unrun.
        IN_BUCKET_HOOK.with(|h| h.set(true));
        let handled = hook(g.device, &handles, cached.is_some(), new_sizes);
        IN_BUCKET_HOOK.with(|h| h.set(false));
        if handled {
            Metrics::inc(&engine.metrics.bucketed_regions);
            return Ok(None);
        }
    }
    let compiled = match cached {
        Some(c) => {
            Metrics::inc(&engine.metrics.cache_hits_memory);
            c
        }
        None => {
            use crate::graph_history::{note_compile, Novelty};
            let novelty = note_compile(&g.key, !in_compiled_graph());
            if novelty == Novelty::NewOffsets && g.static_offsets {
                STATIC_OFFSETS.store(false, std::sync::atomic::Ordering::Relaxed);
            }
            let reason = match novelty {
                _ if !engine.cache.has_op("fused graph") => "new op",
                Novelty::NewOps | Novelty::NewLiveness => "new graph",
                // A varying batch or sequence length.
                Novelty::NewSizes => "new sizes or dtypes for a graph seen before",
                Novelty::NewOffsets => "new view offsets for a graph seen before",
            };
            crate::dispatch::dump_ir(engine, "fused graph", &text);
            let start = Instant::now();
            let (executable, from_disk) = crate::disk_cache::compile_cached(
                engine,
                &text,
                pjrt::PORTABLE_COMPILE_OPTIONS,
                || crate::compile_affinity::compile_for_size(&engine.platform, g.ops.len(), || engine.client.compile(&text)),
            )
            .map_err(|e| EngineError::runtime(format!("fused graph of {} ops: XLA could not compile it: {e}", g.ops.len())))?;
            let m = &engine.metrics;
            if !from_disk {
                Metrics::inc(&m.compiles);
                m.compile_nanos.fetch_add(start.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
                Metrics::bump(&m.recompile_reasons, reason);
            }
            let c = Arc::new(Compiled {
                program: Program { text, inputs: Vec::new(), outputs: Vec::new(), rets: Vec::new() },
                executable,
            });
            engine.cache.insert(hash, "fused graph", key.to_vec(), c.clone());
            c
        }
    };
    let donate: Vec<usize> = aliases.iter().map(|&(arg, _)| arg).collect();
    let what = format!("fused graph of {} ops", g.ops.len());
    let mut outs = execute_graph(engine, &compiled, &g.inputs, &donate, g.device, &what)?.into_iter();
    for p in &live {
        let Some(buf) = outs.next() else { break };
        // SAFETY: not in DEAD, so the storage is alive.
        let storage = unsafe { &*p.storage };
        storage.set(buf, p.dtype);
        storage.pending.store(false, std::sync::atomic::Ordering::Relaxed);
    }
    let checks: Vec<String> = g.checks.iter().map(|(_, m)| m.clone()).collect();
    push_checks(engine, outs, &checks);
    let results = live_ids.iter().zip(&live).map(|(id, p)| (*id, p.dtype)).collect();
    Ok(Some(Flushed {
        compiled,
        device: g.device,
        inputs: g.inputs,
        sources: g.sources,
        results,
        checks,
        donate,
        replay_blocker: g.replay_blocker,
        zero_reads: g.zero_reads,
    }))
}

/// Runs a graph's program (donating `donate`) and counts it; `what` names
/// it in an error. Shared by flushes and replays.
pub(crate) fn execute_graph(
    engine: &Engine,
    compiled: &Compiled,
    inputs: &[Arc<pjrt::Buffer>],
    donate: &[usize],
    device: i32,
    what: &str,
) -> Result<Vec<Arc<pjrt::Buffer>>> {
    let refs: Vec<&pjrt::Buffer> = inputs.iter().map(|b| b.as_ref()).collect();
    let outs = compiled
        .executable
        .execute_donating(&refs, donate, Some(engine.device(device)?))
        .map_err(|e| EngineError::pjrt(&format!("{what}: execution failed: "), e))?;
    let m = &engine.metrics;
    Metrics::inc(&m.executions);
    let donated = donate.iter().filter(|&&i| inputs[i].is_deleted()).count() as u64;
    m.donated_buffers.fetch_add(donated, std::sync::atomic::Ordering::Relaxed);
    if let Some(last) = outs.last() {
        crate::dispatch::note_output(last);
    }
    Ok(outs.into_iter().map(Arc::new).collect())
}

/// Hands the index-check flags that follow a graph's results to the engine,
/// to be raised at the next sync.
pub(crate) fn push_checks(engine: &Engine, flags: impl Iterator<Item = Arc<pjrt::Buffer>>, messages: &[String]) {
    for (flag, message) in flags.zip(messages) {
        engine.checks.push(flag, message.clone());
    }
}

/// In-place updates donate: a storage overwritten in this graph whose old
/// buffer is a graph argument held by nobody else (not shared with another
/// storage, not captured twice) gives that buffer to its new value, so an
/// optimizer step does not hold old and new parameters at once. Returns
/// (argument, result) pairs.
/// `TORCH_TPU_DONATE=0` turns donation off (to measure what it saves).
fn donations(g: &Graph, live: &[&Pending]) -> Vec<(usize, usize)> {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let enabled = *ENABLED.get_or_init(|| std::env::var("TORCH_TPU_DONATE").map(|v| v != "0").unwrap_or(true));
    let args = g.b.args();
    if !enabled || args.len() != g.inputs.len() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (r, p) in live.iter().enumerate() {
        // SAFETY: live pending storages are not in DEAD, so they are alive.
        let storage = unsafe { &*p.storage };
        let Some((arg, _)) = g.captured.get(&storage.id) else { continue };
        let Some(i) = args.iter().position(|a| a == arg) else { continue };
        if g.b.ty(*arg) != g.b.ty(p.value) {
            continue;
        }
        let held_by_storage = storage.state().buffer.as_ref().map(|b| Arc::ptr_eq(b, &g.inputs[i])).unwrap_or(false);
        // Holders: the graph's input list and the storage itself.
        if held_by_storage && Arc::strong_count(&g.inputs[i]) == 2 {
            out.push((i, r));
        }
    }
    out
}

/// Two independent 64-bit hashes of a program text, 8 bytes at a time (the
/// text of a training step is hundreds of KB and is hashed at every flush).
fn fingerprint(text: &str) -> (u64, u64) {
    let (mut a, mut b) = (0x9e37_79b9_7f4a_7c15u64, 0xc2b2_ae3d_27d4_eb4fu64);
    let bytes = text.as_bytes();
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        a = (a ^ w).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
        b = (b.rotate_left(17) ^ w).wrapping_mul(0xff51_afd7_ed55_8ccd);
    }
    for &c in chunks.remainder() {
        a = (a ^ c as u64).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
        b = (b.rotate_left(17) ^ c as u64).wrapping_mul(0xff51_afd7_ed55_8ccd);
    }
    let n = bytes.len() as u64;
    (a ^ n, b ^ n.rotate_left(32))
}

/// Runs the pending graph, if any, before a non-fused path touches data.
/// Waits for a flush in progress on another thread: until it ends, the
/// storages it writes have no buffers yet.
pub fn flush_if_pending(engine: &Engine, reason: &str) -> Result<()> {
    let _held = crate::graph_lock::hold();
    if has_pending() {
        flush(engine, reason)?;
    }
    Ok(())
}

/// [`flush_if_pending`] for the one device whose data a path touches.
pub fn flush_device_if_pending(engine: &Engine, device: i32, reason: &str) -> Result<()> {
    let _held = crate::graph_lock::hold();
    if has_pending_on(device) {
        flush_device(engine, device, reason)?;
    }
    Ok(())
}
