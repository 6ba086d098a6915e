"""Shared pytest setup: every test compares the tpu device against PyTorch
on the CPU."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import torch_tpu_rs  # noqa: F401  (registers the device)

# Tolerances per dtype, as PyTorch's own tests use them.
TOL = {
    torch.float32: dict(rtol=1.3e-6, atol=1e-5),
    torch.float64: dict(rtol=1e-7, atol=1e-7),
    torch.float16: dict(rtol=1e-3, atol=1e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
}


def assert_same(tpu_result, cpu_result, *, rtol=None, atol=None, check_strides=False):
    """Asserts a tpu result equals the CPU result: values, dtype, shape, and
    optionally strides. Works on tensors and (nested) tuples/lists of them."""
    if isinstance(cpu_result, (tuple, list)):
        assert isinstance(tpu_result, (tuple, list)) and len(tpu_result) == len(cpu_result)
        for a, b in zip(tpu_result, cpu_result):
            assert_same(a, b, rtol=rtol, atol=atol, check_strides=check_strides)
        return
    if not isinstance(cpu_result, torch.Tensor):
        assert tpu_result == pytest.approx(cpu_result, rel=rtol or 1e-6, abs=atol or 1e-6)
        return
    assert tpu_result.device.type == "tpu", f"result is on {tpu_result.device}, expected tpu"
    assert tpu_result.dtype == cpu_result.dtype, f"dtype {tpu_result.dtype} != {cpu_result.dtype}"
    assert tpu_result.shape == cpu_result.shape, f"shape {tuple(tpu_result.shape)} != {tuple(cpu_result.shape)}"
    if check_strides:
        assert tpu_result.stride() == cpu_result.stride(), f"strides {tpu_result.stride()} != {cpu_result.stride()}"
        assert tpu_result.storage_offset() == cpu_result.storage_offset()
    tol = dict(TOL.get(cpu_result.dtype, dict(rtol=0, atol=0)))
    if rtol is not None:
        tol["rtol"] = rtol
    if atol is not None:
        tol["atol"] = atol
    torch.testing.assert_close(tpu_result.cpu(), cpu_result, equal_nan=True, **tol)


def to_tpu(x):
    if isinstance(x, torch.Tensor):
        return x.to("tpu")
    if isinstance(x, (list, tuple)):
        return type(x)(to_tpu(v) for v in x)
    if isinstance(x, dict):
        return {k: to_tpu(v) for k, v in x.items()}
    return x


def grads_of(fn, *inputs):
    """The gradients of the scalar fn(*inputs) with respect to the inputs
    it uses (unused ones are left out)."""
    leaves = [x.clone().requires_grad_() for x in inputs]
    grads = torch.autograd.grad(fn(*leaves), leaves, allow_unused=True)
    return tuple(g for g in grads if g is not None)


def run_both(fn, *args, **kwargs):
    """Runs fn on CPU inputs and on the same inputs moved to tpu."""
    cpu = fn(*args, **kwargs)
    tpu = fn(*to_tpu(list(args)), **to_tpu(dict(kwargs)))
    return tpu, cpu


@pytest.fixture(autouse=True)
def _strict_mode_and_no_fallback():
    """Each test starts in Strict Eager with the CPU fallback off, unless the
    test itself changes that."""
    torch_tpu_rs.set_eager_mode("strict")
    torch_tpu_rs._C.set_cpu_fallback(os.environ.get("TORCH_TPU_CPU_FALLBACK") == "1")
    yield
    torch_tpu_rs.set_eager_mode("strict")
    buckets = sys.modules.get("torch_tpu_rs._fused_buckets")
    if buckets is not None:  # Fused Eager's shape buckets trace from one test into the next otherwise
        buckets.reset()


@pytest.fixture(params=["strict", "fused"])
def mode(request):
    """Runs a test in Strict and in Fused Eager (a test's own
    `parametrize("mode", ...)` takes precedence)."""
    torch_tpu_rs.set_eager_mode(request.param)
    yield request.param
    torch_tpu_rs.set_eager_mode("strict")
