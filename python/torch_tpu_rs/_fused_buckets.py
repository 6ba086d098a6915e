"""Fused Eager's shape buckets: a step whose batch or sequence size changes
runs at one program per bucket of sizes, not one per size.

Fused Eager records concrete sizes, so the first time a graph would
compile for new sizes of ops it ran before, the engine calls the hook
here (`_C.set_bucket_hook`), and from then on every region between two
flushes is also traced into an ATen graph (`_region_trace.py`; a Python
dispatch mode, which costs some microseconds per op). When a region's op
sequence comes back at other sizes, its two traces become one graph over
symbolic sizes (`_region_generalize.py`), compiled with `torch.compile`,
whose bucketing (`_bucketing.py`) pads each size to a power of two. A
later region with that op sequence whose exact program is not compiled
yet then runs the bucketed program on the values the region started from,
and its results become the region's: the engine drops its graph unrun.

Whatever does not fit runs as before, one program per size: a region
whose numbers follow no size, one that reads a tensor through two views
the trace cannot tie together, or one whose flush came inside an op. Each
refusal is counted in `metrics()["fused_bucket_refusals"]` with its reason;
`metrics()["bucketed_regions"]` counts regions run bucketed.
`TORCH_TPU_FUSED_BUCKETS=0` turns all of it off.
"""
from __future__ import annotations

import threading
import warnings

import torch
from torch.utils._python_dispatch import _disable_current_modes

from . import _C
from ._region_generalize import NotGeneralizable, generalize
from ._region_trace import Region, RegionTrace

_refusals: dict = {}
# Regions in a row whose exact programs were all compiled before tracing stops.
SETTLED_REGIONS = 50
# Op sequences remembered (each a traced graph, or its bucketed program).
MAX_REGIONS = 64


def _refuse(reason: str) -> bool:
    _refusals[reason] = _refusals.get(reason, 0) + 1
    return False


