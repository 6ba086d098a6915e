"""Factories (arange, linspace, logspace, eye, full/zeros/ones, *_like,
tril_indices, scalar_tensor) and random ops (rand, randn, randint, random_,
bernoulli, exponential_, normal, randperm) on tpu.

Factories compare with the CPU exactly; random ops check shapes, dtypes,
ranges, moments within statistical tolerance, and reproducibility under
seeds and explicit tpu generators."""
import math

import pytest
import torch

from conftest import assert_same

TPU = "tpu"


def same_factory(fn, **tol):
    assert_same(fn(TPU), fn("cpu"), **tol)


# ---------------------------------------------------------------- factories

@pytest.mark.parametrize(
    "args,kw",
    [((5,), {}), ((2, 9), {}), ((1, 10, 3), {}), ((10, 1, -2), {}), ((0, 1, 0.1), {}), ((-1.5, 2.25, 0.25), {}),
     ((5,), dict(dtype=torch.float32)), ((0, 3, 0.5), dict(dtype=torch.float64)),
     ((0, 7), dict(dtype=torch.int32)), ((0, 20, 3), dict(dtype=torch.bfloat16)), ((3, 3), {})],
)
def test_arange(args, kw):
    same_factory(lambda d: torch.arange(*args, device=d, **kw))


def test_arange_integral_floats_into_int_dtype():
    same_factory(lambda d: torch.arange(0.0, 5.0, dtype=torch.int64, device=d))
    same_factory(lambda d: torch.arange(0, 5.5, dtype=torch.int32, device=d))
    same_factory(lambda d: torch.arange(-3.0, 9.0, 2.0, dtype=torch.int64, device=d))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
@pytest.mark.parametrize("args", [(0, 10, 5), (0.5, 9.7, 7), (-3, 4, 6), (10, 0, 4), (2, 2, 1)])
def test_linspace_logspace_int_dtype(dtype, args):
    # The out tensor names the dtype; bounds convert to it first, as on the
    # CPU (-3 as uint8 is 253), and each value truncates.
    same_factory(lambda d: torch.linspace(*args, dtype=dtype, device=d))
    same_factory(lambda d: torch.logspace(args[0], args[1], 4, base=2, dtype=dtype, device=d))


def test_arange_out_and_errors():
    def f(d):
        o = torch.empty(0, device=d, dtype=torch.float64)
        torch.arange(0, 1, 0.125, out=o)
        return o

    same_factory(f)
    for bad in [(0, 5, 0), (5, 0, 1)]:
        with pytest.raises(RuntimeError):
            torch.arange(*bad)
        with pytest.raises(RuntimeError):
            torch.arange(*bad, device=TPU)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("args", [(0, 1, 5), (-3, 7.5, 11), (2, 2, 1), (1, 0, 4), (0, 1, 0)])
def test_linspace_logspace(dtype, args):
    same_factory(lambda d: torch.linspace(*args, device=d, dtype=dtype))
    same_factory(lambda d: torch.logspace(*args, device=d, dtype=dtype), rtol=1e-5 if dtype != torch.bfloat16 else None)
    same_factory(lambda d: torch.logspace(*args, base=2.0, device=d, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool])
def test_eye_full_zeros_ones(dtype):
    same_factory(lambda d: torch.eye(4, device=d, dtype=dtype))
    same_factory(lambda d: torch.eye(3, 5, device=d, dtype=dtype))
    same_factory(lambda d: torch.full((2, 3), 7, device=d, dtype=dtype))
    same_factory(lambda d: torch.zeros(2, 3, device=d, dtype=dtype))
    same_factory(lambda d: torch.ones(4, device=d, dtype=dtype))
    base = torch.randn(2, 3).to(dtype)
    for like in (torch.zeros_like, torch.ones_like, lambda t: torch.full_like(t, 3)):
        assert_same(like(base.to(TPU)), like(base))


def test_eye_out():
    def f(d):
        o = torch.empty(0, device=d)
        torch.eye(3, 4, out=o)
        return o

    same_factory(f)


@pytest.mark.parametrize("args", [(3, 3), (4, 3, 1), (3, 5, -1), (0, 2)])
def test_tril_triu_indices(args):
    same_factory(lambda d: torch.tril_indices(*args, device=d))
    same_factory(lambda d: torch.triu_indices(*args, device=d))


def test_scalar_tensor_and_tensor():
    same_factory(lambda d: torch.scalar_tensor(3.5, device=d))
    same_factory(lambda d: torch.tensor([1.5, 2.0], device=d))
    same_factory(lambda d: torch.tensor(7, device=d))


# ------------------------------------------------------------------ random

N = 4096


