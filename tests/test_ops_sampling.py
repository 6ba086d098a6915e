"""Distance, sliding-block and sampling ops against the CPU: pdist/cdist,
nn.functional.unfold/fold, grid_sample (2d and 3d, every mode), fractional
max pooling (with given samples), and the random multinomial and rrelu
(shapes, ranges, seed reproducibility, statistics)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same, run_both, to_tpu

P_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, math.inf]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _grads(fn, *inputs):
    """Gradients of sum(fn(*inputs)**2) w.r.t. the float inputs."""
    leaves = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    out = fn(*leaves)
    outs = out if isinstance(out, tuple) else (out,)
    sum(o.double().pow(2).sum() for o in outs if o.is_floating_point()).backward()
    return tuple(x.grad for x in leaves if x.requires_grad)


def grads_both(fn, *cpu_inputs):
    return _grads(fn, *to_tpu(list(cpu_inputs))), _grads(fn, *cpu_inputs)


@pytest.mark.parametrize("p", P_VALUES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pdist(p, dtype):
    x = torch.randn(7, 5, dtype=dtype)
    x[3] = x[1]  # a zero distance
    assert_same(*run_both(lambda t: F.pdist(t, p), x))
    # p < 1 gradients are ill-conditioned (|d|^(p-1)): allow a few ulp more.
    assert_same(*grads_both(lambda t: F.pdist(t, p), x), rtol=1e-4)


def test_pdist_many_rows_and_edge_cases():
    # Pair indices come from a square-root formula: check a larger n.
    x = torch.randn(70, 3)
    assert_same(*run_both(F.pdist, x), rtol=1e-5)
    assert_same(*run_both(F.pdist, torch.randn(1, 4)))
    assert_same(*run_both(F.pdist, torch.randn(5, 0)))
    with pytest.raises(RuntimeError):
        F.pdist(torch.randn(5, device="tpu"))


@pytest.mark.parametrize("p", P_VALUES)
def test_cdist_broadcast_batches(p):
    a, b = torch.randn(2, 1, 4, 5), torch.randn(3, 6, 5)
    assert_same(*run_both(lambda x, y: torch.cdist(x, y, p), a, b), rtol=1e-5)
    assert_same(*grads_both(lambda x, y: torch.cdist(x, y, p), a, b), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"])
def test_cdist_compute_modes(mode):
    a, b = torch.randn(30, 4, dtype=torch.float64), torch.randn(27, 4, dtype=torch.float64)
    assert_same(*run_both(lambda x, y: torch.cdist(x, y, compute_mode=mode), a, b))
    assert_same(*grads_both(lambda x, y: torch.cdist(x, y, compute_mode=mode), a, b), rtol=1e-6, atol=1e-6)


def test_cdist_errors():
    with pytest.raises(RuntimeError):
        torch.cdist(torch.randn(3, 4, device="tpu"), torch.randn(3, 5, device="tpu"))


UNFOLD_ARGS = [
    dict(kernel_size=2),
    dict(kernel_size=(2, 3), dilation=(1, 2), padding=(1, 0), stride=(2, 1)),
    dict(kernel_size=3, padding=1, stride=2),
]


@pytest.mark.parametrize("kw", UNFOLD_ARGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool])
def test_unfold(kw, dtype):
    x = torch.randn(2, 3, 7, 8).to(dtype)
    assert_same(*run_both(lambda t: F.unfold(t, **kw), x))
    assert_same(*run_both(lambda t: F.unfold(t, **kw), x[0]))  # unbatched
    if dtype == torch.float32:
        assert_same(*grads_both(lambda t: F.unfold(t, **kw), x))


@pytest.mark.parametrize("kw", UNFOLD_ARGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.bool])
def test_fold(kw, dtype):
    size = (7, 8)
    cols = F.unfold(torch.randn(2, 3, *size), **kw)
    cols = (cols > 0.5) if dtype == torch.bool else cols.to(dtype)
    assert_same(*run_both(lambda t: F.fold(t, size, **kw), cols))
    assert_same(*run_both(lambda t: F.fold(t, size, **kw), cols[0]))  # unbatched
    if dtype == torch.float32:
        assert_same(*grads_both(lambda t: F.fold(t, size, **kw), cols))


def test_fold_errors():
    with pytest.raises(RuntimeError):
        F.fold(torch.randn(1, 5, 12, device="tpu"), (4, 5), 2)  # 5 not divisible by 4
    # Integer types are not supported, as on the CPU.
    with pytest.raises(NotImplementedError):
        F.unfold(torch.ones(1, 1, 3, 3, dtype=torch.int64, device="tpu"), 2)
    with pytest.raises(NotImplementedError):
        F.fold(torch.ones(1, 4, 4, dtype=torch.int32, device="tpu"), (3, 3), 2)


MODES = ["bilinear", "nearest", "bicubic"]
PADS = ["zeros", "border", "reflection"]


def _gs(mode, pad, align):
    return lambda a, g: F.grid_sample(a, g, mode=mode, padding_mode=pad, align_corners=align)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("pad", PADS)
def test_grid_sample_2d(mode, pad):
    im = torch.randn(2, 3, 5, 6)
    grid = torch.rand(2, 4, 7, 2) * 2.6 - 1.3
    # Both align_corners values for every (mode, pad), one per dtype.
    align = (MODES.index(mode) + PADS.index(pad)) % 2 == 0
    # CPU rounds every step to bfloat16; so does the lowering: exact match.
    assert_same(*run_both(_gs(mode, pad, align), im.bfloat16(), grid.bfloat16()), rtol=0, atol=0)
    fn = _gs(mode, pad, not align)
    im, grid = im.double(), grid.double()
    assert_same(*run_both(fn, im, grid))
    assert_same(*grads_both(fn, im, grid), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_grid_sample_2d_float32(mode):
    im = torch.randn(2, 3, 5, 6)
    grid = torch.rand(2, 4, 7, 2) * 2.6 - 1.3
    fn = _gs(mode, "reflection", False)
    assert_same(*run_both(fn, im, grid), rtol=1e-5, atol=1e-5)
    assert_same(*grads_both(fn, im, grid), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("pad", PADS)
def test_grid_sample_3d(mode, pad):
    im = torch.randn(2, 2, 3, 4, 5)
    grid = torch.rand(2, 2, 3, 4, 3) * 2.6 - 1.3
    align = (MODES.index(mode) + PADS.index(pad)) % 2 == 0
    assert_same(*run_both(_gs(mode, pad, align), im.half(), grid.half()), rtol=0, atol=0)
    fn = _gs(mode, pad, not align)
    im, grid = im.double(), grid.double()
    assert_same(*run_both(fn, im, grid))
    assert_same(*grads_both(fn, im, grid), rtol=1e-6, atol=1e-6)


def test_grid_sample_grid_only_grad_and_errors():
    im = torch.randn(1, 2, 4, 4)
    grid = torch.rand(1, 3, 3, 2) * 2 - 1
    assert_same(*grads_both(lambda g: F.grid_sample(im.to(g.device), g, align_corners=False), grid), rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError):
        torch.grid_sampler_2d(im.to("tpu"), grid.double().to("tpu"), 0, 0, False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_fractional_max_pool(dtype):
    x = torch.randn(2, 3, 9, 11).to(dtype)
    x[0, 0, 2, 3] = float("nan")
    s = torch.rand(2, 3, 2).to(dtype)
    f2 = lambda t, u: F.fractional_max_pool2d(t, (2, 3), output_size=(5, 4), return_indices=True, _random_samples=u)  # noqa: E731
    assert_same(*run_both(f2, x, s))
    assert_same(*run_both(f2, x[0], s[:1]))  # unbatched
    x3 = torch.randn(2, 3, 7, 9, 8).to(dtype)
    s3 = torch.rand(2, 3, 3).to(dtype)
    f3 = lambda t, u: F.fractional_max_pool3d(t, (2, 3, 2), output_size=(4, 5, 3), return_indices=True, _random_samples=u)  # noqa: E731
    assert_same(*run_both(f3, x3, s3))


def test_fractional_max_pool_grad_and_random_samples():
    x = torch.randn(2, 3, 9, 11)
    s = torch.rand(2, 3, 2)
    assert_same(*grads_both(lambda t: F.fractional_max_pool2d(t, 3, output_size=(4, 5), _random_samples=s.to(t.device)), x))
    x3 = torch.randn(1, 2, 6, 7, 8)
    s3 = torch.rand(1, 2, 3)
    assert_same(*grads_both(lambda t: F.fractional_max_pool3d(t, 2, output_size=3, _random_samples=s3.to(t.device)), x3))
    # Without samples the function draws them with torch.rand on the device.
    out = F.fractional_max_pool2d(x.to("tpu"), 2, output_ratio=(0.5, 0.5))
    assert out.shape == (2, 3, 4, 5) and out.device.type == "tpu"


def _draw(seed, fn):
    torch.manual_seed(seed)
    return fn().cpu()


def test_multinomial_shapes_and_reproducibility():
    p = torch.tensor([[0.1, 0.0, 0.3, 0.6], [1.0, 1.0, 0.0, 2.0]], device="tpu")
    for repl, n in [(False, 3), (True, 7)]:
        a = _draw(5, lambda: torch.multinomial(p, n, replacement=repl))
        b = _draw(5, lambda: torch.multinomial(p, n, replacement=repl))
        c = _draw(6, lambda: torch.multinomial(p, n, replacement=repl))
        assert a.dtype == torch.int64 and a.shape == (2, n)
        assert torch.equal(a, b)
        assert not torch.equal(a, c) or repl is False  # fresh seed, fresh draw
        assert ((a >= 0) & (a < 4)).all()
        assert not (a[0] == 1).any() and not (a[1] == 2).any()  # zero probability never drawn
        if not repl:
            assert all(len(set(row.tolist())) == n for row in a)
    one = torch.multinomial(p[0], 2)
    assert one.shape == (2,)


def _chi2_ok(counts, probs, n):
    exp = probs * n
    chi2 = (((counts - exp) ** 2) / exp).sum().item()
    return chi2 < 30  # ~ 99.99th percentile for <= 5 degrees of freedom


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_multinomial_statistics(dtype):
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4])
    n = 40000
    torch.manual_seed(0)
    draw = torch.multinomial((probs * 3).to(dtype).to("tpu"), n, replacement=True).cpu()
    counts = torch.bincount(draw, minlength=4).double()
    assert _chi2_ok(counts, probs.double(), n), counts
    # Without replacement, the first pick follows the probabilities too.
    rows = 20000
    torch.manual_seed(1)
    first = torch.multinomial(probs.to(dtype).to("tpu").expand(rows, 4).contiguous(), 2).cpu()
    assert (first[:, 0] != first[:, 1]).all()
    counts = torch.bincount(first[:, 0], minlength=4).double()
    assert _chi2_ok(counts, probs.double(), rows), counts


def test_multinomial_errors():
    p = torch.rand(3, 4, device="tpu")
    with pytest.raises(RuntimeError):
        torch.multinomial(p, 5)  # more than the categories, without replacement
    with pytest.raises(RuntimeError):
        torch.multinomial(p, 0)
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.rand(2, 2, 2, device="tpu"), 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_rrelu_eval_matches_cpu(dtype):
    x = torch.randn(4, 6).to(dtype)
    assert_same(*run_both(lambda t: F.rrelu(t, 0.1, 0.3, training=False), x))
    assert_same(*grads_both(lambda t: F.rrelu(t, training=False), x.float()))


def test_rrelu_training():
    lower, upper = 0.1, 0.3
    x = torch.randn(64, 64, device="tpu")
    a = _draw(3, lambda: F.rrelu(x, lower, upper, training=True))
    b = _draw(3, lambda: F.rrelu(x, lower, upper, training=True))
    assert torch.equal(a, b)
    xc = x.cpu()
    neg = xc < 0
    assert torch.equal(a[~neg], xc[~neg])
    ratio = a[neg] / xc[neg]
    assert ((ratio >= lower - 1e-6) & (ratio <= upper + 1e-6)).all()
    assert abs(ratio.mean().item() - (lower + upper) / 2) < 0.01  # ~2000 U(0.1, 0.3) draws
    # The noise argument is written: the slope where x <= 0, else 1.
    noise = torch.zeros_like(x)
    out = torch.ops.aten.rrelu_with_noise(x, noise, lower, upper, True)
    nc = noise.cpu()
    assert torch.equal(nc[~neg], torch.ones_like(nc[~neg]))
    torch.testing.assert_close(out.cpu()[neg], xc[neg] * nc[neg])
    # In place, and its gradient is the noise.
    y = x.clone()
    F.rrelu_(y, lower, upper, training=True)
    assert ((y.cpu()[neg] / xc[neg]) >= lower - 1e-6).all()
    leaf = x.clone().requires_grad_()
    torch.manual_seed(9)
    F.rrelu(leaf, lower, upper, training=True).sum().backward()
    g = leaf.grad.cpu()
    assert torch.equal(g[~neg], torch.ones_like(g[~neg]))
    assert ((g[neg] >= lower - 1e-6) & (g[neg] <= upper + 1e-6)).all()


def test_multinomial_without_replacement_draws_zero_categories_last(mode):
    """More samples than positive categories is allowed, as on the CPU: the
    positive categories are drawn first, the zero-probability ones after."""
    p = torch.tensor([[0.1, 0.0, 0.5, 0.0], [0.0, 0.0, 1.0, 0.0]])
    torch.multinomial(p, 4)  # the CPU accepts it
    for _ in range(5):
        out = torch.multinomial(p.to("tpu"), 4).cpu()
        assert sorted(out[0, :2].tolist()) == [0, 2] and sorted(out[0, 2:].tolist()) == [1, 3]
        assert out[1, 0].item() == 2 and sorted(out[1, 1:].tolist()) == [0, 1, 3]
