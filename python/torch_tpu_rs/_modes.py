"""Eager modes: "strict" (default, asynchronous, one program per op),
"debug" (synchronous; also TPU_LAUNCH_BLOCKING=1) and "fused" (ops are
recorded and run as one program when a value is needed; also
TORCH_TPU_DEFER_AND_FUSE=1)."""
from __future__ import annotations

import sys

import torch

from . import _C


def set_eager_mode(mode: str) -> None:
    """Switches the eager mode: "strict", "debug" or "fused". Work recorded in
    Fused Eager runs first, so switching in the middle of a program is safe."""
    _C.set_eager_mode(mode)
    buckets = sys.modules.get("torch_tpu_rs._fused_buckets")
    if buckets is not None and mode != "fused":
        buckets.stop()  # its dispatch mode would slow every op, and Dynamo, for nothing


def get_eager_mode() -> str:
    return _C.get_eager_mode()


def _after_optimizer_step(optimizer, args, kwargs) -> None:
    """The end of a training step is a natural graph boundary for Fused
    Eager: flushing here makes every step the same program (zero compiles
    in steady state). A no-op in the other modes, and inside torch.compile
    (the compiled step is one program already)."""
    if torch.compiler.is_compiling():
        return
    _C.step_boundary()
    buckets = sys.modules.get("torch_tpu_rs._fused_buckets")  # loaded once a graph compiled
    if buckets is not None:
        buckets.after_step()


def install_step_boundary_hook() -> None:
    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(_after_optimizer_step)
