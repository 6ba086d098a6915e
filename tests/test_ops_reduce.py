"""Reductions on tpu against the CPU: sum/mean/prod, max/min, arg*, var/std,
logsumexp, all/any, norms, cumsum/cumprod, with keepdim, negative dims,
full reductions, dtype= and out= arguments and non-contiguous inputs."""
import pytest
import torch

from conftest import assert_same, run_both

FLOATS = [torch.float32, torch.float64, torch.bfloat16]
ALL = FLOATS + [torch.int64, torch.bool]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def ties(shape, dtype):
    """Small integer values, so that max/min have ties."""
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 3, shape, generator=g).to(dtype)


def same_error(fn, *args):
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(Exception) as tpu:
        fn(*[a.to("tpu") for a in args])
    assert tpu.type is cpu.type, f"{tpu.value!r} vs CPU {cpu.value!r}"


DIMS = [None, -1, (-1, 0), []]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum(dtype, dim, keepdim):
    x = make((3, 4, 5), dtype)
    if dim is None:
        assert_same(*run_both(lambda t: t.sum(), x))
    else:
        assert_same(*run_both(lambda t: t.sum(dim, keepdim=keepdim), x), atol=0.05 if dtype == torch.bfloat16 else None)


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.float32])
def test_sum_dtype_and_out(dtype):
    x = make((4, 6), dtype)
    assert_same(*run_both(lambda t: torch.sum(t, dtype=torch.float64), x))
    assert_same(*run_both(lambda t: torch.sum(t, 1, dtype=torch.float32), x))

    def out(t):
        o = torch.empty(0, device=t.device, dtype=torch.float64 if dtype.is_floating_point else torch.int64)
        r = torch.sum(t, dim=0, out=o)
        assert r is o
        return o

    assert_same(*run_both(out, x))


def test_noncontiguous_and_scalar():
    x = make((6, 8), torch.float32)
    assert_same(*run_both(lambda t: t.t().sum(0), x))
    assert_same(*run_both(lambda t: t[:, ::2].mean(-1, keepdim=True), x))
    assert_same(*run_both(lambda t: t[1::2].amax(1), x))
    s = torch.tensor(2.5)
    assert_same(*run_both(lambda t: t.sum(0), s))
    assert_same(*run_both(lambda t: t.max(dim=-1), s))
    assert_same(*run_both(lambda t: t.argmax(0, keepdim=True), s))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_mean(dtype, dim, keepdim):
    x = make((3, 4, 5), dtype)
    f = (lambda t: t.mean()) if dim is None else (lambda t: t.mean(dim, keepdim=keepdim))
    assert_same(*run_both(f, x))


