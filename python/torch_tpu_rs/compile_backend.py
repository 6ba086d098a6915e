"""`torch.compile(fn, backend="tpu")`.

Dynamo captures Python into FX graphs; AOTAutograd turns each into an ATen
forward graph and an ATen backward graph. Each ATen graph runs through the
engine's Fused Eager recorder: every op goes through the same Rust lowering
table as eager mode and lands in one pending graph, which is compiled by XLA
as ONE StableHLO program per graph call and cached (in memory and on disk)
by its structure, shapes and dtypes. Runtime scalars stay arguments, so a
changed learning rate does not recompile. CPU tensors in the graph (such as
AdamW's step counter) stay on the CPU, exactly as in eager mode.

Recording costs tens of microseconds per op on the host, so a graph is
recorded once and later calls replay its program on the new arguments
(`_replay.py`); `graph_replays` in the metrics counts them, and
`unreplayable_graphs` says why a graph had to be recorded every time.

Graphs with symbolic sizes (`dynamic=True`, `mark_dynamic`, automatic
dynamic) are bucketed (see `_bucketing.py`): one program per power-of-two
size instead of one per size, for inference and for the forward and
backward graphs of training alike.

The backend is registered when Dynamo is first imported (`_after_dynamo.py`),
so `import torch` does not pay for importing Dynamo.

Graph breaks are Dynamo's: the code between graphs runs in the current
eager mode. `torch_tpu_rs.metrics()` reports `compiled_graphs` (graphs
handed to this backend: first compiles and Dynamo recompiles),
`graph_breaks`, and `graph_recompiles` with `graph_recompile_reasons`
(the guard that failed -> count).
"""
from __future__ import annotations

import threading

import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

from . import _bucketing, _padded_call, _replay, _rng_recompute

_rng_recompute.install()

_counts = {"compiled_graphs": 0, "bucketed_graphs": 0, "exact_shape_graphs": {}, "exact_shape_calls": {},
           "unreplayable_graphs": {}}
_lock = threading.Lock()


def _one_program(gm: torch.fx.GraphModule, kind: str):
    """A callable that records `gm` through Fused Eager as one program on
    every call (graphs whose sizes change between calls)."""
    return lambda *args: _replay._record(gm, args, f"end of a compiled {kind} graph")


def _replayed(gm: torch.fx.GraphModule, kind: str):
    """A callable that records `gm` once, then replays its program."""
    graph = _replay.ReplayedGraph(gm, kind)
    reported = []

    def run(*args):
        out = graph(*args)
        if graph.why_not and not reported:
            reported.append(True)
            _count("unreplayable_graphs", graph.why_not)
        return out

    return run


def _count(key: str, reason: str | None = None):
    with _lock:
        if reason is None:
            _counts[key] += 1
        else:
            _counts[key][reason] = _counts[key].get(reason, 0) + 1


def _bucketed_or_exact(gm, kind: str, saved: dict):
    """Graphs with symbolic sizes run at bucket sizes when `_bucketing` can
    prove that exact (one program per power-of-two size); others, and calls
    whose inputs cannot be padded, run at their exact sizes. `saved` is
    shared by the forward and backward graphs of one Dynamo graph: the
    forward's plan lays out the tensors it saves for the backward's."""
    replayed = _replayed(gm, kind)
    if not _bucketing.has_symbolic_shapes(gm):
        return make_boxed_func(replayed)

    def exact(*args):
        # A backward graph may get the padded tensors a bucketed forward saved.
        return replayed(*_padded_call.unpadded(list(args)))

    try:
        plan = _bucketing.plan(gm, saved, forward=kind == "forward")
    except _bucketing.Unpaddable as e:
        _count("exact_shape_graphs", str(e))
        return make_boxed_func(exact)
    if kind == "forward":
        plan.saved_from = _saved_outputs_start()
    _count("bucketed_graphs")
    run = _one_program(plan.gm, kind)

    def call(*args):
        try:
            return _padded_call.run_padded(plan, run, list(args))
        except _padded_call.NotPaddable as e:
            _count("exact_shape_calls", str(e))
            return exact(*args)

    return make_boxed_func(call)


def _saved_outputs_start() -> int | None:
    """Where the tensors saved for backward start among a forward graph's
    outputs (AOTAutograd's metadata, while it compiles the forward)."""
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None)
    return getattr(meta, "num_forward", None)


def _compiler(kind: str, saved: dict):
    def compile_graph(gm, example_inputs):
        _drain_recompile_reasons()
        _count("compiled_graphs")
        return _bucketed_or_exact(gm, kind, saved)

    return compile_graph


def tpu_backend(gm, example_inputs, **kwargs):
    """Compiles one Dynamo graph: AOTAutograd splits it into ATen graphs, a
    forward and a backward for training, or one graph run without autograd.

    keep_inference_input_mutations: an optimizer step compiled on its own
    updates parameters with copy_ inside the graph, so the fused program
    writes their storages and donates the old buffers (instead of returning
    new tensors that AOTAutograd copies back afterwards)."""
    saved: dict = {}
    return aot_autograd(
        fw_compiler=_compiler("forward", saved),
        bw_compiler=_compiler("backward", saved),
        inference_compiler=_compiler("inference", saved),
        keep_inference_input_mutations=True,
    )(gm, example_inputs, **kwargs)


# Dynamo keeps only its last 64 compilation records, so their recompile
# reasons are moved into these counts as they appear: on every graph this
# backend compiles and on every metrics() call. Records are told apart by
# compile id and start time (ids restart after torch._dynamo.reset()).
_recompile_counts: dict = {}
_records_counted: set = set()


def _drain_recompile_reasons() -> None:
    """Counts Dynamo's new recompiles by the guard that failed (first line,
    without the frame prefix and source comment)."""
    import re

    from torch._dynamo import utils

    records = getattr(utils, "get_compilation_metrics", lambda: [])()
    keys = [(getattr(m, "compile_id", None), getattr(m, "start_time", None)) for m in records]
    new = [m for m, key in zip(records, keys) if key not in _records_counted]
    # Only records Dynamo still holds can come back: remember just those.
    _records_counted.clear()
    _records_counted.update(keys)
    for m in new:
        reason = getattr(m, "recompile_reason", None)
        if not reason:
            continue
        first = re.sub(r"^\d+/\d+: ", "", reason.strip().splitlines()[0]).split("#")[0].strip()
        _recompile_counts[first] = _recompile_counts.get(first, 0) + 1


def counts() -> dict:
    from torch._dynamo.utils import counters

    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in _counts.items()}
    out["graph_breaks"] = sum(counters["graph_break"].values())
    _drain_recompile_reasons()
    out["graph_recompile_reasons"] = dict(_recompile_counts)
    out["graph_recompiles"] = sum(out["graph_recompile_reasons"].values())
    return out