def moments(t):
    t = t.cpu().double()
    return t.mean().item(), t.std().item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_rand_uniform(dtype):
    x = torch.rand(N, device=TPU, dtype=dtype)
    assert x.dtype == dtype and x.shape == (N,) and x.device.type == TPU
    c = x.cpu()
    assert (c >= 0).all() and (c < 1).all()
    m, s = moments(x)
    assert abs(m - 0.5) < 0.03 and abs(s - math.sqrt(1 / 12)) < 0.02
    y = torch.empty(N, device=TPU, dtype=dtype).uniform_(-3, 5)
    c = y.cpu()
    assert (c >= -3).all() and (c <= 5).all()
    assert abs(c.double().mean().item() - 1.0) < 0.2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_randn_normal(dtype):
    x = torch.randn(N, device=TPU, dtype=dtype)
    assert x.dtype == dtype and x.shape == (N,)
    m, s = moments(x)
    assert abs(m) < 0.08 and abs(s - 1) < 0.05
    assert torch.isfinite(x.cpu()).all()
    y = torch.empty(N, device=TPU, dtype=dtype).normal_(3.0, 0.5)
    m, s = moments(y)
    assert abs(m - 3) < 0.05 and abs(s - 0.5) < 0.05
    z = torch.randn(3, 5, 7, device=TPU)
    assert z.shape == (3, 5, 7)


def test_normal_tensor_args():
    mean = torch.arange(8.0).to(TPU).repeat(512)
    x = torch.normal(mean, 0.1)
    assert x.shape == mean.shape
    assert (x.cpu() - mean.cpu()).abs().max() < 1.0
    std = torch.full((N,), 2.0, device=TPU)
    y = torch.normal(1.0, std)
    m, s = moments(y)
    assert abs(m - 1) < 0.15 and abs(s - 2) < 0.15
    z = torch.normal(mean, torch.full_like(mean, 0.5))
    assert abs(moments(z - mean)[1] - 0.5) < 0.05


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.bfloat16, torch.uint8])
def test_randint_random(dtype):
    x = torch.randint(3, 10, (N,), device=TPU, dtype=dtype)
    assert x.dtype == dtype
    c = x.cpu()
    assert (c >= 3).all() and (c < 10).all()
    assert set(c.long().unique().tolist()) == set(range(3, 10))
    y = torch.empty(N, device=TPU, dtype=dtype).random_(5)
    c = y.cpu()
    assert (c >= 0).all() and (c < 5).all() and len(c.unique()) == 5
    z = torch.empty(N, device=TPU, dtype=dtype).random_()
    c = z.cpu().double()
    assert (c >= 0).all() and len(c.unique()) > 10


def test_random_bool_and_large_range():
    b = torch.empty(N, device=TPU, dtype=torch.bool).random_()
    assert 0.4 < b.cpu().float().mean().item() < 0.6
    x = torch.randint(-(2**40), 2**40, (N,), device=TPU)
    c = x.cpu()
    assert (c >= -(2**40)).all() and (c < 2**40).all() and (c < 0).any() and (c > 2**39).any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_bernoulli(dtype):
    x = torch.empty(N, device=TPU, dtype=dtype).bernoulli_(0.3)
    c = x.cpu()
    assert set(c.unique().tolist()) <= {0.0, 1.0}
    assert abs(c.double().mean().item() - 0.3) < 0.04
    p = torch.linspace(0, 1, 8).repeat(512).to(dtype).to(TPU)
    y = torch.bernoulli(p)
    assert y.dtype == dtype
    c, pc = y.cpu().double(), p.cpu().double()
    assert (c[pc == 0] == 0).all() and (c[pc == 1] == 1).all()
    assert abs(c.mean().item() - 0.5) < 0.04
    z = torch.empty(N, device=TPU, dtype=dtype).bernoulli_(p)
    assert abs(z.cpu().double().mean().item() - 0.5) < 0.04


def test_exponential_and_friends():
    x = torch.empty(N, device=TPU).exponential_(2.0)
    c = x.cpu()
    assert (c > 0).all() and abs(c.mean().item() - 0.5) < 0.05
    g = torch.empty(N, device=TPU).geometric_(0.25).cpu()
    assert (g >= 1).all() and abs(g.mean().item() - 4) < 0.4
    ln = torch.empty(N, device=TPU).log_normal_(0, 0.25).cpu()
    assert (ln > 0).all() and abs(ln.log().mean().item()) < 0.03
    ca = torch.empty(N, device=TPU).cauchy_().cpu()
    assert abs(ca.median().item()) < 0.1


def test_randperm():
    for n in (1, 10, 100):
        p = torch.randperm(n, device=TPU)
        assert p.dtype == torch.int64
        assert sorted(p.cpu().tolist()) == list(range(n))
    assert torch.randperm(50, device=TPU).cpu().tolist() != list(range(50))
    q = torch.randperm(20, device=TPU, dtype=torch.float32)
    assert q.dtype == torch.float32 and sorted(q.cpu().tolist()) == list(map(float, range(20)))


