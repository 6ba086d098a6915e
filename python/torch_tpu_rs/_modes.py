"""Eager modes: "strict" (default, asynchronous) and "debug" (synchronous,
also TPU_LAUNCH_BLOCKING=1)."""
from __future__ import annotations

from . import _C


def set_eager_mode(mode: str) -> None:
    """Switches the eager mode: "strict" or "debug"."""
    _C.set_eager_mode(mode)


def get_eager_mode() -> str:
    return _C.get_eager_mode()
