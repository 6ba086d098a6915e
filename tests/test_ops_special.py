"""Special functions on tpu against the CPU: lgamma, digamma, polygamma,
mvlgamma, zeta, the modified Bessel functions and ndtri."""
import pytest
import torch

from conftest import assert_same, run_both

FLOATS = [torch.float32, torch.float64, torch.bfloat16]


def sample(dtype, lo=-6.0, hi=6.0, n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, generator=g, dtype=torch.float64) * (hi - lo) + lo
    return x.to(dtype)


UNARY = {
    "lgamma": torch.lgamma,
    "digamma": torch.digamma,
    "i0": torch.i0,
    "i0e": torch.special.i0e,
    "i1": torch.special.i1,
    "i1e": torch.special.i1e,
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype):
    x = sample(dtype, -12, 12)
    assert_same(*run_both(UNARY[name], x))


@pytest.mark.parametrize("name", ["lgamma", "digamma"])
def test_special_points(name):
    x = torch.tensor([0.0, -0.0, -1.0, -2.0, 1.0, 2.0, 0.5, -0.5, 1e-8, 1e10, float("inf"), float("-inf"), float("nan")])
    assert_same(*run_both(UNARY[name], x))


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_int_input(dtype):
    x = torch.tensor([0, 1, 2, 5, 9]).to(dtype)
    assert_same(*run_both(torch.lgamma, x))
    assert_same(*run_both(torch.special.i0e, x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
def test_polygamma(n, dtype):
    x = sample(dtype, -4, 8, seed=n)
    assert_same(*run_both(lambda t: torch.polygamma(n, t), x), rtol=1e-4 if dtype == torch.float32 else None)


def test_mvlgamma():
    x = sample(torch.float32, 2.0, 8.0)
    assert_same(*run_both(lambda t: torch.mvlgamma(t, p=3), x))


def test_zeta():
    x = sample(torch.float64, 1.0, 6.0)
    q = sample(torch.float64, 0.1, 5.0, seed=1)
    assert_same(*run_both(torch.special.zeta, x, q))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ndtri(dtype):
    p = torch.tensor([0.0, 1e-20, 1e-5, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99, 1 - 1e-7, 1.0, -0.1, 1.5], dtype=dtype)
    assert_same(*run_both(torch.special.ndtri, p))


def test_inplace_out():
    x = sample(torch.float32, 0.5, 5)
    tpu, cpu = run_both(lambda t: t.clone().lgamma_(), x)
    assert_same(tpu, cpu)
    tpu, cpu = run_both(lambda t: torch.digamma(t, out=torch.empty_like(t)), x)
    assert_same(tpu, cpu)
