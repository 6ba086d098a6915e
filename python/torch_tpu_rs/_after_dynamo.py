"""Registering with Dynamo without importing it (`_after_import.py`).

torch._dynamo takes about two seconds to import, and `import torch` runs this
package through its `torch.backends` entry point, so importing Dynamo here
would make every `import torch` that much slower, compiled or not. The `tpu`
compile backend and Dynamo's DeviceInterface for `tpu` are registered right
after something imports torch._dynamo (`torch.compile` does), or at once if
it is already imported.
"""
from __future__ import annotations

from ._after_import import after_import

_MODULE = "torch._dynamo"


def _register() -> None:
    # This runs inside whatever import pulled Dynamo in (torch._inductor's,
    # say), so it imports nothing beyond Dynamo itself: the backend module
    # (AOTAutograd, functorch) loads when the first graph is compiled.
    from torch._dynamo import register_backend

    from . import _dynamo_interface

    _dynamo_interface.register()
    register_backend(name="tpu")(_tpu_backend)
    _route_default_backend()


def _on_tpu(gm, example_inputs) -> bool:
    """Whether a Dynamo graph computes on tpu tensors (inputs or values inside)."""
    import torch

    def tpu(v):
        return isinstance(v, torch.Tensor) and v.device.type == "tpu"

    if any(tpu(t) for t in example_inputs):
        return True
    return any(tpu(n.meta.get("example_value")) for n in getattr(getattr(gm, "graph", None), "nodes", ()))


_told = False


def _route_default_backend() -> None:
    """`torch.compile(model)` with no backend means Inductor, and Inductor maps
    the name "tpu" to Pallas code generation, which needs JAX and a real TPU
    (it fails with "No module named 'jax'"). So that a script written for
    CUDA runs unchanged, Inductor's wrapper hands graphs on tpu tensors to the
    tpu backend, and says so once; every other graph still goes to Inductor."""
    import torch

    wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
    if wrapper is None or getattr(wrapper.__call__, "_routes_tpu", False):
        return
    inductor = wrapper.__call__

    def __call__(self, model_, inputs_):
        global _told
        if not _on_tpu(model_, inputs_):
            return inductor(self, model_, inputs_)
        if not _told:
            _told = True
            import warnings

            ignored = f" (Inductor's mode and options {dict(self.config)} do not apply)" if self.config else ""
            warnings.warn(
                "torch.compile: graphs on tpu tensors compile with backend='tpu'" + ignored
                + "; pass backend='tpu' to choose it explicitly.",
                stacklevel=2,
            )
        return _tpu_backend(model_, inputs_)

    __call__._routes_tpu = True
    wrapper.__call__ = __call__


def _tpu_backend(gm, example_inputs, **kwargs):
    """torch.compile(backend="tpu"): compile_backend.tpu_backend, loaded on first use."""
    from .compile_backend import tpu_backend

    return tpu_backend(gm, example_inputs, **kwargs)


def install() -> None:
    after_import(_MODULE, lambda module: _register())
