//! Replay of compiled graphs. A `torch.compile` graph is recorded once
//! through Fused Eager (every op dispatched, lowered and added to the pending
//! graph), which costs tens of microseconds per op on the host. The program
//! that flush runs depends only on the graph, so later calls skip the
//! recording: they feed the new arguments' buffers to the same executable
//! and hand its results to the new output storages.
//!
//! A capture maps each program argument to a graph argument (by storage), a
//! constant, or a random-number draw, and each result to a graph argument
//! updated in place or to an output storage. Anything else (a CPU tensor read
//! as a number, an op that ran outside the graph, a result kept by nobody)
//! makes the graph unreplayable, and the caller records it every time.
use std::sync::{Arc, Mutex};

use stablehlo::DType;

use crate::cache::Compiled;
use crate::error::{EngineError, Result};
use crate::fused::{self, Source};
use crate::metrics::Metrics;
use crate::runtime::Engine;
use crate::storage::Storage;

enum Feed {
    /// The buffer of graph argument `index`, which must have the element
    /// type and length of the buffer read at capture.
    Arg { index: usize, ty: pjrt::ElementType, len: usize },
    Const(Arc<pjrt::Buffer>),
    Rng(u64),
}

enum Dest {
    /// Graph argument `index` is updated in place.
    Arg(usize),
    /// Output storage `index`.
    Output(usize),
}

pub struct Plan {
    compiled: Arc<Compiled>,
    device: i32,
    feeds: Vec<Feed>,
    results: Vec<(Dest, DType)>,
    checks: Vec<String>,
    donate: Vec<usize>,
}

/// Live plans by id; a dropped plan leaves a hole for the next one (a plan
/// holds its executable, so dead graphs must not keep theirs).
static PLANS: Mutex<Vec<Option<Arc<Plan>>>> = Mutex::new(Vec::new());

fn plan(id: usize) -> Option<Arc<Plan>> {
    PLANS.lock().unwrap_or_else(|e| e.into_inner()).get(id).cloned().flatten()
}

/// Forgets plan `id` (its compiled graph is gone or was recorded again).
pub fn drop_plan(id: usize) {
    if let Some(slot) = PLANS.lock().unwrap_or_else(|e| e.into_inner()).get_mut(id) {
        *slot = None;
    }
}

/// How many plans are live.
pub fn live_plans() -> usize {
    PLANS.lock().unwrap_or_else(|e| e.into_inner()).iter().filter(|p| p.is_some()).count()
}

/// Counters read at the start of a capture: if anything ran besides the one
/// flush at its end, the graph was not recorded whole.
#[derive(Clone, Copy)]
pub struct Mark {
    flushes: u64,
    executions: u64,
}

impl From<Mark> for (u64, u64) {
    fn from(m: Mark) -> Self {
        (m.flushes, m.executions)
    }
}

impl From<(u64, u64)> for Mark {
    fn from((flushes, executions): (u64, u64)) -> Self {
        Mark { flushes, executions }
    }
}

/// Runs whatever is pending, then marks the start of a capture.
pub fn capture_begin(engine: &Engine) -> Result<Mark> {
    fused::flush_if_pending(engine, "before a compiled graph is recorded")?;
    fused::set_capturing(true);
    let m = &engine.metrics;
    Ok(Mark { flushes: Metrics::get(&m.graph_flushes), executions: Metrics::get(&m.executions) })
}

