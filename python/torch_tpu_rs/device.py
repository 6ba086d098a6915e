"""`torch.tpu`: the device module, shaped like `torch.cuda`."""
from __future__ import annotations

import contextlib
from typing import Any

import torch

from . import _C
from . import amp  # noqa: F401  (torch.tpu.amp, as torch.cuda.amp)

_initial_seed: dict[int, int] = {}


def is_available() -> bool:
    """True when the PJRT plugin loaded and reports at least one device."""
    return _C.device_count() > 0


def is_initialized() -> bool:
    return is_available()


def init() -> None:
    if not is_available():
        raise RuntimeError(f"torch.tpu is not available: {_C.start_error()}")


def device_count() -> int:
    return _C.device_count()


def _index(device: Any = None) -> int:
    """The device index `device` names (an int, "tpu:1", a torch.device or
    None for the current one); RuntimeError if there is no such device, as
    torch.cuda's functions raise."""
    if device is None:
        return current_device()
    if isinstance(device, int):
        idx = device
    else:
        device = torch.device(device)
        if device.type != "tpu":
            raise ValueError(f"expected a tpu device, got {device}")
        idx = current_device() if device.index is None else device.index
    if not 0 <= idx < device_count():
        raise RuntimeError(f"invalid tpu device index {idx}: {device_count()} device(s) available")
    return idx


def current_device() -> int:
    return torch.accelerator.current_device_index()


def set_device(device: Any) -> None:
    torch.accelerator.set_device_index(_index(device))


class device:  # noqa: N801 (mirrors torch.cuda.device)
    """Context manager that changes the current tpu device."""

    def __init__(self, device: Any):
        # -1 (or None) leaves the device as it is, as torch.cuda.device(-1) does.
        self.idx = -1 if device is None or device == -1 else _index(device)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        if self.idx >= 0 and self.idx != self.prev:
            set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx >= 0 and self.prev != self.idx:
            set_device(self.prev)
        return False


def synchronize(device: Any = None) -> None:
    """Waits for all queued tpu work; raises errors deferred in Strict Eager."""
    if device is not None:
        _index(device)
    _C.synchronize()


def get_device_name(device: Any = None) -> str:
    """The PJRT platform, e.g. "XLA CPU"."""
    if device is not None:
        _index(device)
    name = _C.platform_name()
    return {"cpu": "XLA CPU", "cuda": "XLA CUDA", "tpu": "TPU"}.get(name.lower(), name)


def get_device_properties(device: Any = None):
    """name, platform, multi_processor_count and total_memory (bytes, as in
    torch.cuda; 0 where the plugin does not report its capacity)."""
    from collections import namedtuple

    props = namedtuple("TPUProperties", ["name", "platform", "multi_processor_count", "total_memory"])
    try:
        total = mem_get_info(device)[1]
    except NotImplementedError:
        total = 0
    return props(get_device_name(device), _C.platform_name(), 1, total)


def get_arch_list() -> list:
    """No compute-capability targets: XLA compiles for the device at hand."""
    return []


@contextlib.contextmanager
def device_of(obj: Any):
    """Like torch.cuda.device_of: the device of a tpu tensor, else no change."""
    if isinstance(obj, torch.Tensor) and obj.device.type == "tpu":
        with device(obj.device):
            yield
    else:
        yield


