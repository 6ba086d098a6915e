"""Running code right after a module is imported, without importing it.

`import torch` loads this package through its `torch.backends` entry
point, so importing heavy modules here (Dynamo: two seconds; FlexAttention:
half a second) would slow every `import torch`. What this package adds to
them runs when the user's program imports them, or at once if it already
has.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from typing import Callable


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds `name` as the path finder would, and runs `callback` on the
    module once it has executed."""

    def __init__(self, name: str, callback: Callable):
        self.name, self.callback = name, callback

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)  # one use
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_call(module):
            exec_module(module)
            self.callback(module)

        spec.loader.exec_module = exec_then_call
        return spec


def after_import(name: str, callback: Callable) -> None:
    """Calls `callback(module)` once `name` is imported (now, if it is)."""
    if name in sys.modules:
        callback(sys.modules[name])
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, callback))
