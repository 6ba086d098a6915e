"""Pooling on tpu against the CPU, forward and gradients: max_pool1d/2d/3d
(with indices, NaN propagation, ceil_mode, dilation), avg_pool1d/2d/3d
(count_include_pad, divisor_override, ceil_mode), adaptive_avg_pool1d/2d/3d."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same, run_both


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def grads(fn, x, reference_dtype=None):
    """(tpu, cpu) outputs and input gradient. With `reference_dtype` (for
    dtypes the CPU has no kernel for) the CPU runs on the same values in that
    dtype, and its results are rounded back to x's dtype."""
    def run(x):
        x = x.clone().requires_grad_(True)
        out = fn(x)
        first = out[0] if isinstance(out, tuple) else out
        proj = make(first.shape, first.dtype, seed=7).to(first.device)
        (first.float() * proj.float()).sum().backward()
        return (out if isinstance(out, tuple) else (out,)) + (x.grad,)

    if reference_dtype is None:
        return run_both(run, x)
    cpu = tuple(t.to(x.dtype) if t.is_floating_point() else t for t in run(x.to(reference_dtype)))
    return run(x.to("tpu")), cpu


def tol(dtype):
    return dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}


MAX = [
    (F.max_pool2d, (2, 3, 8, 7), dict(kernel_size=3, stride=2, padding=1)),
    (F.max_pool2d, (3, 7, 7), dict(kernel_size=(2, 3), stride=(2, 1), dilation=(2, 1), ceil_mode=True)),
    (F.max_pool1d, (2, 3, 9), dict(kernel_size=2, ceil_mode=True)),
    (F.max_pool3d, (1, 2, 4, 5, 6), dict(kernel_size=2, stride=(1, 2, 2), padding=1)),
]


@pytest.mark.parametrize("case", MAX, ids=lambda c: f"{c[0].__name__}-{c[2]}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_max_pool(case, dtype):
    fn, shape, kw = case
    x = make(shape, dtype)
    tpu, cpu = grads(lambda x: fn(x, return_indices=True, **kw), x)
    assert_same(tpu, cpu, **tol(dtype))


def test_max_pool_nan_and_ties():
    x = torch.tensor([[[[1.0, float("nan"), 3.0, 3.0], [2.0, 2.0, float("nan"), -float("inf")],
                        [5.0, 5.0, 5.0, 5.0], [-float("inf")] * 4]]])
    tpu, cpu = run_both(lambda x: F.max_pool2d(x, 2, 1, return_indices=True), x)
    assert_same(tpu, cpu)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_max_pool_int(dtype):
    x = torch.randint(-50, 50, (1, 2, 6, 6), dtype=dtype)
    tpu, cpu = run_both(lambda x: F.max_pool2d(x, 2, return_indices=True), x)
    assert_same(tpu, cpu)


AVG = [
    (F.avg_pool2d, (2, 3, 8, 7), dict(kernel_size=3, stride=2, padding=1)),
    (F.avg_pool2d, (3, 7, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
    (F.avg_pool2d, (1, 2, 6, 6), dict(kernel_size=2, padding=1, divisor_override=3)),
    (F.avg_pool2d, (1, 2, 7, 6), dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True)),
    (F.avg_pool1d, (2, 3, 9), dict(kernel_size=3, stride=2, ceil_mode=True)),
    (F.avg_pool3d, (1, 2, 4, 5, 6), dict(kernel_size=2, stride=(1, 2, 2), padding=1, count_include_pad=False)),
]


@pytest.mark.parametrize("case", AVG, ids=lambda c: f"{c[0].__name__}-{c[2]}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_avg_pool(case, dtype):
    fn, shape, kw = case
    # The CPU has no bfloat16 avg_pool3d: the reference runs in float32.
    no_cpu_kernel = fn is F.avg_pool3d and dtype == torch.bfloat16
    x = make(shape, dtype)
    tpu, cpu = grads(lambda x: fn(x, **kw), x, torch.float32 if no_cpu_kernel else None)
    assert_same(tpu, cpu, **tol(dtype))


def test_avg_pool_int64():
    x = torch.randint(-50, 50, (1, 2, 6, 6))
    tpu, cpu = run_both(lambda x: F.avg_pool2d(x, 3, 2, 1), x)
    assert_same(tpu, cpu)


ADAPTIVE = [
    (F.adaptive_avg_pool2d, (2, 3, 7, 9), (3, 4)),
    (F.adaptive_avg_pool2d, (3, 8, 8), 1),
    (F.adaptive_avg_pool1d, (2, 3, 10), 4),
    (F.adaptive_avg_pool3d, (1, 2, 5, 4, 6), (2, 3, 4)),
]


@pytest.mark.parametrize("case", ADAPTIVE, ids=lambda c: f"{c[0].__name__}-{c[2]}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_adaptive_avg_pool(case, dtype):
    fn, shape, size = case
    x = make(shape, dtype)
    tpu, cpu = grads(lambda x: fn(x, size), x)
    assert_same(tpu, cpu, **tol(dtype))


ADAPTIVE_MAX = [
    (F.adaptive_max_pool2d, (2, 3, 7, 9), (3, 4)),
    (F.adaptive_max_pool2d, (3, 5, 5), (5, 2)),
    (F.adaptive_max_pool1d, (2, 3, 10), 4),
    (F.adaptive_max_pool3d, (1, 2, 5, 4, 6), (2, 3, 4)),
]


@pytest.mark.parametrize("case", ADAPTIVE_MAX, ids=lambda c: f"{c[0].__name__}-{c[2]}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_adaptive_max_pool(case, dtype):
    fn, shape, size = case
    x = make(shape, dtype)
    x.view(-1)[3] = float("nan")
    tpu, cpu = grads(lambda x: fn(x, size, return_indices=True), x)
    assert_same(tpu, cpu, **tol(dtype))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_unpool(n):
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
    unpool = {1: F.max_unpool1d, 2: F.max_unpool2d, 3: F.max_unpool3d}[n]
    x = make((2, 3) + (6,) * n)

    def run(x):
        x = x.clone().requires_grad_(True)
        v, i = pool(x, 2, return_indices=True)
        y = unpool(v, i, 2, output_size=x.shape[2:])
        (y * y).sum().backward()
        return y, x.grad

    assert_same(*run_both(run, x))