def get_device_capability(device: Any = None) -> tuple[int, int]:
    return (0, 0)


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bfloat16 compiles on every PJRT platform (XLA CPU emulates it)."""
    return is_available()


# Fixed for the process, so torch.compile folds them to constants (as it
# does torch.cuda's) instead of breaking the graph on the extension call;
# `fullgraph=True` code branches on them.
for _fn in (is_available, is_initialized, device_count, is_bf16_supported, get_device_capability):
    _fn._dynamo_marked_constant = True


def get_amp_supported_dtype() -> list:
    """Dtypes `torch.autocast("tpu", dtype=...)` accepts (torch asks the
    device module for this)."""
    return [torch.bfloat16, torch.float16]


# ---- random numbers -------------------------------------------------------
# The default generators live in the C++ glue; random ops draw
# (seed, offset) from them, so a seed reproduces a run exactly.

def _is_in_bad_fork() -> bool:
    """Whether this process was forked after tpu was initialized: tpu
    cannot be used here (as torch.cuda's)."""
    return _C.in_bad_fork()


def manual_seed(seed: int) -> None:
    """Seeds the current device's default generator."""
    _C.manual_seed(current_device(), int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    for idx in range(device_count()):
        _C.manual_seed(idx, int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> None:
    import random

    manual_seed(random.getrandbits(63))


def seed_all() -> None:
    import random

    manual_seed_all(random.getrandbits(63))


def initial_seed() -> int:
    return _C.initial_seed(current_device())


def get_rng_state(device: Any = "tpu") -> torch.Tensor:
    """The generator state as a uint8 CPU tensor of 16 bytes (seed, offset)."""
    s, o = _C.get_rng_state(_index(device))
    return torch.tensor([s, o], dtype=torch.uint64).view(torch.uint8)


def set_rng_state(new_state: torch.Tensor, device: Any = "tpu") -> None:
    if new_state.dtype != torch.uint8 or new_state.numel() != 16:
        raise RuntimeError("RNG state is wrong size: a tpu rng state is a uint8 tensor of 16 bytes, "
                           "as returned by get_rng_state()")
    s, o = new_state.cpu().view(torch.uint64).tolist()
    _C.set_rng_state(_index(device), s, o)


def get_rng_state_all() -> list:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(states) -> None:
    for i, s in enumerate(states):
        set_rng_state(s, i)


# ---- memory ----------------------------------------------------------------

def memory_allocated(device: Any = None) -> int:
    """Bytes held by live tpu storages on the device."""
    return _C.memory_stats(_index(device))[0]


def max_memory_allocated(device: Any = None) -> int:
    return _C.memory_stats(_index(device))[1]


def reset_peak_memory_stats(device: Any = None) -> None:
    _C.reset_peak_memory_stats(_index(device))


def memory_reserved(device: Any = None) -> int:
    """No caching allocator sits between storages and PJRT buffers, so the
    reserved bytes are the allocated ones."""
    return memory_allocated(device)


def max_memory_reserved(device: Any = None) -> int:
    return max_memory_allocated(device)


def reset_max_memory_allocated(device: Any = None) -> None:
    """Deprecated in torch.cuda in favour of reset_peak_memory_stats."""
    reset_peak_memory_stats(device)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A short readable table of memory_stats(), like torch.cuda.memory_summary."""
    def mib(n):
        return f"{n / 2**20:,.1f} MiB"

    stats = memory_stats(device)
    return "\n".join([
        f"torch.tpu memory summary, device {_index(device)} ({get_device_name(device)})",
        f"  tensors (allocated): {mib(stats['allocated_bytes.all.current'])} now, "
        f"{mib(stats['allocated_bytes.all.peak'])} peak",
        f"  PJRT buffers (all devices): {mib(stats['device_buffer_bytes.current'])} now, "
        f"{mib(stats['device_buffer_bytes.peak'])} peak",
    ])


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes, like torch.cuda.mem_get_info: from the PJRT plugin
    (PJRT_Device_MemoryStats), or the host's memory for the CPU plugin, whose
    buffers live there."""
    info = _C.memory_info(_index(device))
    if info is None:
        raise NotImplementedError(
            f"torch.tpu.mem_get_info: the {get_device_name()} plugin does not report its memory; "
            "use torch.tpu.memory_allocated() for what this process holds"
        )
    return info


def memory_stats(device: Any = None) -> dict:
    """Like torch.cuda.memory_stats, with the same keys. Without a caching
    allocator, reserved, active and requested bytes are the bytes of live tpu
    storages (`allocated_bytes.all.current/peak`). Added:
    `device_buffer_bytes.current/peak`, the bytes of the PJRT buffers behind
    them, all devices together (storages can share a buffer; donated buffers
    are reused by outputs)."""
    stats = dict(torch.accelerator.memory_stats(_index(device)))
    buffers, buffers_peak = _C.buffer_memory()
    stats["device_buffer_bytes.current"] = buffers
    stats["device_buffer_bytes.peak"] = buffers_peak
    return stats


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode: int | str) -> None:
    """As torch.cuda.set_sync_debug_mode: "warn" (1) warns and "error" (2)
    raises at each host sync the program did not ask for (`.item()`,
    `.cpu()`, printing, `nonzero` and other data-dependent sizes);
    "default" (0) turns it off. `torch.tpu.synchronize()` is never reported.
    In Fused Eager such a sync also ends the pending graph."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, `error`")
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    if debug_mode not in (0, 1, 2):
        raise RuntimeError("invalid value of debug_mode, expected one of 0, 1, 2")
    _C.set_sync_debug_mode(debug_mode)


def get_sync_debug_mode() -> int:
    return _C.get_sync_debug_mode()


def empty_cache() -> None:
    """Nothing is cached beyond live tensors; kept for torch.cuda parity."""


def ipc_collect() -> None:
    """No memory is shared between processes; kept for torch.cuda parity."""


_memory_fraction: dict[int, float] = {}


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    """Caps what this process may allocate on the device at `fraction` of its
    total memory; an allocation past the cap raises torch.OutOfMemoryError."""
    if not isinstance(fraction, (int, float)) or not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    idx = _index(device)
    total = get_device_properties(idx).total_memory
    if total == 0:
        raise NotImplementedError(
            f"torch.tpu.set_per_process_memory_fraction: the {get_device_name(idx)} plugin does not report "
            "its capacity, so a fraction of it is unknown"
        )
    _memory_fraction[idx] = float(fraction)
    # A fraction of 0 still forbids every allocation: the engine's 0 means no cap.
    _C.set_memory_limit(idx, max(1, int(fraction * total)) if fraction < 1 else 0)


def get_per_process_memory_fraction(device: Any = None) -> float:
    return _memory_fraction.get(_index(device), 1.0)


# Older torch.cuda spellings of the above.
memory_cached = memory_reserved
max_memory_cached = max_memory_reserved
reset_max_memory_cached = reset_max_memory_allocated


OutOfMemoryError = torch.OutOfMemoryError  # what running out of tpu memory raises


# ---- streams and events ----------------------------------------------------
# Each device has one in-order queue: every stream is that queue, so work on
# "another" stream is ordered with the rest, as if synchronized.

@contextlib.contextmanager
def stream(s: Any = None):
    yield


StreamContext = stream  # torch.cuda.StreamContext(s) is what torch.cuda.stream(s) returns


def set_stream(s: Any) -> None:
    """Every stream is the device's queue: nothing to switch."""


def current_stream(device: Any = None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(device))


def default_stream(device: Any = None) -> torch.Stream:
    return current_stream(device)


class _OnTpu(type):
    """torch.Stream and torch.Event objects on tpu are ordinary PyTorch
    ones (their C++ methods accept no subclass), so torch.tpu.Stream and
    torch.tpu.Event make those, and `isinstance` recognizes them on tpu,
    as with torch.cuda.Stream and torch.cuda.Event."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, cls._base) and obj.device.type == "tpu"


class Stream(metaclass=_OnTpu):
    """Like torch.cuda.Stream. Each device has one in-order queue, so every
    stream is that queue."""

    _base = torch.Stream

    def __new__(cls, device: Any = None, priority: int = 0) -> torch.Stream:
        return torch.Stream(device=f"tpu:{_index(device)}", priority=priority)


class Event(metaclass=_OnTpu):
    """Like torch.cuda.Event. `record()` waits for the work queued so far and
    stamps the time, so `elapsed_time` is exact (and recording syncs)."""

    _base = torch.Event

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:
        return torch.Event(device="tpu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def __getattr__(name: str):
    # torch.cuda.default_generators: one default generator per device, made
    # on first use (asking for the device count starts the runtime).
    if name == "default_generators":
        return tuple(torch._C._accelerator_getDefaultGenerator(i) for i in range(device_count()))
    # torch.cuda._initialized, which torch.utils.checkpoint reads to decide
    # whether to stash and replay the device's random state (dropout masks
    # must match between the forward and its recomputation).
    if name == "_initialized":
        return is_initialized()
    raise AttributeError(f"module 'torch.tpu' has no attribute '{name}'")