/// Flushes the recorded graph (counted under `reason`) and returns a plan id
/// to replay it, or why it cannot be replayed. `args` are the storages of the
/// graph's tensor arguments; `outputs` the distinct storages of its outputs
/// that are not arguments.
pub fn capture_end(
    engine: &Engine,
    mark: Mark,
    args: &[&Storage],
    outputs: &[&Storage],
    reason: &str,
) -> Result<std::result::Result<usize, String>> {
    fused::set_capturing(false);
    let m = &engine.metrics;
    let whole = Metrics::get(&m.graph_flushes) == mark.flushes && Metrics::get(&m.executions) == mark.executions;
    let Some(f) = fused::flush_reporting(engine, reason)? else {
        return Ok(Err("it runs no device op".into()));
    };
    if !whole {
        return Ok(Err("part of it ran outside its program (an op synced with the host or could not be recorded)".into()));
    }
    if let Some(why) = f.replay_blocker {
        return Ok(Err(why.into()));
    }
    let arg_of = |id: u64| args.iter().position(|s| s.id == id);
    if f.zero_reads.iter().any(|&id| arg_of(id).is_some()) {
        return Ok(Err("it reads an input that was never written".into()));
    }
    let mut feeds = Vec::with_capacity(f.sources.len());
    for (source, buffer) in f.sources.iter().zip(&f.inputs) {
        feeds.push(match *source {
            Source::Storage(id) => match arg_of(id) {
                Some(index) => Feed::Arg { index, ty: buffer.element_type(), len: buffer.element_count() },
                None => return Ok(Err("it reads a device tensor that is not one of its inputs".into())),
            },
            Source::Const => Feed::Const(buffer.clone()),
            Source::Rng(count) => Feed::Rng(count),
            Source::Unreplayable(why) => return Ok(Err(why.into())),
        });
    }
    let mut results = Vec::with_capacity(f.results.len());
    let mut written = vec![false; outputs.len()];
    for &(id, dtype) in &f.results {
        let dest = match (arg_of(id), outputs.iter().position(|s| s.id == id)) {
            (Some(index), _) => Dest::Arg(index),
            (None, Some(index)) => {
                written[index] = true;
                Dest::Output(index)
            }
            (None, None) => return Ok(Err("a value it computes outlives it without being an output".into())),
        };
        results.push((dest, dtype));
    }
    if written.iter().any(|w| !w) {
        return Ok(Err("an output is not computed by its program".into()));
    }
    let plan = Plan { compiled: f.compiled, device: f.device, feeds, results, checks: f.checks, donate: f.donate };
    let mut plans = PLANS.lock().unwrap_or_else(|e| e.into_inner());
    let plan = Some(Arc::new(plan));
    Ok(Ok(match plans.iter().position(|p| p.is_none()) {
        Some(id) => {
            plans[id] = plan;
            id
        }
        None => {
            plans.push(plan);
            plans.len() - 1
        }
    }))
}

/// Ends a capture that failed before `capture_end` (the recording raised).
pub fn capture_cancel() {
    fused::set_capturing(false);
}

/// Graph arguments (by index) that a plan updates in place.
pub fn updated_args(plan: usize) -> Vec<usize> {
    let Some(p) = self::plan(plan) else { return Vec::new() };
    p.results.iter().filter_map(|(d, _)| if let Dest::Arg(i) = d { Some(*i) } else { None }).collect()
}

/// Runs plan `plan` on new storages. Returns false, having run nothing, when
/// an argument no longer matches the capture (the caller records instead).
pub fn replay(engine: &Engine, plan: usize, args: &[&Storage], outputs: &[&Storage]) -> Result<bool> {
    let Some(p) = self::plan(plan) else {
        return Err(EngineError::runtime(format!("internal error: no compiled-graph plan {plan}")));
    };
    // Held to the end: no other thread records between the flush and the
    // new buffers landing in the storages.
    let _held = crate::graph_lock::hold();
    fused::flush_if_pending(engine, "before a compiled graph replays")?;
    let mut inputs = Vec::with_capacity(p.feeds.len());
    for feed in &p.feeds {
        inputs.push(match feed {
            Feed::Arg { index, ty, len } => {
                let Some(s) = args.get(*index) else { return Ok(false) };
                match s.state().buffer {
                    Some(b) if b.element_type() == *ty && b.element_count() == *len && s.device == p.device => b,
                    _ => return Ok(false),
                }
            }
            Feed::Const(b) => b.clone(),
            Feed::Rng(count) => crate::dispatch::rng_buffer(engine, std::ptr::null_mut(), p.device, *count)?,
        });
    }
    // The program aliases each donated argument to a result: donate only a
    // buffer held by its storage alone (and this list).
    if p.donate.iter().any(|&i| Arc::strong_count(&inputs[i]) != 2) {
        return Ok(false);
    }
    if outputs.len() != p.results.iter().filter(|(d, _)| matches!(d, Dest::Output(_))).count() {
        return Ok(false);
    }
    let mut outs = fused::execute_graph(engine, &p.compiled, &inputs, &p.donate, p.device, "compiled graph")?.into_iter();
    Metrics::inc(&engine.metrics.graph_replays);
    for (dest, dtype) in &p.results {
        let Some(buf) = outs.next() else { break };
        let storage = match dest {
            Dest::Arg(i) => args[*i],
            Dest::Output(i) => outputs[*i],
        };
        storage.set(buf, *dtype);
    }
    fused::push_checks(engine, outs, &p.checks);
    Ok(true)
}
