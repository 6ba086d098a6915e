"""The rejection and inversion samplers behind torch.distributions:
_standard_gamma (Gamma, Beta, Chi2, StudentT), _sample_dirichlet, poisson
and binomial. Samples cannot equal the CPU's (another generator), so each
case draws many on both devices and compares the two samples' distributions
with a two-sample Kolmogorov-Smirnov statistic, plus the exact moments. Edge
values (zero, negative, NaN parameters) are compared exactly."""
from __future__ import annotations

import math

import pytest
import torch

import torch_tpu_rs

N = 20000
# Two-sample KS at significance 1e-6: D > c(α) sqrt(2 / N) with
# c(α) = sqrt(-ln(α / 2) / 2); discrete samples only make the test stricter
# on us (their D is smaller under the null). Seeds are fixed: no flakes.
KS_LIMIT = math.sqrt(-math.log(0.5e-6) / 2) * math.sqrt(2 / N)


def ks_statistic(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().flatten().sort().values, b.double().flatten().sort().values
    grid = torch.cat([a, b]).unique()
    fa = torch.searchsorted(a, grid, right=True).double() / a.numel()
    fb = torch.searchsorted(b, grid, right=True).double() / b.numel()
    return (fa - fb).abs().max().item()


def same_distribution(tpu_sample: torch.Tensor, cpu_sample: torch.Tensor, mean: float, var: float, kurtosis: float = 0.0):
    """`kurtosis` is the distribution's excess kurtosis, which sets how far a
    sample variance strays: its relative standard error is sqrt((κ + 2) / n)."""
    assert tpu_sample.device.type == "tpu"
    t = tpu_sample.cpu()
    assert t.dtype == cpu_sample.dtype and t.shape == cpu_sample.shape
    assert torch.isfinite(t).all()
    d = ks_statistic(t, cpu_sample)
    assert d < KS_LIMIT, f"KS distance {d:.4f} against the CPU's sample (limit {KS_LIMIT:.4f})"
    # The mean within 6 standard errors of the exact one.
    assert abs(t.double().mean().item() - mean) < 6 * math.sqrt(var / t.numel()) + 1e-12
    rel = 6 * math.sqrt((kurtosis + 2) / t.numel())
    assert t.double().var().item() == pytest.approx(var, rel=rel, abs=1e-12)


@pytest.mark.parametrize("alpha", [0.05, 0.5, 1.0, 3.0, 100.0])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_standard_gamma(alpha, dtype, mode):
    torch.manual_seed(1)
    a = torch.full((N,), alpha, dtype=dtype)
    same_distribution(torch._standard_gamma(a.to("tpu")), torch._standard_gamma(a), alpha, alpha, 6 / alpha)


@pytest.mark.parametrize("rate", [0.0, 0.7, 4.0, 9.5, 10.0, 35.0, 1e5])
def test_poisson(rate, mode):
    torch.manual_seed(2)
    r = torch.full((N,), rate)
    same_distribution(torch.poisson(r.to("tpu")), torch.poisson(r), rate, rate, 1 / rate if rate else 0.0)


@pytest.mark.parametrize("count,prob", [(10, 0.3), (40, 0.2), (100, 0.5), (1000, 0.93), (5, 0.97), (10**7, 0.4)])
def test_binomial(count, prob, mode):
    torch.manual_seed(3)
    n, p = torch.full((N,), float(count)), torch.full((N,), prob)
    tpu = torch.binomial(n.to("tpu"), p.to("tpu"))
    npq = count * prob * (1 - prob)
    same_distribution(tpu, torch.binomial(n, p), count * prob, npq, (1 - 6 * prob * (1 - prob)) / npq)
    assert torch.equal(tpu.cpu(), tpu.cpu().round())


def test_dirichlet_marginals_match_the_cpu():
    torch.manual_seed(4)
    alpha = torch.tensor([0.3, 1.0, 4.0])
    a = alpha.expand(N, 3).contiguous()
    tpu, cpu = torch._sample_dirichlet(a.to("tpu")).cpu(), torch._sample_dirichlet(a)
    torch.testing.assert_close(tpu.sum(-1), torch.ones(N), rtol=0, atol=2e-6)
    total = alpha.sum().item()
    for j in range(3):
        m = alpha[j].item() / total
        same_distribution(tpu[:, j].to("tpu"), cpu[:, j], m, m * (1 - m) / (total + 1))


def test_dirichlet_with_tiny_concentrations_still_normalizes():
    # Gamma samples of α = 1e-3 underflow float32; the CPU works in float64.
    a = torch.full((2000, 4), 1e-3)
    s = torch._sample_dirichlet(a.to("tpu")).cpu()
    torch.testing.assert_close(s.sum(-1), torch.ones(2000), rtol=0, atol=1e-6)
    assert (s > 0).all()
    # Nearly all mass on one coordinate, as on the CPU.
    assert (s.max(-1).values > 0.99).float().mean() > 0.95


def test_edge_values_as_on_the_cpu():
    a = torch.tensor([0.0, 1e-30, float("nan"), -1.0])
    assert torch.equal(torch._standard_gamma(a.to("tpu")).cpu(), torch._standard_gamma(a))
    count = torch.tensor([0.0, 10.0, 10.0, 100.0, -3.0, 10.0, 7.0])
    prob = torch.tensor([0.5, 0.0, 1.0, 1.0, 0.5, 1.5, -0.2])
    assert torch.equal(torch.binomial(count.to("tpu"), prob.to("tpu")).cpu(), torch.binomial(count, prob))
    nan = torch.binomial(torch.tensor([10.0]).to("tpu"), torch.tensor([float("nan")]).to("tpu")).cpu()
    assert nan.isnan().all()
    assert torch.equal(torch.poisson(torch.zeros(5, device="tpu")).cpu(), torch.zeros(5))


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
def test_poisson_with_a_bad_rate_raises_the_cpu_error(bad, mode):
    rates = torch.tensor([1.0, bad])
    with pytest.raises(RuntimeError, match="invalid Poisson rate, expected rate to be non-negative"):
        torch.poisson(rates)
    with pytest.raises(RuntimeError, match="invalid Poisson rate, expected rate to be non-negative"):
        torch.poisson(rates.to("tpu")).cpu()
    assert torch.poisson(torch.ones(3, device="tpu")).cpu().shape == (3,)  # the device still works


def test_dtypes_and_shapes():
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        r = torch.poisson(torch.full((2, 3), 4.0, dtype=dtype, device="tpu"))
        assert r.dtype == dtype and r.shape == (2, 3)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.poisson(torch.ones(3, dtype=torch.long, device="tpu"))
    with pytest.raises(RuntimeError, match="Found dtype Double but expected Float"):
        torch.binomial(torch.ones(2, device="tpu"), torch.full((2,), 0.5, dtype=torch.float64, device="tpu"))
    b = torch.binomial(torch.full((4, 1), 10.0, device="tpu"), torch.full((3,), 0.5, device="tpu"))
    assert b.shape == (4, 3)
    assert torch._standard_gamma(torch.ones(0, 3, device="tpu")).shape == (0, 3)
    assert torch._sample_dirichlet(torch.ones(2, 0, device="tpu")).shape == (2, 0)


def test_seeded_draws_repeat_and_differ_between_calls(mode):
    a = torch.full((1000,), 2.0, device="tpu")
    torch.manual_seed(7)
    first, second = torch._standard_gamma(a).cpu(), torch._standard_gamma(a).cpu()
    torch.manual_seed(7)
    again = torch._standard_gamma(a).cpu()
    assert torch.equal(first, again)
    assert not torch.equal(first, second)
    g = torch.Generator(device="tpu").manual_seed(3)
    x = torch.poisson(torch.full((1000,), 20.0, device="tpu"), generator=g).cpu()
    g.manual_seed(3)
    assert torch.equal(x, torch.poisson(torch.full((1000,), 20.0, device="tpu"), generator=g).cpu())


def test_torch_distributions_sample_on_tpu():
    torch.manual_seed(5)
    cases = {
        "Gamma": lambda d: torch.distributions.Gamma(torch.tensor(2.0, device=d), torch.tensor(3.0, device=d)),
        "Beta": lambda d: torch.distributions.Beta(torch.tensor(2.0, device=d), torch.tensor(5.0, device=d)),
        "Chi2": lambda d: torch.distributions.Chi2(torch.tensor(3.0, device=d)),
        "StudentT": lambda d: torch.distributions.StudentT(torch.tensor(5.0, device=d)),
        "Poisson": lambda d: torch.distributions.Poisson(torch.tensor(6.0, device=d)),
        "Binomial": lambda d: torch.distributions.Binomial(20, torch.tensor(0.25, device=d)),
    }
    for name, make in cases.items():
        dist = make("tpu")
        s = dist.sample((N,))
        assert s.device.type == "tpu", name
        same_distribution(s, make("cpu").sample((N,)), dist.mean.item(), dist.variance.item())
    d = torch.distributions.Dirichlet(torch.tensor([1.0, 2.0, 3.0], device="tpu")).sample((100,))
    assert d.shape == (100, 3) and d.device.type == "tpu"


def test_samples_in_fused_eager_match_strict():
    a = torch.full((500,), 1.5, device="tpu")
    out = {}
    for mode in ("strict", "fused"):
        torch_tpu_rs.set_eager_mode(mode)
        torch.manual_seed(11)
        out[mode] = (torch._standard_gamma(a) * 2 + torch.poisson(a)).cpu()
    assert torch.equal(out["strict"], out["fused"])


@pytest.mark.parametrize("alpha", [0.05, 0.7, 3.0, 40.0, 2000.0])
def test_standard_gamma_grad_is_the_exact_derivative(alpha):
    """dx/dα of a gamma sample x at fixed CDF value: -(∂P/∂α) / pdf(x). The
    CPU uses a fitted approximation (relative error up to about 1e-3); the
    device sums P's series, so it is checked against a finite difference of
    torch.special.gammainc, and against the CPU loosely."""
    torch.manual_seed(6)
    a = torch.full((2000,), alpha, dtype=torch.float64)
    x = torch._standard_gamma(a)
    got = torch._standard_gamma_grad(a.to("tpu"), x.to("tpu")).cpu()
    h = 1e-6 * alpha
    dp = (torch.special.gammainc(a + h, x) - torch.special.gammainc(a - h, x)) / (2 * h)
    pdf = torch.exp((a - 1) * x.log() - x - torch.lgamma(a))
    torch.testing.assert_close(got, -dp / pdf, rtol=2e-6, atol=0)
    torch.testing.assert_close(got, torch._standard_gamma_grad(a, x), rtol=2e-3, atol=0)


def test_gamma_rsample_backpropagates_through_the_sampler(mode):
    alpha = torch.tensor([0.5, 2.0, 7.0], requires_grad=True)
    alpha_t = alpha.detach().to("tpu").requires_grad_()
    torch.manual_seed(8)
    x = torch.distributions.Gamma(alpha_t, torch.ones(3, device="tpu")).rsample((500,))
    (x * x).sum().backward()
    # The same chain on the CPU, through its own gradient formula, at the
    # device's samples.
    xc = x.detach().cpu()
    expected = (2 * xc * torch._standard_gamma_grad(alpha.detach().expand(500, 3), xc)).sum(0)
    torch.testing.assert_close(alpha_t.grad.cpu(), expected, rtol=2e-3, atol=1e-5)


@pytest.mark.parametrize("alpha", [0.2, 1.0, 4.0, 60.0])
def test_dirichlet_grad_is_exact_where_the_beta_cdf_is_closed_form(alpha):
    """For Beta(α, 1), I_x = x^α, so dx/dα at fixed β is -x log x / α;
    _dirichlet_grad returns that over 1 - x. x spans both sides of the
    series' switch to 1 - x."""
    x = torch.linspace(0.01, 0.99, 99, dtype=torch.float64)
    a = torch.full_like(x, alpha)
    got = torch._dirichlet_grad(x.to("tpu"), a.to("tpu"), (a + 1).to("tpu")).cpu()
    torch.testing.assert_close(got, -x * x.log() / alpha / (1 - x), rtol=1e-9, atol=0)


@pytest.mark.parametrize("alpha,beta", [(0.3, 0.5), (2.0, 5.0), (5.0, 2.0), (50.0, 3.0), (300.0, 200.0)])
def test_dirichlet_grad_matches_the_cpu(alpha, beta):
    torch.manual_seed(9)
    a = torch.full((2000,), alpha, dtype=torch.float64)
    total = a + beta
    x = torch.distributions.Beta(a, total - a).sample()
    got = torch._dirichlet_grad(x.to("tpu"), a.to("tpu"), total.to("tpu")).cpu()
    # The CPU's fitted approximation is within about 1e-3 of the exact value.
    torch.testing.assert_close(got, torch._dirichlet_grad(x, a, total), rtol=3e-3, atol=0)


def test_beta_and_dirichlet_rsample_backpropagate(mode):
    conc = torch.tensor([0.7, 2.0, 5.0])
    conc_t = conc.to("tpu").requires_grad_()
    torch.manual_seed(10)
    x = torch.distributions.Dirichlet(conc_t).rsample((400,))
    (x[:, 0] * 3 + x[:, 2] ** 2).sum().backward()
    # PyTorch's own backward formula, on the CPU, at the device's samples.
    xc = x.detach().cpu()
    go = torch.zeros_like(xc)
    go[:, 0], go[:, 2] = 3.0, 2 * xc[:, 2]
    total = conc.sum().expand_as(xc)
    g = torch._dirichlet_grad(xc, conc.expand_as(xc), total)
    expected = (g * (go - (xc * go).sum(-1, keepdim=True))).sum(0)
    torch.testing.assert_close(conc_t.grad.cpu(), expected, rtol=3e-3, atol=1e-4)
    a = torch.tensor(2.0, device="tpu", requires_grad=True)
    b = torch.distributions.Beta(a, torch.tensor(3.0, device="tpu")).rsample((100,))
    b.sum().backward()
    bc = b.detach().cpu()
    # Beta is Dirichlet([α, β]) read at coordinate 0: dx/dα = g (1 - x).
    g = torch._dirichlet_grad(bc, torch.full_like(bc, 2.0), torch.full_like(bc, 5.0))
    torch.testing.assert_close(a.grad.cpu(), (g * (1 - bc)).sum(), rtol=3e-3, atol=1e-4)
