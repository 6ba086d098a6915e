"""Sorting and selection ops on tpu vs CPU: sort/argsort/msort, topk,
kthvalue, median/nanmedian, mode, cummax/cummin, unique/unique_consecutive.

Ties keep their original order (stable); where CPU's own tie order is an
implementation detail (topk, kthvalue, unstable sort of large inputs) the
inputs have distinct values.
"""
import pytest
import torch

from conftest import assert_same, run_both

NAN = float("nan")
FLOATS = [torch.float32, torch.float64, torch.bfloat16]
NUMERIC = FLOATS + [torch.int64, torch.int32]


def distinct(shape, dtype, seed=0):
    """Distinct values (a permutation), exactly representable in dtype."""
    g = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    return (torch.randperm(n, generator=g) - n // 2).reshape(shape).to(dtype)


def with_ties(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, (4, 7), generator=g).bool()
    return torch.randint(-3, 4, (4, 7), generator=g).to(dtype)


def nan_input(dtype=torch.float32):
    return torch.tensor(
        [[3.0, NAN, 1.0, 3.0, -0.0, 0.0, 2.0],
         [2.0, 2.0, NAN, NAN, 5.0, 1.0, -1.0],
         [NAN, NAN, NAN, NAN, NAN, NAN, NAN],
         [4.0, 4.0, 4.0, 1.0, 1.0, 7.0, 7.0]], dtype=dtype)


@pytest.mark.parametrize("dtype", NUMERIC + [torch.bool])
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_ties(dtype, dim, descending):
    x = with_ties(dtype)
    assert_same(*run_both(lambda t: torch.sort(t, dim=dim, descending=descending, stable=True), x))
    assert_same(*run_both(lambda t: torch.argsort(t, dim=dim, descending=descending, stable=True), x))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_nan(dtype, descending):
    x = nan_input(dtype)
    assert_same(*run_both(lambda t: torch.sort(t, descending=descending, stable=True), x))
    assert_same(*run_both(lambda t: torch.sort(t, 0, descending), x))


def test_sort_default_overload_and_noncontiguous():
    x = distinct((6, 5), torch.float32)
    assert_same(*run_both(lambda t: t.t().sort(), x))
    assert_same(*run_both(lambda t: t[:, ::2].sort(0, True), x))
    assert_same(*run_both(lambda t: t.argsort(), x))
    assert_same(*run_both(lambda t: t.msort(), x))
    assert_same(*run_both(lambda t: torch.sort(t[0, 0]), x))  # 0-d


def test_sort_out():
    x = with_ties(torch.float32)

    def f(t):
        v = torch.empty(0, dtype=t.dtype, device=t.device)
        i = torch.empty(0, dtype=torch.long, device=t.device)
        torch.sort(t, dim=1, descending=True, stable=True, out=(v, i))
        return v, i

    assert_same(*run_both(f, x))


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("largest", [True, False])
def test_topk(dtype, largest):
    x = distinct((5, 8), dtype)
    assert_same(*run_both(lambda t: torch.topk(t, 3, largest=largest), x))
    assert_same(*run_both(lambda t: torch.topk(t, 2, dim=0, largest=largest), x))
    assert_same(*run_both(lambda t: t.t().topk(5, largest=largest), x))


def test_topk_nan_and_out():
    x = torch.tensor([[1.0, NAN, 3.0, -2.0], [0.5, 4.0, NAN, -7.0]])
    assert_same(*run_both(lambda t: torch.topk(t, 2), x))
    assert_same(*run_both(lambda t: torch.topk(t, 3, largest=False), x))

    def f(t):
        v = torch.empty(0, device=t.device)
        i = torch.empty(0, dtype=torch.long, device=t.device)
        torch.topk(t, 2, out=(v, i))
        return v, i

    assert_same(*run_both(f, x))


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue(dtype, keepdim):
    x = distinct((4, 6), dtype)
    assert_same(*run_both(lambda t: torch.kthvalue(t, 2, keepdim=keepdim), x))
    assert_same(*run_both(lambda t: torch.kthvalue(t, 4, 0, keepdim), x))
    assert_same(*run_both(lambda t: torch.kthvalue(t, 1, -2), x))


def test_kthvalue_nan():
    x = torch.tensor([[1.0, NAN, 3.0, -2.0], [0.5, 4.0, 2.0, -7.0]])
    assert_same(*run_both(lambda t: torch.kthvalue(t, 4), x))
    assert_same(*run_both(lambda t: torch.kthvalue(t, 3), x))


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("keepdim", [False, True])
def test_median(dtype, keepdim):
    x = distinct((5, 6), dtype)
    assert_same(*run_both(torch.median, x))
    assert_same(*run_both(torch.nanmedian, x))
    assert_same(*run_both(lambda t: torch.median(t, 1, keepdim), x))
    assert_same(*run_both(lambda t: torch.median(t, 0, keepdim), x))
    assert_same(*run_both(lambda t: torch.nanmedian(t, -1, keepdim), x))


@pytest.mark.parametrize("dtype", FLOATS)
def test_median_nan(dtype):
    x = torch.tensor(
        [[3.0, NAN, 1.0, 8.0, NAN, 0.5],
         [2.0, 6.0, 9.0, NAN, 5.0, 1.0],
         [NAN, NAN, NAN, NAN, NAN, NAN],
         [4.0, 3.5, -1.0, 1.0, 7.0, 7.5]], dtype=dtype)
    assert_same(*run_both(torch.median, x))
    assert_same(*run_both(torch.nanmedian, x))
    assert_same(*run_both(torch.nanmedian, x[3]))
    assert_same(*run_both(lambda t: torch.median(t, 1), x))
    assert_same(*run_both(lambda t: torch.nanmedian(t, 0, True), x))
    # An all-NaN row's nanmedian index is an artifact of CPU's nth_element.
    assert_same(*run_both(lambda t: torch.nanmedian(t, 1).values, x))
    assert_same(*run_both(lambda t: torch.nanmedian(t[[0, 1, 3]], 1), x))


def test_median_out_noncontiguous():
    x = distinct((6, 5), torch.float32)

    def f(t):
        v = torch.empty(0, device=t.device)
        i = torch.empty(0, dtype=torch.long, device=t.device)
        torch.median(t.t(), 1, out=(v, i))
        return v, i

    assert_same(*run_both(f, x))


@pytest.mark.parametrize("dtype", NUMERIC + [torch.bool])
@pytest.mark.parametrize("dim", [0, -1])
def test_mode(dtype, dim):
    x = with_ties(dtype, seed=3)
    assert_same(*run_both(lambda t: torch.mode(t, dim), x))
    assert_same(*run_both(lambda t: torch.mode(t, dim, keepdim=True), x))


def test_mode_smallest_on_tie():
    x = torch.tensor([[5, 1, 5, 1, 3], [2, 2, 2, 9, 9], [7, 6, 5, 4, 3]])
    assert_same(*run_both(lambda t: torch.mode(t), x))


@pytest.mark.parametrize("dtype", NUMERIC + [torch.bool])
@pytest.mark.parametrize("dim", [0, 1])
def test_cummax_cummin(dtype, dim):
    x = with_ties(dtype, seed=1)
    assert_same(*run_both(lambda t: torch.cummax(t, dim), x))
    assert_same(*run_both(lambda t: torch.cummin(t, dim), x))


def test_cummax_nan():
    x = nan_input()
    assert_same(*run_both(lambda t: torch.cummax(t, 1), x))
    assert_same(*run_both(lambda t: torch.cummin(t, -1), x))
    assert_same(*run_both(lambda t: torch.cummin(t, 0), x))


@pytest.mark.parametrize("dtype", NUMERIC + [torch.bool])
def test_unique(dtype):
    x = with_ties(dtype, seed=2)
    assert_same(*run_both(torch.unique, x))
    assert_same(*run_both(lambda t: torch.unique(t, return_inverse=True, return_counts=True), x))
    assert_same(*run_both(lambda t: torch.unique(t[:, ::2], return_counts=True), x))


@pytest.mark.parametrize("dtype", NUMERIC + [torch.bool])
def test_unique_consecutive(dtype):
    x = torch.tensor([1, 1, 2, 2, 2, 0, 1, 1, 3, 0, 0]).to(dtype)
    assert_same(*run_both(torch.unique_consecutive, x))
    assert_same(*run_both(lambda t: torch.unique_consecutive(t, return_inverse=True, return_counts=True), x))
    y = with_ties(dtype, seed=4)
    assert_same(*run_both(lambda t: torch.unique_consecutive(t, return_inverse=True), y))


def test_sort_grad():
    x = distinct((4, 5), torch.float32)

    def f(t):
        t = t.clone().requires_grad_(True)
        v, _ = torch.sort(t, 1, descending=True)
        (v * torch.arange(5.0, device=t.device)).sum().backward()
        return t.grad

    assert_same(*run_both(f, x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_unique_dim(dtype):
    x = torch.tensor([[1, 2, 1, 1, 0], [0, 3, 0, 0, 0], [1, 2, 1, 1, 5]]).to(dtype)
    for dim in (0, 1, -1):
        assert_same(*run_both(lambda t: torch.unique(t, dim=dim, return_inverse=True, return_counts=True), x))
        assert_same(*run_both(lambda t: torch.unique(t, dim=dim), x))
        assert_same(*run_both(
            lambda t: torch.unique_consecutive(t, dim=dim, return_inverse=True, return_counts=True), x))
    assert_same(*run_both(lambda t: torch.unique(t[[0, 2, 0, 1]], dim=0, return_counts=True), x))
    assert_same(*run_both(lambda t: torch.unique(t.reshape(3, 5, 1).expand(3, 5, 2), dim=1), x))


def test_unique_edge_cases():
    assert_same(*run_both(lambda t: torch.unique(t, return_inverse=True, return_counts=True), torch.zeros(0)))
    assert_same(*run_both(lambda t: torch.unique(t, return_inverse=True), torch.tensor(3.0)))
    assert_same(*run_both(lambda t: torch.unique_consecutive(t, return_counts=True), torch.ones(1, 1)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_median_empty(dtype):
    assert_same(*run_both(torch.median, torch.empty(0, dtype=dtype)))
    assert_same(*run_both(torch.nanmedian, torch.empty(0, 3, dtype=dtype)))


def test_error_types_match_cpu():
    x = torch.randn(3, 4)
    for f in (lambda t: t.kthvalue(5), lambda t: t.kthvalue(0), lambda t: t.topk(5), lambda t: t.sort(dim=2)):
        with pytest.raises(Exception) as cpu:
            f(x)
        with pytest.raises(Exception) as tpu:
            f(x.to("tpu"))
        assert type(tpu.value) is type(cpu.value)


def test_zero_dim_inputs():
    x = torch.tensor(2.5)
    for f in (
        lambda t: torch.sort(t),
        lambda t: torch.topk(t, 1),
        lambda t: torch.kthvalue(t, 1),
        lambda t: torch.median(t, 0),
        lambda t: torch.mode(t),
        lambda t: torch.cummax(t, 0),
        lambda t: torch.cummin(t, -1),
        lambda t: torch.msort(t),
    ):
        assert_same(*run_both(f, x))
