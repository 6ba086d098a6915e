"""Unlowered ops: a clear NotImplementedError by default; with
TORCH_TPU_CPU_FALLBACK=1 they run on the CPU, counted and warned once.
The example is linalg.eigvals (general eigenvalues), which has no lowering yet (pick another
unlowered op from tests/opinfo_known_failures.py if it gets one)."""
import os
import subprocess
import sys

import pytest
import torch


def test_fallback_runs_on_cpu_counted_and_warned_once():
    code = r"""
import warnings, torch, torch_tpu_rs
x = torch.randn(4, 4)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    a = torch.linalg.eigvals(x.to("tpu"))
    b = torch.linalg.eigvals(x.to("tpu"))
print(torch.allclose(a.cpu(), torch.linalg.eigvals(x), atol=1e-5), a.device.type)
print(sum("runs on the CPU" in str(m.message) for m in w))
print(sum(torch_tpu_rs.metrics()["fallbacks"].values()) >= 2)
"""
    env = dict(os.environ, TORCH_TPU_CPU_FALLBACK="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split()
    assert lines[0] == "True" and lines[1] == "tpu"
    assert lines[2] == "1", out.stdout  # one warning for one op
    assert lines[3] == "True"


def test_no_fallback_by_default():
    with pytest.raises(NotImplementedError, match="linalg_eigvals"):
        torch.linalg.eigvals(torch.randn(3, 3, device="tpu"))
