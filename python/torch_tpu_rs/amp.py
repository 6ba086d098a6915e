"""`torch.tpu.amp`, as `torch.cuda.amp`: the older per-device spellings of
`torch.autocast("tpu")` and `torch.amp.GradScaler("tpu")` that existing
training scripts still use. The default autocast dtype is bfloat16, the
native 16-bit type of TPUs (torch.cuda.amp defaults to float16)."""
from __future__ import annotations

import functools

import torch


class autocast(torch.amp.autocast_mode.autocast):  # noqa: N801 (mirrors torch.cuda.amp.autocast)
    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.bfloat16, cache_enabled: bool = True):
        super().__init__("tpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        super().__init__("tpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)


custom_fwd = functools.partial(torch.amp.custom_fwd, device_type="tpu")
custom_bwd = functools.partial(torch.amp.custom_bwd, device_type="tpu")
