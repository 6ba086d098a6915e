"""Convolutions on tpu against the CPU, forward and gradients (input, weight,
bias): conv1d/2d/3d with stride, padding, dilation, groups, and
conv_transpose1d/2d/3d with output_padding."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same, run_both


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def grads(fn, *tensors):
    """fn's output and the gradients of a random projection of it w.r.t. all tensors."""

    def run(*ts):
        ts = [t.clone().requires_grad_(True) for t in ts]
        out = fn(*ts)
        proj = make(out.shape, out.dtype, seed=7).to(out.device)
        (out.float() * proj.float()).sum().backward()
        return [out] + [t.grad for t in ts]

    return run_both(run, *tensors)


def tol(dtype):
    if dtype == torch.bfloat16:
        return dict(atol=1e-1, rtol=5e-2)
    return dict(atol=1e-4, rtol=1e-4) if dtype == torch.float32 else {}


CONV = [
    # (dims, N, C, O, spatial, k, kwargs)
    (1, 2, 4, 6, (9,), 3, dict(stride=2, padding=1)),
    (1, 1, 4, 4, (10,), 3, dict(dilation=2, groups=2)),
    (2, 2, 3, 4, (7, 6), (3, 2), dict(stride=(2, 1), padding=(1, 0))),
    (2, 1, 4, 6, (8, 8), 3, dict(stride=2, padding=2, dilation=2, groups=2)),
    (2, 2, 2, 3, (5, 5), 2, dict(padding="same")),
    (3, 1, 2, 3, (4, 5, 4), 2, dict(stride=(1, 2, 1), padding=1)),
]


@pytest.mark.parametrize("case", CONV, ids=lambda c: f"{c[0]}d-{c[6]}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv(case, dtype):
    d, n, c, o, sp, k, kw = case
    ks = (k,) * d if isinstance(k, int) else k
    g = kw.get("groups", 1)
    x = make((n, c) + sp, dtype)
    w = make((o, c // g) + ks, dtype, seed=1)
    b = make((o,), dtype, seed=2)
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[d]
    tpu, cpu = grads(lambda x, w, b: fn(x, w, b, **kw), x, w, b)
    assert_same(tpu, cpu, **tol(dtype))


TRANSPOSED = [
    (1, 2, 4, 6, (5,), 3, dict(stride=2, padding=1, output_padding=1)),
    (2, 1, 4, 6, (4, 5), 3, dict(stride=2, padding=1, groups=2)),
    (2, 2, 3, 2, (3, 3), (2, 3), dict(stride=(3, 2), output_padding=(2, 1), dilation=1)),
    (2, 1, 2, 2, (4, 4), 3, dict(padding=1, dilation=2)),
    (3, 1, 2, 2, (3, 3, 2), 2, dict(stride=2)),
]


@pytest.mark.parametrize("case", TRANSPOSED, ids=lambda c: f"{c[0]}d-{c[6]}")
def test_conv_transpose(case):
    d, n, c, o, sp, k, kw = case
    ks = (k,) * d if isinstance(k, int) else k
    g = kw.get("groups", 1)
    x = make((n, c) + sp)
    w = make((c, o // g) + ks, seed=1)
    b = make((o,), seed=2)
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[d]
    tpu, cpu = grads(lambda x, w, b: fn(x, w, b, **kw), x, w, b)
    assert_same(tpu, cpu, **tol(torch.float32))


def test_conv_unbatched_no_bias_bf16():
    x = make((3, 8, 8), torch.bfloat16)
    w = make((4, 3, 3, 3), torch.bfloat16, seed=1)
    tpu, cpu = run_both(lambda x, w: F.conv2d(x, w, padding=1), x, w)
    assert_same(tpu, cpu, **tol(torch.bfloat16))


def test_conv_int64():
    x = torch.randint(-5, 5, (1, 2, 6, 6))
    w = torch.randint(-3, 3, (3, 2, 3, 3))
    tpu, cpu = run_both(lambda x, w: F.conv2d(x, w, stride=2), x, w)
    assert_same(tpu, cpu)


def test_conv_only_input_grad():
    """Weight without requires_grad: the backward runs with output_mask [True, False, False]."""
    x = make((1, 2, 6, 6))
    w = make((3, 2, 3, 3), seed=1)

    def run(x, w):
        x = x.clone().requires_grad_(True)
        F.conv2d(x, w, padding=1).sum().backward()
        return x.grad

    assert_same(*run_both(run, x, w), **tol(torch.float32))
