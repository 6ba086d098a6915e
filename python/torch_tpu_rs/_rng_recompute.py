"""Random ops recomputed by torch.compile's activation checkpointing, on tpu.

The partitioner wraps a checkpointed region's random ops (dropout) in two
higher-order ops: `run_and_save_rng_state` saves the device generator's
state before the forward op, and `run_with_rng_state` runs the backward's
recompute with that state, so both see the same random numbers. Their
device table lists cuda, cpu, hpu and xpu only ("Backend not supported for
tpu"); this adds tpu with the cuda entries' meaning.

A graph holding them is recorded on every call, never replayed
(`_replay.py`): a replay would draw fresh numbers where the recompute must
reuse saved ones.
"""
from __future__ import annotations

import torch
from torch._C import DispatchKey

HOP_NAMES = ("run_and_save_rng_state", "run_with_rng_state")


def _device(args, kwargs):
    from torch._prims import rng_prims

    return rng_prims.get_device(args, kwargs)


def _save_and_run(op, *args, **kwargs):
    return torch.tpu.get_rng_state(), op(*args, **kwargs)


def _run_with(rng_state, op, *args, **kwargs):
    current = torch.tpu.get_rng_state()
    torch.tpu.set_rng_state(rng_state.cpu())
    try:
        return op(*args, **kwargs)
    finally:
        torch.tpu.set_rng_state(current)


def install() -> None:
    """Teaches both ops the tpu device (idempotent)."""
    from torch._prims import rng_prims

    save, run_with = rng_prims.run_and_save_rng_state, rng_prims.run_with_rng_state
    if getattr(save.py_kernels[DispatchKey.BackendSelect], "_routes_tpu", False):
        return

    def routed(hop, tpu_impl, has_state):
        other = hop.py_kernels[DispatchKey.BackendSelect]

        def select(*args, **kwargs):
            op_args = args[2:] if has_state else args[1:]
            if _device(op_args, kwargs) == "tpu":
                return tpu_impl(*args, **kwargs)
            return other(*args, **kwargs)

        select._routes_tpu = True
        return select

    # Their kernels for real tensors: the compiled graph runs them eagerly.
    save.py_kernels[DispatchKey.BackendSelect] = routed(save, _save_and_run, has_state=False)
    run_with.py_kernels[DispatchKey.BackendSelect] = routed(run_with, _run_with, has_state=True)

    for hop in (save, run_with):
        getattr(hop, "_dispatch_cache", {}).clear()


def holds_rng_recompute(gm: torch.fx.GraphModule) -> bool:
    return any(
        n.op == "call_function" and getattr(n.target, "__name__", None) in HOP_NAMES for n in gm.graph.nodes
    )