def _handle(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _pre_region_copy(t: torch.Tensor) -> torch.Tensor:
    """A tensor over what `t`'s storage held when the region began: its
    buffer, not the pending value the region gave it."""
    storage = t.untyped_storage()
    base = torch.empty(storage.nbytes(), dtype=torch.uint8, device=t.device)
    _C.share_buffer(_handle(base), storage.data_ptr())
    flat = base.view(t.dtype) if t.element_size() > 0 and storage.nbytes() % t.element_size() == 0 else None
    if flat is None:
        raise NotGeneralizable(f"a storage of {storage.nbytes()} bytes does not hold whole {t.dtype} elements")
    return flat.as_strided(t.shape, t.stride(), t.storage_offset())


def _laid_out(out, result: torch.Tensor) -> torch.Tensor:
    """`result`'s values laid out as the region's output `out` (an
    `Output`) is, in a storage of its size."""
    if tuple(result.shape) != out.shape or result.dtype != out.dtype:
        raise NotGeneralizable(f"a result of shape {tuple(result.shape)} for a tensor of {out.shape}")
    nbytes = out.nbytes
    if (result.stride() == out.stride and result.storage_offset() == out.offset
            and result.untyped_storage().nbytes() == nbytes):
        return result
    if out.offset != 0:
        raise NotGeneralizable("a result's storage is not laid out as its tensor's")
    laid_out = torch.empty_strided(out.shape, out.stride, dtype=out.dtype, device=out.device)
    if laid_out.untyped_storage().nbytes() != nbytes:
        raise NotGeneralizable("a result's storage is not laid out as its tensor's")
    laid_out.copy_(result)
    return laid_out


class _Buckets:
    def __init__(self):
        self.trace: RegionTrace | None = None
        self.want_trace = False
        self.settled = 0
        self.busy = False
        # op sequence -> the last Region seen at other sizes, or (Generalized,
        # compiled), or the reason it cannot be generalized
        self.regions: dict = {}

    def after_step(self):
        """At the end of an optimizer step (on the training thread, outside
        any op): starts tracing regions if a graph compiled for new sizes
        and no other dispatch mode is active."""
        if (self.want_trace and self.trace is None and threading.current_thread() is threading.main_thread()
                and _C.get_eager_mode() == "fused" and torch._C._len_torch_dispatch_stack() == 0):
            self.start()

    def start(self):
        self.settled = 0
        self.trace = RegionTrace(hold_inputs=True)
        self.trace.__enter__()
        _C.set_region_tracing(True)

    def stop(self):
        if self.trace is not None:
            trace, self.trace = self.trace, None
            _C.set_region_tracing(False)
            try:
                trace.__exit__(None, None, None)
            except Exception:  # not on top of the mode stack any more
                pass

    def on_flush(self, device: int, handles: list, cached: bool, new_sizes: bool) -> bool:
        if self.busy:
            return False
        if self.trace is None:
            # Traced from the end of the next optimizer step on (`after_step`):
            # a flush may come from inside another dispatch mode's handler.
            self.want_trace = self.want_trace or new_sizes
            return False
        region = self.trace.cut()
        # Tracing costs every op some microseconds: once a long run of
        # regions has found its exact programs compiled, sizes have settled
        # (a few sizes, over and over), and tracing stops until a new one.
        self.settled = self.settled + 1 if cached else 0
        if self.settled >= SETTLED_REGIONS:
            self.stop()
            self.want_trace = False
        self.busy = True
        try:
            with _disable_current_modes():
                return self.run(region, handles, cached)
        except NotGeneralizable as e:
            return _refuse(str(e))
        except Exception as e:  # never let a bucketing bug lose the region: it runs as traced
            warnings.warn(f"Fused Eager shape buckets are off for the rest of the process: {type(e).__name__}: {e}")
            self.stop()
            return _refuse(type(e).__name__)
        finally:
            self.busy = False
            region.release()

    def run(self, region: Region, handles: list, cached: bool) -> bool:
        if not handles:
            return False
        key = tuple(region.ops)
        entry = self.regions.get(key)
        if entry is None or isinstance(entry, Region):
            if entry is None or entry.input_shapes() == region.input_shapes():
                self.regions.pop(key, None)
                self.regions[key] = region  # (the newest last: the oldest go first)
                while len(self.regions) > MAX_REGIONS:
                    self.regions.pop(next(iter(self.regions)))
                return False
            try:
                gen = generalize(entry, region)
            except NotGeneralizable as e:
                self.regions[key] = e
                raise
            self.regions[key] = entry = (gen, torch.compile(gen.gm, backend="tpu"))
        if isinstance(entry, Exception):
            return _refuse(f"not generalized: {entry}")
        if cached:
            return False  # its exact program is compiled: run that
        gen, compiled = entry
        numbers = gen.numbers_for(region)
        inputs = region.input_tensors
        by_handle = {}
        for t, _ in inputs:
            if t.device.type != "cpu" and by_handle.setdefault(_handle(t), t) is not t:
                raise NotGeneralizable("two inputs are views of one storage")
        # Held until their values are given: Python code runs meanwhile.
        held = {o.handle: o.strong_storage() for o in region.outputs if o.device.type != "cpu"}
        outputs = {o.handle: o for o in region.outputs if held.get(o.handle) is not None}
        if not set(handles) <= set(outputs) | set(by_handle):
            raise NotGeneralizable("the flushed graph holds values its trace did not make")
        args = [cpu_copy if cpu_copy is not None else _pre_region_copy(t) for t, cpu_copy in inputs]
        for i, dims in gen.dynamic.items():
            for d in dims:
                torch._dynamo.mark_dynamic(args[i], d)
        results = compiled(*args, *numbers)
        wanted = set(handles)
        given = [(o.handle, _laid_out(o, r)) for o, r in zip(region.outputs, results) if o.handle in wanted
                 and o.handle in outputs]
        given += [(h, args[i]) for i, (t, _) in enumerate(inputs)
                  if t.device.type != "cpu" and (h := _handle(t)) in wanted and h not in outputs]
        _C.flush("a bucketed region's results")
        for handle, value in given:
            _C.share_buffer(handle, _handle(value))
        return True


_buckets = _Buckets()
on_flush = _buckets.on_flush
after_step = _buckets.after_step


def stop():
    """Stops tracing (leaving Fused Eager); a new size starts it again."""
    _buckets.stop()
    _buckets.want_trace = False


def refusals() -> dict:
    return dict(_refusals)


def reset():
    """Stops tracing and forgets every region (tests start afresh)."""
    stop()
    _buckets.regions.clear()
    _refusals.clear()
