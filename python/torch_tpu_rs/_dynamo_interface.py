"""Dynamo's DeviceInterface for `tpu`, reporting what the loaded platform
really supports (upstream's built-in one rejects float64 and float16)."""
from __future__ import annotations

import torch
from torch._dynamo import device_interface as di

from . import _C
from . import device as tpu

# Dtypes the engine lowers on every PJRT platform it runs on.
_SUPPORTED = {
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.complex64,
    torch.complex128,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
}


class TpuRsInterface(di.DeviceInterface):
    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            tpu.set_device(device)

        @staticmethod
        def current_device() -> int:
            return tpu.current_device()

        @staticmethod
        def get_device_properties(device=None):
            return tpu.get_device_properties(device)

    current_device = staticmethod(tpu.current_device)
    set_device = staticmethod(tpu.set_device)
    device_count = staticmethod(tpu.device_count)
    is_available = staticmethod(tpu.is_available)
    synchronize = staticmethod(tpu.synchronize)
    get_device_properties = staticmethod(tpu.get_device_properties)

    @staticmethod
    def get_compute_capability(device=None) -> str:
        return ""

    is_bf16_supported = staticmethod(tpu.is_bf16_supported)

    @classmethod
    def is_dtype_supported(cls, dtype: torch.dtype, including_emulation: bool = False) -> bool:
        if dtype == torch.float64:
            # Every XLA backend compiles f64; TPUs emulate it slowly but correctly.
            return True
        return dtype in _SUPPORTED

    @staticmethod
    def memory_allocated(device=None) -> int:
        return tpu.memory_allocated(device)


def register() -> None:
    # Dynamo registers its built-in interfaces, its own `tpu` one among them,
    # on first lookup; have that happen first, so it cannot replace ours.
    di.get_registered_device_interfaces()
    di.register_interface_for_device("tpu", TpuRsInterface)
