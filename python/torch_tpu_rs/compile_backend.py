"""`torch.compile(fn, backend="tpu")`.

Dynamo captures Python into FX graphs; AOTAutograd turns each into an ATen
forward graph and an ATen backward graph. Each ATen graph runs through the
engine's Fused Eager recorder: every op goes through the same Rust lowering
table as eager mode and lands in one pending graph, which is compiled by XLA
as ONE StableHLO program per graph call and cached (in memory and on disk)
by its structure, shapes and dtypes. Runtime scalars stay arguments, so a
changed learning rate does not recompile. CPU tensors in the graph (such as
AdamW's step counter) stay on the CPU, exactly as in eager mode.

Graph breaks are Dynamo's: the code between graphs runs in the current
eager mode. `torch_tpu_rs.metrics()` reports `compiled_graphs` (graphs
handed to this backend: first compiles and Dynamo recompiles) and
`graph_breaks`.
"""
from __future__ import annotations

import threading

import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd

from . import _C

_counts = {"compiled_graphs": 0}
_lock = threading.Lock()


def _as_one_program(gm: torch.fx.GraphModule, example_inputs, kind: str):
    with _lock:
        _counts["compiled_graphs"] += 1

    def run(*args):
        previous = _C.get_eager_mode()
        if previous != "fused":
            _C.set_eager_mode("fused")
        try:
            out = gm(*args)
            _C.flush(f"end of a compiled {kind} graph")
        finally:
            if previous != "fused":
                _C.set_eager_mode(previous)
        return out

    return make_boxed_func(run)


def _forward(gm, example_inputs):
    return _as_one_program(gm, example_inputs, "forward")


def _backward(gm, example_inputs):
    return _as_one_program(gm, example_inputs, "backward")


tpu_backend = aot_autograd(fw_compiler=_forward, bw_compiler=_backward)


def register() -> None:
    from torch._dynamo import register_backend

    register_backend(name="tpu")(tpu_backend)


def counts() -> dict:
    from torch._dynamo.utils import counters

    out = dict(_counts)
    out["graph_breaks"] = sum(counters["graph_break"].values())
    return out
