"""`torch.nn.attention.flex_attention` on tpu tensors.

FlexAttention checks its inputs against a fixed list of devices ("only
supported on CUDA, CPU, HPU, or MPS devices") before anything runs. Off
CUDA it computes with its dense reference implementation: ordinary ATen ops,
which tpu lowers like any others, in eager mode (forward and backward) and
under torch.compile(backend="tpu"). So tpu passes that check; every other
device gets PyTorch's own.
"""
from __future__ import annotations

from ._after_import import after_import

_MODULE = "torch.nn.attention.flex_attention"


def _allow_tpu(module) -> None:
    check = module._validate_device
    if getattr(check, "_allows_tpu", False):
        return

    def _validate_device(query, key, value):
        if query.device.type != "tpu":
            check(query, key, value)

    _validate_device._allows_tpu = True
    module._validate_device = _validate_device


def install() -> None:
    after_import(_MODULE, _allow_tpu)
