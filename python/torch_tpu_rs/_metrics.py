"""Engine metrics: compiles, cache hits, executions, host syncs, fallbacks."""
from __future__ import annotations

from . import _C


def metrics() -> dict:
    """A snapshot of the engine's counters.

    Keys: compiles, compile_seconds, cache_hits_memory, cache_hits_disk,
    executions, host_syncs, graph_flushes, graph_replays (compiled graphs run
    again from their recorded program), fallbacks (op -> count),
    recompile_reasons (reason -> count), host_sync_sources (source -> count),
    flush_reasons (reason -> count), cached_programs, and for torch.compile:
    compiled_graphs, graph_breaks, graph_recompiles and graph_recompile_reasons
    (Dynamo guard that failed -> count), bucketed_graphs (graphs with symbolic
    sizes run at power-of-two buckets) and exact_shape_graphs (reason ->
    count: symbolic graphs that could not be bucketed and compile per size),
    exact_shape_calls (reason -> count: calls of a bucketed graph whose inputs
    could not be padded, run at exact sizes),
    unreplayable_graphs (reason -> count: compiled graphs recorded on every
    call instead of replayed); for Fused Eager's shape buckets:
    bucketed_regions (graphs at new sizes run by a bucketed program) and
    fused_bucket_refusals (reason -> count: regions that could not be).
    """
    m = dict(_C.metrics())
    import sys

    backend = sys.modules.get("torch_tpu_rs.compile_backend")
    m.update(backend.counts() if backend is not None else _NOTHING_COMPILED)
    buckets = sys.modules.get("torch_tpu_rs._fused_buckets")
    m["fused_bucket_refusals"] = buckets.refusals() if buckets is not None else {}
    return m


# The torch.compile keys before the backend is loaded (it loads with Dynamo).
_NOTHING_COMPILED = {"compiled_graphs": 0, "bucketed_graphs": 0, "exact_shape_graphs": {}, "exact_shape_calls": {},
                     "unreplayable_graphs": {},
                     "graph_breaks": 0, "graph_recompile_reasons": {}, "graph_recompiles": 0}


def metrics_report() -> str:
    """The metrics as readable text."""
    m = metrics()
    lines = [
        "torch_tpu_rs metrics",
        f"  compiles:          {m['compiles']} ({m['compile_seconds']:.2f} s)",
        f"  cache hits:        {m['cache_hits_memory']} in memory, {m['cache_hits_disk']} on disk",
        f"  cached programs:   {m['cached_programs']}",
        f"  executions:        {m['executions']}",
        f"  graph flushes:     {m['graph_flushes']}",
        f"  graph replays:     {m['graph_replays']}",
        f"  torch.compile:     {m.get('compiled_graphs', 0)} graphs, {m.get('graph_breaks', 0)} graph breaks, "
        f"{m.get('bucketed_graphs', 0)} bucketed, {m.get('graph_recompiles', 0)} recompiles",
        f"  host syncs:        {m['host_syncs']}",
    ]
    for source, n in sorted(m["host_sync_sources"].items(), key=lambda kv: -kv[1]):
        lines.append(f"    {n:>8}  {source}")
    lines.append(f"  recompile reasons: {sum(m['recompile_reasons'].values())}")
    for reason, n in sorted(m["recompile_reasons"].items(), key=lambda kv: -kv[1]):
        lines.append(f"    {n:>8}  {reason}")
    for reason, n in sorted(m.get("graph_recompile_reasons", {}).items(), key=lambda kv: -kv[1]):
        lines.append(f"    {n:>8}  recompiled: {reason}")
    for reason, n in sorted(m.get("unreplayable_graphs", {}).items(), key=lambda kv: -kv[1]):
        lines.append(f"    {n:>8}  recorded every call: {reason}")
    for reason, n in sorted(m.get("exact_shape_graphs", {}).items(), key=lambda kv: -kv[1]):
        lines.append(f"    {n:>8}  compiled per size: {reason}")
    for reason, n in sorted(m.get("exact_shape_calls", {}).items(), key=lambda kv: -kv[1]):
        lines.append(f"    {n:>8}  call run at exact sizes: {reason}")
    lines.append(f"  cpu fallbacks:     {sum(m['fallbacks'].values())}")
    for op, n in sorted(m["fallbacks"].items(), key=lambda kv: -kv[1]):
        lines.append(f"    {n:>8}  {op}")
    return "\n".join(lines)