def test_seed_reproducible():
    def draw():
        return [torch.rand(64, device=TPU).cpu(), torch.randn(3, 4, device=TPU).cpu(),
                torch.randint(0, 100, (32,), device=TPU).cpu(), torch.randperm(16, device=TPU).cpu(),
                torch.empty(64, device=TPU).bernoulli_(0.5).cpu()]

    torch.manual_seed(1234)
    a = draw()
    torch.manual_seed(1234)
    b = draw()
    torch.manual_seed(99)
    c = draw()
    for x, y, z in zip(a, b, c):
        assert torch.equal(x, y)
    assert not torch.equal(a[0], c[0]) and not torch.equal(a[1], c[1])
    # consecutive draws differ
    assert not torch.equal(torch.rand(64, device=TPU).cpu(), torch.rand(64, device=TPU).cpu())


def test_generator_object():
    g = torch.Generator(device=TPU)
    g.manual_seed(7)
    x = torch.rand(32, device=TPU, generator=g).cpu()
    y = torch.randn(32, device=TPU, generator=g).cpu()
    g.manual_seed(7)
    assert torch.equal(torch.rand(32, device=TPU, generator=g).cpu(), x)
    assert torch.equal(torch.randn(32, device=TPU, generator=g).cpu(), y)
    g2 = torch.Generator(device=TPU).manual_seed(8)
    assert not torch.equal(torch.rand(32, device=TPU, generator=g2).cpu(), x)
    # the default generator is independent of g
    torch.manual_seed(7)
    d1 = torch.rand(32, device=TPU).cpu()
    g.manual_seed(7)
    torch.rand(32, device=TPU, generator=g)
    torch.manual_seed(7)
    assert torch.equal(torch.rand(32, device=TPU).cpu(), d1)


def test_fork_rng_state_roundtrip():
    torch.manual_seed(5)
    state = torch.tpu.get_rng_state()
    x = torch.randn(16, device=TPU).cpu()
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.randn(16, device=TPU).cpu(), x)


@pytest.mark.parametrize(
    "draw",
    [
        lambda g: torch.randn(3, device=TPU, generator=g),
        lambda g: torch.randint(0, 5, (3,), device=TPU, generator=g),
        lambda g: torch.randperm(5, device=TPU, generator=g),
        lambda g: torch.zeros(4, device=TPU).normal_(generator=g),
        lambda g: torch.rand(4, device=TPU).bernoulli_(generator=g),
        lambda g: torch.multinomial(torch.ones(4, device=TPU), 2, generator=g),
    ],
)
def test_a_cpu_generator_is_refused_like_on_cuda_and_the_device_keeps_working(mode, draw):
    # Was a process abort: the C++ error crossed into Rust.
    with pytest.raises(RuntimeError, match="Expected a 'tpu' device type for generator but found 'cpu'"):
        draw(torch.Generator()).cpu()
    g = torch.Generator(device=TPU).manual_seed(3)
    a = draw(g).cpu()
    g.manual_seed(3)
    assert torch.equal(draw(g).cpu(), a)


def test_random_inplace_on_view_updates_base():
    base = torch.zeros(4, 6, device=TPU)
    base[:, ::2].uniform_(1, 2)
    c = base.cpu()
    assert (c[:, 1::2] == 0).all() and (c[:, ::2] >= 1).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 33])
def test_kaiser_window(dtype, n):
    # PyTorch's own kernel for it calls a CPU/CUDA-only stub (an internal assert on tpu).
    tol = dict(rtol=1e-2, atol=1e-2) if dtype == torch.bfloat16 else dict(rtol=1e-6, atol=1e-6)
    for periodic in (True, False):
        for beta in (12.0, 0.0, 5.5):
            same_factory(lambda d: torch.kaiser_window(n, periodic, beta, dtype=dtype, device=d), **tol)
    same_factory(lambda d: torch.kaiser_window(n, dtype=dtype, device=d), **tol)


def test_kaiser_window_errors_and_out():
    with pytest.raises(RuntimeError, match="non-negative window_length"):
        torch.kaiser_window(-1, device=TPU)
    with pytest.raises(RuntimeError, match="floating point dtypes"):
        torch.kaiser_window(4, dtype=torch.int64, device=TPU)
    out = torch.empty(0, dtype=torch.float64, device=TPU)
    torch.ops.aten.kaiser_window.beta_out(6, False, 3.0, out=out)
    assert_same(out, torch.kaiser_window(6, False, 3.0, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8])
@pytest.mark.parametrize("args", [(0.5, 4), (0, 5, 1.5), (0, 2, 0.5), (-2.7, 3.2, 1.3), (5, 0.5, -1.5)])
def test_arange_float_bounds_into_int_dtype(dtype, args):
    # The CPU truncates start and step to int64 before stepping (so step 0.5
    # gives zeros); the length still comes from the float bounds. This used
    # to raise "result type Double can't be cast to the desired output type".
    same_factory(lambda d: torch.arange(*args, dtype=dtype, device=d))

    def out(d):
        o = torch.empty(0, dtype=dtype, device=d)
        torch.arange(*args, out=o)
        return o
    same_factory(out)
