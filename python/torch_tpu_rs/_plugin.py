"""Which PJRT plugin the engine loads.

TORCH_TPU_PJRT_PLUGIN wins when set (a TPU's libtpu.so, the CUDA plugin, or
any other PJRT plugin). Otherwise the pinned XLA CPU plugin that the setup
step installs from PyPI is used.
"""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

# The plugin installed by scripts/setup.sh; pinned there by version and sha256.
DEFAULT_PLUGIN_PACKAGE = "lammps_jax_pjrt_cpu"
DEFAULT_PLUGIN_FILE = "pjrt_c_api_cpu_plugin.so"


def default_plugin() -> Path | None:
    spec = importlib.util.find_spec(DEFAULT_PLUGIN_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / DEFAULT_PLUGIN_FILE
        if candidate.is_file():
            return candidate
    return None


def configure() -> None:
    """Points the engine at a plugin before it starts (it reads the env var)."""
    if os.environ.get("TORCH_TPU_PJRT_PLUGIN"):
        return
    path = default_plugin()
    if path is not None:
        os.environ["TORCH_TPU_PJRT_PLUGIN"] = str(path)
