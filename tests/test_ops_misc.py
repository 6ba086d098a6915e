"""Assorted ops on tpu against the CPU: equal, linalg.cross, signbit,
heaviside, nextafter, entr, xlog1py, logit, isin, bucketize, searchsorted."""
import pytest
import torch

from conftest import assert_same, run_both


def sample(dtype, *shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_equal(dtype):
    a = sample(dtype, 3, 4)
    b = a.clone()
    assert torch.equal(a.to("tpu"), b.to("tpu")) is True
    c = sample(dtype, 3, 4, seed=1)
    assert torch.equal(a.to("tpu"), c.to("tpu")) == torch.equal(a, c)
    assert torch.equal(a.to("tpu"), a[:2].to("tpu")) is False


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_cross(dtype):
    a, b = sample(dtype, 4, 3, 5), sample(dtype, 4, 3, 5, seed=1)
    assert_same(*run_both(lambda x, y: torch.linalg.cross(x, y, dim=1), a, b))
    assert_same(*run_both(lambda x, y: torch.cross(x, y, dim=1), a, b))
    a, b = sample(dtype, 2, 3), sample(dtype, 1, 3, seed=1)
    assert_same(*run_both(torch.linalg.cross, a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32, torch.bool])
def test_signbit(dtype):
    x = sample(dtype, 20)
    if dtype.is_floating_point:
        x = torch.cat([x, torch.tensor([0.0, -0.0, float("inf"), float("-inf")], dtype=dtype)])
    assert_same(*run_both(torch.signbit, x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_heaviside(dtype):
    x = sample(dtype, 5, 6)
    if dtype == torch.float32:
        x[0] = 0
    v = sample(dtype, 6, seed=2)
    assert_same(*run_both(torch.heaviside, x, v))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nextafter(dtype):
    a = torch.tensor([0.0, 1.0, 1.0, -1.0, -1.0, 0.0, 5.0, float("nan"), 3.0, 2.0], dtype=dtype)
    b = torch.tensor([1.0, 2.0, 0.0, 0.0, -2.0, -1.0, 5.0, 1.0, float("inf"), float("nan")], dtype=dtype)
    assert_same(*run_both(torch.nextafter, a, b), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_entr_xlog1py_logit(dtype):
    x = sample(dtype, 30)
    if dtype.is_floating_point:
        x[0] = 0
    assert_same(*run_both(torch.special.entr, x))
    y = sample(dtype, 30, seed=3)
    assert_same(*run_both(torch.special.xlog1py, x, y.abs()))
    assert_same(*run_both(lambda t: torch.special.xlog1py(t, 2.0), x))
    p = torch.rand(30).to(dtype) if dtype.is_floating_point else x
    assert_same(*run_both(torch.logit, p))
    assert_same(*run_both(lambda t: torch.logit(t, eps=0.2), p))


@pytest.mark.parametrize("invert", [False, True])
def test_isin(invert):
    a = sample(torch.int64, 4, 5)
    t = sample(torch.int64, 3, seed=4)
    assert_same(*run_both(lambda x, y: torch.isin(x, y, invert=invert), a, t))
    assert_same(*run_both(lambda x: torch.isin(x, 2, invert=invert), a))


@pytest.mark.parametrize("right", [False, True])
def test_bucketize_searchsorted(right):
    b = torch.tensor([-1.0, 0.0, 0.0, 1.0, 2.5])
    x = torch.tensor([[-2.0, 0.0, 0.5], [1.0, 3.0, float("nan")]])
    assert_same(*run_both(lambda v, bb: torch.bucketize(v, bb, right=right), x, b))
    assert_same(*run_both(lambda v, bb: torch.bucketize(v, bb, out_int32=True, right=right), x, b))
    assert_same(*run_both(lambda bb, v: torch.searchsorted(bb, v, right=right), b, x))
    seq = torch.sort(sample(torch.float32, 2, 6), dim=-1).values
    v = sample(torch.float32, 2, 4, seed=5)
    assert_same(*run_both(lambda s, t: torch.searchsorted(s, t, side="right" if right else "left"), seq, v))
    un = sample(torch.float32, 7)
    sorter = torch.argsort(un)
    assert_same(*run_both(lambda s, t, so: torch.searchsorted(s, t, sorter=so, right=right), un, v, sorter))
