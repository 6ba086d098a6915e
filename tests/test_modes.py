"""Strict Eager (default) and Debug Eager."""
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu_rs
from conftest import assert_same, run_both


def test_default_is_strict():
    code = "import torch_tpu_rs; print(torch_tpu_rs.get_eager_mode())"
    env = {k: v for k, v in os.environ.items() if k != "TPU_LAUNCH_BLOCKING"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.strip() == "strict", out.stderr


def test_launch_blocking_env_selects_debug():
    code = "import torch_tpu_rs; print(torch_tpu_rs.get_eager_mode())"
    env = dict(os.environ, TPU_LAUNCH_BLOCKING="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.strip() == "debug", out.stderr


def test_switching_modes():
    torch_tpu_rs.set_eager_mode("debug")
    assert torch_tpu_rs.get_eager_mode() == "debug"
    a = torch.randn(5, 5)
    assert_same(*run_both(lambda x: (x * 3 - 1).exp(), a))
    torch_tpu_rs.set_eager_mode("strict")
    assert torch_tpu_rs.get_eager_mode() == "strict"
    assert_same(*run_both(lambda x: (x * 3 - 1).exp(), a))
    with pytest.raises(ValueError):
        torch_tpu_rs.set_eager_mode("turbo")


def test_strict_is_asynchronous_until_a_value_is_needed():
    x = torch.ones(64, 64, device="tpu")
    before = torch_tpu_rs.metrics()["host_syncs"]
    for _ in range(10):
        x = x * 1.01
    assert torch_tpu_rs.metrics()["host_syncs"] == before
    x.sum().item()
    assert torch_tpu_rs.metrics()["host_syncs"] > before


def test_scalars_share_one_executable():
    x = torch.randn(7, 3, device="tpu")
    (x * 2.0).cpu()
    before = torch_tpu_rs.metrics()["compiles"]
    for s in [3.0, 4.5, -1.25]:
        (x * s).cpu()
    assert torch_tpu_rs.metrics()["compiles"] == before
