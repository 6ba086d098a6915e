"""`nn.DataParallel` across tpu devices.

DataParallel moves data with `torch.nn.parallel.comm`, whose broadcast,
scatter and gather are C++ functions written for CUDA only (they copy with
a hard-coded CUDA device type and fail with "Found no NVIDIA driver"). Every
other part of DataParallel is device-generic (`torch.accelerator`, streams,
autograd Functions that call `comm.*`). So for tpu tensors the four
functions are done here with ordinary tensor ops, `.to(device)`, `split` and
`cat`, keeping each CUDA function's contract; any other tensor goes to
PyTorch's own function unchanged.
"""
from __future__ import annotations

import torch
from torch._utils import _get_device_index
from torch.nn.parallel import comm

_TPU = "tpu"


def _on_tpu(tensors) -> bool:
    return any(isinstance(t, torch.Tensor) and t.device.type == _TPU for t in tensors)


def _as_real(t: torch.Tensor) -> torch.Tensor:
    # The CUDA functions move complex tensors as their real views; the
    # autograd Functions turn the results back (Broadcast, Scatter, Gather).
    return torch.view_as_real(t) if t.is_complex() else t


def _device(index: int) -> torch.device:
    return torch.device(_TPU, index)


def _broadcast(original):
    def broadcast(tensor, devices=None, *, out=None):
        if tensor.device.type != _TPU and not (out and _on_tpu(out)):
            return original(tensor, devices, out=out)
        tensor = _as_real(tensor)
        if (devices is None) == (out is None):
            raise RuntimeError(
                "broadcast: exactly one of 'devices' and 'out' must be given, "
                f"but got devices={devices} and out={out}"
            )
        if out is not None:
            for o in out:
                o.copy_(tensor)
            return tuple(out)
        return tuple(tensor.to(_device(_get_device_index(d))) for d in devices)

    return broadcast


def _broadcast_coalesced(original):
    def broadcast_coalesced(tensors, devices, buffer_size=10485760):
        if not _on_tpu(tensors):
            return original(tensors, devices, buffer_size)
        devices = [_get_device_index(d) for d in devices]
        tensors = [_as_real(t) for t in tensors]
        for i, t in enumerate(tensors):
            if t.device != _device(devices[0]):
                raise RuntimeError(
                    f"broadcast_coalesced: all tensors must be on devices[0] (tpu:{devices[0]}), "
                    f"but tensor {i} of shape {tuple(t.shape)} is on {t.device}"
                )
        # As in CUDA: the source device's entry holds the inputs themselves.
        return [list(tensors)] + [[t.to(_device(d)) for t in tensors] for d in devices[1:]]

    return broadcast_coalesced


def _scatter(original):
    def scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
        if tensor.device.type != _TPU and not _on_tpu(out or ()) and not _targets_tpu(devices or ()):
            return original(tensor, devices, chunk_sizes, dim, streams, out=out)
        tensor = _as_real(tensor)
        if out is not None:
            if devices is not None or chunk_sizes is not None:
                raise RuntimeError("scatter: 'devices' and 'chunk_sizes' must not be given with 'out'")
            sizes = [o.size(dim) for o in out]
            for o, chunk in zip(out, tensor.split(sizes, dim)):
                o.copy_(chunk)
            return tuple(out)
        devices = [_get_device_index(d) for d in devices]
        if chunk_sizes is not None:
            if len(chunk_sizes) != len(devices):
                raise RuntimeError(
                    f"scatter: expected {len(devices)} chunk sizes (one per device), got {len(chunk_sizes)}"
                )
            if sum(chunk_sizes) != tensor.size(dim):
                raise RuntimeError(
                    f"scatter: chunk sizes {list(chunk_sizes)} sum to {sum(chunk_sizes)}, "
                    f"but the tensor's dimension {dim} has size {tensor.size(dim)}"
                )
            chunks = tensor.split(list(chunk_sizes), dim)
        else:
            chunks = tensor.chunk(len(devices), dim)
        # A chunk already on its device stays a view, as in CUDA.
        return tuple(c.to(_device(d)) for c, d in zip(chunks, devices))

    return scatter


def _targets_tpu(devices) -> bool:
    """Whether devices name tpu devices (integers name the current accelerator's)."""
    for d in devices:
        if isinstance(d, str):
            d = torch.device(d)
        if isinstance(d, torch.device):
            if d.type == _TPU:
                return True
        elif isinstance(d, int):
            acc = torch.accelerator.current_accelerator()
            if acc is not None and acc.type == _TPU:
                return True
    return False


def _gather(original):
    def gather(tensors, dim=0, destination=None, *, out=None):
        if not _on_tpu(tensors):
            return original(tensors, dim, destination, out=out)
        tensors = [_as_real(t) for t in tensors]
        if out is not None:
            if destination is not None:
                raise RuntimeError("gather: 'destination' must not be given with 'out'")
            return out.copy_(torch.cat([t.to(out.device) for t in tensors], dim))
        index = _get_device_index(destination, allow_cpu=True, optional=True)
        target = torch.device("cpu") if index == -1 else _device(index)
        return torch.cat([t.to(target) for t in tensors], dim)

    return gather


def install() -> None:
    """Routes `comm.broadcast/broadcast_coalesced/scatter/gather` for tpu tensors."""
    if getattr(comm, "_tpu_installed", False):
        return
    comm.broadcast = _broadcast(comm.broadcast)
    comm.broadcast_coalesced = _broadcast_coalesced(comm.broadcast_coalesced)
    comm.scatter = _scatter(comm.scatter)
    comm.gather = _gather(comm.gather)
    comm._tpu_installed = True