def test_mean_dtype_and_errors():
    x = make((3, 4), torch.int64)
    assert_same(*run_both(lambda t: t.mean(dtype=torch.float32), x))
    assert_same(*run_both(lambda t: t.mean(0, dtype=torch.float64), x))
    same_error(lambda t: t.mean(), x)
    same_error(lambda t: t.sum(3), x)
    same_error(lambda t: t.sum((0, 0)), x)
    assert_same(*run_both(lambda t: t.mean(0), torch.empty(0, 3)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_prod(dtype):
    x = make((3, 5), dtype) if dtype != torch.float32 else torch.rand(3, 5) + 0.5
    assert_same(*run_both(lambda t: t.prod(), x))
    assert_same(*run_both(lambda t: t.prod(1), x))
    assert_same(*run_both(lambda t: t.prod(-2, keepdim=True), x))
    assert_same(*run_both(lambda t: t.prod(0, dtype=torch.float64), x))


@pytest.mark.parametrize("dtype", ALL)
def test_max_min_full(dtype):
    x = make((4, 5), dtype)
    assert_same(*run_both(torch.max, x))
    assert_same(*run_both(torch.min, x))
    same_error(torch.max, torch.empty(0, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_dim_first_index(dtype, dim, keepdim):
    x = ties((6, 7), dtype)
    assert_same(*run_both(lambda t: torch.max(t, dim, keepdim), x))
    assert_same(*run_both(lambda t: torch.min(t, dim, keepdim=keepdim), x))
    if dtype == torch.bool:
        same_error(lambda t: torch.argmax(t, dim), x)
        return
    assert_same(*run_both(lambda t: torch.argmax(t, dim, keepdim), x))
    assert_same(*run_both(lambda t: torch.argmin(t, dim=dim, keepdim=keepdim), x))


def test_max_dim_out_and_errors():
    x = ties((4, 6), torch.float32)

    def out(t):
        v = torch.empty(0, device=t.device)
        i = torch.empty(0, device=t.device, dtype=torch.long)
        torch.max(t, 1, out=(v, i))
        return v, i

    assert_same(*run_both(out, x))
    same_error(lambda t: t.max(1), torch.empty(3, 0))
    same_error(lambda t: t.argmax(), torch.empty(0))
    same_error(lambda t: t.max(2), x)


def test_nan_handling():
    x = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [2.0, 5.0, -1.0, 5.0], [float("-inf")] * 4])
    for f in [
        torch.max, torch.min, torch.argmax, torch.argmin,
        lambda t: t.max(1), lambda t: t.min(1), lambda t: t.amax(1), lambda t: t.amin(0),
        lambda t: t.argmax(1), lambda t: t.argmin(1), lambda t: t.nansum(1), lambda t: t.logsumexp(1),
    ]:
        assert_same(*run_both(f, x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [(), 1, (0, -1), (-1, 1)])
def test_amax_amin(dtype, dim):
    x = ties((3, 4, 5), dtype)
    assert_same(*run_both(lambda t: t.amax(dim), x))
    assert_same(*run_both(lambda t: t.amin(dim, keepdim=True), x))


def test_aminmax_and_elementwise_max():
    x = make((4, 5), torch.float32)
    y = make((5,), torch.float32, seed=3)
    assert_same(*run_both(torch.aminmax, x))
    assert_same(*run_both(lambda t: torch.aminmax(t, dim=-1, keepdim=True), x))
    assert_same(*run_both(torch.max, x, y))
    assert_same(*run_both(torch.min, x, y.double()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_argmax_full(dtype):
    x = ties((5, 6), dtype)
    assert_same(*run_both(torch.argmax, x))
    assert_same(*run_both(lambda t: t.argmin(keepdim=True), x))
    assert_same(*run_both(lambda t: t.t().argmax(), x))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fn", ["var", "std"])
def test_var_std(dtype, fn):
    x = make((4, 5, 6), dtype)
    f = getattr(torch, fn)
    assert_same(*run_both(f, x))
    assert_same(*run_both(lambda t: f(t, unbiased=False), x))
    assert_same(*run_both(lambda t: f(t, 1), x))
    assert_same(*run_both(lambda t: f(t, (0, -1), keepdim=True), x))
    assert_same(*run_both(lambda t: f(t, -2, correction=0), x))
    assert_same(*run_both(lambda t: f(t, dim=None, correction=2), x))
    assert_same(*run_both(lambda t: f(t, dim=[], correction=1.5), x))
    assert_same(*run_both(lambda t: f(t[:, ::2].transpose(0, 2), 1), x))


@pytest.mark.parametrize("fn", ["var_mean", "std_mean"])
def test_var_mean(fn):
    x = make((4, 6), torch.float32)
    f = getattr(torch, fn)
    assert_same(*run_both(f, x))
    assert_same(*run_both(lambda t: f(t, 1, keepdim=True), x))
    assert_same(*run_both(lambda t: f(t, dim=0, correction=0), x))
    same_error(torch.var, make((3,), torch.int64))
    assert_same(*run_both(lambda t: torch.var(t, 0), torch.ones(1, 3)))  # n - 1 == 0 → nan


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_logsumexp(dtype):
    x = make((4, 5, 3), dtype)
    assert_same(*run_both(lambda t: t.logsumexp(1), x))
    assert_same(*run_both(lambda t: t.logsumexp((0, -1), keepdim=True), x))
    inf = torch.tensor([[float("-inf"), float("-inf")], [float("inf"), 1.0], [0.5, -2.0]])
    assert_same(*run_both(lambda t: t.logsumexp(-1), inf))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.uint8])
@pytest.mark.parametrize("fn", ["all", "any"])
def test_all_any(dtype, fn):
    x = ties((4, 5), dtype)
    f = getattr(torch, fn)
    assert_same(*run_both(f, x))
    assert_same(*run_both(lambda t: f(t, 1), x))
    assert_same(*run_both(lambda t: f(t, -2, keepdim=True), x))
    assert_same(*run_both(lambda t: f(t, dim=(0, 1)), x))
    assert_same(*run_both(lambda t: f(t, dim=[]), x))
    assert_same(*run_both(lambda t: f(t.t()[::2], 0), x))
    assert_same(*run_both(f, torch.empty(0, 3, dtype=dtype)))


def test_count_nonzero():
    x = ties((4, 5), torch.float32)
    assert_same(*run_both(torch.count_nonzero, x))
    assert_same(*run_both(lambda t: torch.count_nonzero(t, dim=-1), x))
    assert_same(*run_both(lambda t: torch.count_nonzero(t, dim=(0, 1)), x))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [2, 1, float("inf"), float("-inf"), 0, 3, 0.5])
def test_vector_norm(dtype, p):
    x = make((4, 5), dtype)
    x[0, 0] = 0
    assert_same(*run_both(lambda t: torch.linalg.vector_norm(t, p), x))
    assert_same(*run_both(lambda t: torch.linalg.vector_norm(t, p, dim=-1, keepdim=True), x))
    assert_same(*run_both(lambda t: torch.linalg.vector_norm(t, p, dim=(0, 1), dtype=torch.float64), x))
    assert_same(*run_both(lambda t: t.norm(p), x))
    assert_same(*run_both(lambda t: t.norm(p, dim=0), x))
    assert_same(*run_both(lambda t: torch.norm(t.t(), p, dim=[1], keepdim=True), x))


def test_norm_errors_and_out():
    same_error(lambda t: torch.linalg.vector_norm(t), make((3,), torch.int64))

    def out(t):
        o = torch.empty(0, device=t.device)
        torch.linalg.vector_norm(t, 2, dim=1, out=o)
        return o

    assert_same(*run_both(out, make((3, 4), torch.float32)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_cumprod(dtype, dim):
    x = ties((4, 6), dtype) if dtype != torch.float32 else make((4, 6), dtype)
    assert_same(*run_both(lambda t: torch.cumsum(t, dim), x), atol=0.05 if dtype == torch.bfloat16 else None)
    assert_same(*run_both(lambda t: torch.cumprod(t, dim), x), atol=0.05 if dtype == torch.bfloat16 else None)
    assert_same(*run_both(lambda t: torch.cumsum(t.t(), dim, dtype=torch.float64), x))


def test_cumsum_inplace_and_scalar():
    x = make((5,), torch.float32)

    def f(t):
        t = t.clone()
        t.cumsum_(0)
        return t

    assert_same(*run_both(f, x))
    assert_same(*run_both(lambda t: t.cumsum(0), torch.tensor(3.0)))


# --- gradients (the backward formulas use other ops too) ---

@pytest.mark.parametrize(
    "fn",
    [
        lambda t: t.sum(1).pow(2).sum(),
        lambda t: t.mean((0, 1)).sum(),
        lambda t: t.amax(1).sum(),
        lambda t: t.max(1)[0].sum(),
        lambda t: t.var(0).sum(),
        lambda t: t.std(1, correction=0).sum(),
        lambda t: t.logsumexp(1).sum(),
        lambda t: torch.linalg.vector_norm(t, 2),
        lambda t: t.cumsum(1).sum(),
        lambda t: t.prod(1).sum(),
    ],
    ids=["sum", "mean", "amax", "max_dim", "var", "std", "logsumexp", "norm", "cumsum", "prod"],
)
def test_grad(fn):
    x = make((3, 4), torch.float32)

    def g(t):
        t = t.clone().requires_grad_(True)
        fn(t).backward()
        return t.grad

    try:
        assert_same(*run_both(g, x), atol=1e-5, rtol=1e-5)
    except NotImplementedError as e:  # a backward op owned by another family
        pytest.skip(str(e).split(" is not lowered")[0])
