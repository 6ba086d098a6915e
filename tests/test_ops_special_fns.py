"""The remaining special functions on tpu against the CPU: Bessel J/Y,
modified Bessel I/K (plain and scaled), spherical j0, Airy Ai, erfcx,
log_ndtr, igamma/igammac and the orthogonal polynomial families, over
float32/float64 and integer inputs (which give float32), with the special
points (0, ±1, ±inf, NaN, branch boundaries), out=/in-place variants and
the gradients autograd builds from other ops."""
import pytest
import torch

from conftest import assert_same, run_both

UNARY = [
    "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
    "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
    "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0",
    "erfcx", "log_ndtr",
]
POLY = [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
    "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w",
    "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p",
]
# Branch points of the Cephes approximations and special values.
EDGES = [0.0, -0.0, 1e-6, -1e-6, 0.5, -0.5, 2.0, 2.09, -2.09, 5.0, 8.0, 50.0, 51.0, -6.1, -27.0, 120.0,
         float("inf"), float("-inf"), float("nan")]


def _xs(dtype):
    x = torch.cat([torch.linspace(-12, 12, 97), torch.tensor(EDGES)])
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary(name, dtype):
    f = getattr(torch.special, name)
    assert_same(*run_both(f, _xs(dtype)))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool])
@pytest.mark.parametrize("name", ["bessel_j0", "modified_bessel_k1", "erfcx"])
def test_unary_int_promotes(name, dtype):
    f = getattr(torch.special, name)
    x = torch.arange(-9, 10).to(dtype)
    tpu, cpu = run_both(f, x)
    assert tpu.dtype == torch.float32
    assert_same(tpu, cpu, rtol=1e-6, atol=1e-6)


def test_unary_out_and_2d():
    x = torch.linspace(0.1, 9, 24).reshape(4, 6).t()  # non-contiguous
    out_cpu = torch.empty(6, 4)
    out_tpu = out_cpu.to("tpu")
    torch.special.bessel_y1(x, out=out_cpu)
    torch.special.bessel_y1(x.to("tpu"), out=out_tpu)
    assert_same(out_tpu, out_cpu)


@pytest.mark.parametrize("name", ["bessel_j0", "bessel_j1", "erfcx", "log_ndtr",
                                  "modified_bessel_i0", "modified_bessel_k1"])
def test_unary_grad(name):
    f = getattr(torch.special, name)
    x = torch.linspace(0.2, 6, 17, dtype=torch.float32)
    g = torch.randn(17, generator=torch.Generator().manual_seed(0))
    xc = x.clone().requires_grad_()
    xt = x.to("tpu").requires_grad_()
    (gc,) = torch.autograd.grad(f(xc), xc, g)
    (gt,) = torch.autograd.grad(f(xt), xt, g.to("tpu"))
    assert_same(gt, gc, rtol=1e-4, atol=1e-4)


def _grid(dtype):
    xs = torch.tensor([-3.0, -1.5, -1.0, -0.7, -0.3, 0.0, 0.25, 0.5, 0.999, 1.0, 1.2, 2.5, float("nan"), float("inf")])
    ns = torch.tensor([-2.0, -0.5, 0.0, 1.0, 2.0, 3.0, 4.9, 5.0, 7.0, 9.0, 13.0, 40.0, 130.0, float("nan"), float("inf")])
    x, n = torch.meshgrid(xs, ns, indexing="ij")
    return x.to(dtype).contiguous(), n.to(dtype).contiguous()


POLY_CASES = [(n, torch.float32) for n in POLY] + [
    (n, torch.float64) for n in ["chebyshev_polynomial_u", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
                                 "legendre_polynomial_p"]]


@pytest.mark.parametrize("name,dtype", POLY_CASES)
def test_poly(name, dtype):
    f = getattr(torch.special, name)
    x, n = _grid(dtype)
    tpu, cpu = run_both(f, x, n)
    assert_same(tpu, cpu, rtol=1e-5 if dtype == torch.float32 else 1e-7)


@pytest.mark.parametrize("name", ["chebyshev_polynomial_t", "hermite_polynomial_h", "legendre_polynomial_p",
                                  "laguerre_polynomial_l"])
def test_poly_scalar_and_int_args(name):
    f = getattr(torch.special, name)
    x = torch.linspace(-1.5, 1.5, 13)
    assert_same(*run_both(lambda t: f(t, 5), x))  # Python int degree
    n = torch.arange(0, 6)
    assert_same(*run_both(lambda t: f(0.3, t), n))  # Python float x, integer degrees
    xi = torch.arange(-4, 5)[:, None]
    assert_same(*run_both(f, xi, n[None, :]), rtol=1e-6, atol=1e-6)  # ints → float32, broadcast


def test_poly_large_degree_uses_trig_form():
    # |x| < 1 with a large n takes the closed forms (no long recurrence).
    x = torch.linspace(-0.95, 0.95, 9, dtype=torch.float64)
    n = torch.full((9,), 1_000_000.0, dtype=torch.float64)
    for name in ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v"]:
        f = getattr(torch.special, name)
        xs = (x + 1) / 2 if name.startswith("shifted") else x
        assert_same(*run_both(f, xs, n))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("fn", [torch.igamma, torch.igammac])
def test_igamma(fn, dtype):
    a = torch.tensor([-1.0, 0.0, 1e-3, 0.5, 1.0, 2.5, 9.0, 19.5, 25.0, 150.0, 250.0, float("inf"), float("nan")])
    x = torch.tensor([-1.0, 0.0, 1e-3, 0.3, 0.8, 1.05, 1.5, 3.0, 8.0, 24.0, 30.0, 160.0, 260.0, float("inf")])
    A, X = torch.meshgrid(a, x, indexing="ij")
    tpu, cpu = run_both(fn, A.to(dtype).contiguous(), X.to(dtype).contiguous())
    assert_same(tpu, cpu, rtol=1e-5 if dtype == torch.float32 else 1e-7)


def test_igamma_inplace_and_int():
    a = torch.tensor([0.5, 2.0, 4.0, 7.0])
    x = torch.tensor([1.0, 3.0, 0.2, 7.5])
    ac, at = a.clone(), a.to("tpu")
    ac.igamma_(x)
    at.igamma_(x.to("tpu"))
    assert_same(at, ac)
    ai, xi = torch.tensor([1, 2, 3, 5]), torch.tensor([2, 2, 1, 9])
    assert_same(*run_both(torch.igammac, ai, x))  # int and float promote
    for fn in (torch.igamma, torch.igammac):  # two integer tensors: not implemented, as on CPU
        with pytest.raises(NotImplementedError):
            fn(ai, xi)
        with pytest.raises(NotImplementedError):
            fn(ai.to("tpu"), xi.to("tpu"))
