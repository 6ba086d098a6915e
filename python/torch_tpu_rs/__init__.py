"""torch_tpu_rs: PyTorch's `tpu` device on any PJRT plugin, with a Rust engine.

Importing this package (or just `import torch`, through the `torch.backends`
entry point) registers the device: PrivateUse1 is renamed to `tpu`, the C++
dispatcher glue and the Rust engine are loaded, and `torch.tpu` appears.
"""
from __future__ import annotations

import os


def _autoload() -> None:
    """Entry point of the `torch.backends` group: `import torch` loads the
    device. Importing this package is the whole job; defined first because
    torch may look it up while this module is still initializing."""


import torch

from . import _plugin

__version__ = "0.1.0"

_plugin.configure()

if torch._C._get_privateuse1_backend_name() != "tpu":
    torch.utils.rename_privateuse1_backend("tpu")

from . import _C  # noqa: E402  (loads the C++ glue: allocator, guard, hooks, kernels)
from . import device as _device_module  # noqa: E402
from ._metrics import metrics, metrics_report  # noqa: E402
from ._modes import get_eager_mode, install_step_boundary_hook, set_eager_mode  # noqa: E402

install_step_boundary_hook()


def _bucket_hook(*args) -> bool:
    from . import _fused_buckets  # on the first graph that would compile: not at import

    return _fused_buckets.on_flush(*args)


if os.environ.get("TORCH_TPU_FUSED_BUCKETS", "1") != "0":
    _C.set_bucket_hook(_bucket_hook)  # Fused Eager's shape buckets (_fused_buckets.py)

if not hasattr(torch, "tpu"):
    torch._register_device_module("tpu", _device_module)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)

# `torch.autocast("tpu")` without a dtype casts to bfloat16, the native
# 16-bit type of TPUs (as torch_xla does; torch.tpu.amp.autocast agrees).
torch.set_autocast_dtype("tpu", torch.bfloat16)

from . import distributed as _distributed  # noqa: E402

_distributed.register()  # torch.distributed backend "tpu"

from . import data_parallel as _data_parallel  # noqa: E402

_data_parallel.install()  # nn.DataParallel over tpu devices

from . import fastpath as _fastpath  # noqa: E402

_fastpath.install()  # nn.MultiheadAttention / TransformerEncoderLayer in eval

from . import _after_dynamo  # noqa: E402

# torch.compile(backend="tpu") and Dynamo's DeviceInterface, registered when
# Dynamo is first imported (not here: it would double `import torch`'s time).
_after_dynamo.install()

from . import _flex_attention  # noqa: E402

_flex_attention.install()  # FlexAttention's device check, when it is imported

if os.environ.get("TORCH_TPU_METRICS") == "1":
    import atexit

    atexit.register(lambda: print(metrics_report()))

__all__ = ["metrics", "metrics_report", "set_eager_mode", "get_eager_mode", "__version__"]
