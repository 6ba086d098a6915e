"""Losses, small activations and misc nn ops (crates/lowering/src/ops/losses*)
against the CPU: forward values, dtypes, reductions and gradients."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same, run_both, to_tpu

A = torch.ops.aten
FLOATS = [torch.float32, torch.float64, torch.bfloat16]
REDUCTIONS = ["none", "mean", "sum"]


def grads(fn, *inputs, extra=()):
    """(tpu grads, cpu grads) of sum(fn(*inputs, *extra) * cotangent) w.r.t. inputs."""
    out = []
    for dev in ("cpu", "tpu"):
        xs = [x.detach().to(dev).requires_grad_(True) for x in inputs]
        ex = [e.to(dev) if isinstance(e, torch.Tensor) else e for e in extra]
        y = fn(*xs, *ex)
        torch.manual_seed(3)
        ct = torch.randn(y.shape, dtype=y.dtype).to(dev)
        out.append(torch.autograd.grad((y * ct).sum(), xs))
    return out[1], out[0]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(dtype, reduction):
    torch.manual_seed(0)
    x = torch.rand(4, 5, dtype=dtype)
    x[0, 0] = 0.0  # log clamps at -100
    t = torch.rand(4, 5, dtype=dtype)
    w = torch.rand(5, dtype=dtype)
    for weight in (None, w.expand(4, 5)):
        tpu, cpu = run_both(lambda a, b, c: F.binary_cross_entropy(a, b, weight=c, reduction=reduction), x, t, weight)
        assert_same(tpu, cpu)
    if dtype == torch.float32:
        x = x.clamp(0.05, 0.95)
        assert_same(*grads(lambda a, b, c: F.binary_cross_entropy(a, b, c, reduction=reduction), x, extra=(t, w.expand(4, 5))))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,param", [("huber", 1.0), ("huber", 0.3), ("smooth_l1", 1.0), ("smooth_l1", 0.0), ("smooth_l1", 0.5)])
def test_huber_smooth_l1(dtype, reduction, name, param):
    torch.manual_seed(1)
    x = torch.randn(6, 5, dtype=dtype)
    t = torch.randn(6, 5, dtype=dtype)
    t[0, :] = x[0, :]  # zero differences
    if name == "huber":
        fn = lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=param)  # noqa: E731
    else:
        fn = lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=param)  # noqa: E731
    assert_same(*run_both(fn, x, t))
    if dtype == torch.float32:
        assert_same(*grads(fn, x, t))


def test_loss_parameter_errors():
    x = torch.randn(3).to("tpu")
    with pytest.raises(RuntimeError, match="delta"):
        F.huber_loss(x, x, delta=0.0)
    with pytest.raises(RuntimeError, match="beta"):
        F.smooth_l1_loss(x, x, beta=-1.0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_glu(dtype, dim):
    torch.manual_seed(2)
    x = torch.randn(4, 6, 2, dtype=dtype)
    assert_same(*run_both(lambda a: F.glu(a, dim), x))
    if dtype == torch.float32:
        assert_same(*grads(lambda a: F.glu(a, dim), x))


def test_glu_odd_dim_errors():
    with pytest.raises(RuntimeError, match="even"):
        F.glu(torch.randn(3, 3).to("tpu"), 1)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fn", [F.hardshrink, F.softshrink])
def test_shrink(dtype, fn):
    x = torch.tensor([float("nan"), 0.5, -0.5, 0.2, -0.7, 0.9, 0.0, 3.0], dtype=dtype)
    for lambd in (0.5, 0.0, 1.0):
        assert_same(*run_both(lambda a: fn(a, lambd), x))
    if dtype == torch.float32:
        y = torch.randn(5, 4)
        assert_same(*grads(lambda a: fn(a, 0.3), y))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("wshape", [(1,), (3,)])
def test_prelu(dtype, wshape):
    torch.manual_seed(4)
    x = torch.randn(2, 3, 4, dtype=dtype)
    w = torch.randn(wshape, dtype=dtype)
    assert_same(*run_both(F.prelu, x, w))
    if dtype == torch.float32:
        assert_same(*grads(F.prelu, x, w))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p,dim,maxnorm", [(2, 0, 1.0), (1, 1, 0.5), (float("inf"), -1, 0.7), (3, 1, 2.0)])
def test_renorm(dtype, p, dim, maxnorm):
    torch.manual_seed(5)
    x = torch.randn(3, 4, 2, dtype=dtype)
    assert_same(*run_both(lambda a: torch.renorm(a, p, dim, maxnorm), x))
    if dtype == torch.float32:
        assert_same(*grads(lambda a: torch.renorm(a, p, dim, maxnorm), x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss(dtype, reduction, p):
    torch.manual_seed(6)
    x = torch.randn(5, 4, dtype=dtype)
    t = torch.tensor([0, 3, 1, 1, 2])
    w = torch.rand(4, dtype=dtype)
    for weight in (None, w):
        fn = lambda a, b, c: F.multi_margin_loss(a, b, p=p, margin=0.7, weight=c, reduction=reduction)  # noqa: E731
        assert_same(*run_both(fn, x, t, weight))
    # A single frame: 1-d input and 0-d target give a scalar.
    assert_same(*run_both(lambda a, b: F.multi_margin_loss(a, b, reduction=reduction), x[0], t[1]))
    if dtype == torch.float32:
        assert_same(*grads(lambda a, b, c: F.multi_margin_loss(a, b, p=p, weight=c, reduction=reduction), x, extra=(t, w)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_margin_loss(dtype, reduction):
    torch.manual_seed(7)
    x = torch.randn(4, 5, dtype=dtype)
    t = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 1, 1, 1], [4, 4, 2, -1, 3]])
    fn = lambda a, b: F.multilabel_margin_loss(a, b, reduction=reduction)  # noqa: E731
    assert_same(*run_both(fn, x, t))
    assert_same(*run_both(lambda a, b: A.multilabel_margin_loss_forward(a, b, 0), x, t))
    assert_same(*run_both(fn, x[0], t[0]))
    if dtype == torch.float32:
        assert_same(*grads(fn, x, extra=(t,)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_batch_norm_with_update(dtype):
    torch.manual_seed(8)
    x = torch.randn(4, 3, 5, dtype=dtype)
    w, b = torch.randn(3, dtype=dtype), torch.randn(3, dtype=dtype)
    rm, rv = torch.randn(3, dtype=dtype), torch.rand(3, dtype=dtype) + 0.5
    rm_t, rv_t = rm.to("tpu"), rv.to("tpu")
    cpu = A._batch_norm_with_update(x, w, b, rm, rv, 0.2, 1e-5)
    tpu = A._batch_norm_with_update(*to_tpu([x, w, b]), rm_t, rv_t, 0.2, 1e-5)
    assert_same(tpu, cpu)
    assert_same(rm_t, rm)  # running stats updated in place
    assert_same(rv_t, rv)
    if dtype == torch.float32:
        fn = lambda a, c, d: A._batch_norm_with_update(a, c, d, rm.clone().to(a.device), rv.clone().to(a.device), 0.1, 1e-5)[0]  # noqa: E731
        assert_same(*grads(fn, x, w, b))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_bincount(dtype):
    x = torch.tensor([1, 3, 3, 0, 7, 1, 1], dtype=dtype)
    assert_same(*run_both(torch.bincount, x))
    assert_same(*run_both(lambda a: torch.bincount(a, minlength=10), x))
    for wd in (torch.float32, torch.float64, torch.float16):
        w = torch.linspace(0, 1, 7, dtype=wd)
        assert_same(*run_both(lambda a, b: torch.bincount(a, b), x, w))
    assert_same(*run_both(lambda a: torch.bincount(a, minlength=3), torch.tensor([], dtype=dtype)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_histogram(dtype):
    torch.manual_seed(9)
    x = torch.randn(5, 7, dtype=dtype)
    w = torch.rand(5, 7, dtype=dtype)
    assert_same(*run_both(lambda a: torch.histogram(a, 6), x))
    assert_same(*run_both(lambda a: torch.histogram(a, 4, range=(-1.0, 0.5), density=True), x))
    assert_same(*run_both(lambda a, b: torch.histogram(a, 5, weight=b), x, w))
    assert_same(*run_both(lambda a: torch.histogram(a, 3), torch.full((4,), 2.0, dtype=dtype)))
    edges = torch.tensor([-2.0, -0.5, 0.0, 0.3, 2.0], dtype=dtype)
    assert_same(*run_both(lambda a, e: torch.histogram(a, e, density=True), x, edges))
    # Values on the edges land where the CPU puts them (rightmost bin is closed).
    y = torch.linspace(0, 1, 11, dtype=dtype)
    assert_same(*run_both(lambda a: torch.histogram(a, 10), y))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_histogramdd(dtype):
    torch.manual_seed(10)
    x = torch.randn(20, 2, dtype=dtype)
    w = torch.rand(20, dtype=dtype)
    assert_same(*run_both(lambda a: torch.histogramdd(a, [3, 4]), x))
    assert_same(*run_both(lambda a, b: torch.histogramdd(a, [2, 3], range=[-1.0, 1.0, -2.0, 0.5], weight=b, density=True), x, w))
    bins = [torch.tensor([-1.0, 0.0, 1.0], dtype=dtype), torch.tensor([-3.0, -0.1, 0.2, 3.0], dtype=dtype)]
    assert_same(*run_both(lambda a, b0, b1: torch.histogramdd(a, [b0, b1]), x, *bins))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("concat", [False, True])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss(dtype, concat, zero_infinity):
    torch.manual_seed(11)
    lp = torch.randn(8, 4, 5, dtype=dtype).log_softmax(2)
    tg = torch.tensor([[1, 1, 2, 2, 1], [3, 3, 3, 4, 4], [1, 2, 1, 2, 1], [2, 2, 2, 2, 2]])
    il, tl = [8, 3, 0, 8], [4, 3, 2, 5]  # frames 1 and 2 cannot align: infinite loss
    if concat:
        tg = torch.cat([tg[i, : tl[i]] for i in range(4)])
    for reduction in REDUCTIONS:
        fn = lambda a, t: F.ctc_loss(a, t, il, tl, reduction=reduction, zero_infinity=zero_infinity)  # noqa: E731
        assert_same(*run_both(fn, lp, tg))
    if dtype == torch.float32 and zero_infinity:
        assert_same(*grads(lambda a, t: F.ctc_loss(a, t, il, tl, reduction="sum", zero_infinity=True), lp, extra=(tg,)))


def test_ctc_loss_blank_last_and_log_alpha():
    torch.manual_seed(12)
    lp = torch.randn(6, 3, 4).log_softmax(2)
    tg = torch.tensor([[0, 1, 2], [2, 2, 0], [1, 0, 1]])
    il, tl = [6, 6, 5], [3, 2, 0]
    cpu = A._ctc_loss(lp, tg, il, tl, 3, False)
    tpu = A._ctc_loss(lp.to("tpu"), tg.to("tpu"), il, tl, 3, False)
    assert_same(tpu[0], cpu[0])
    # log_alpha: compare the entries the CPU kernel writes (t < il, s <= 2L).
    for b in range(3):
        assert_same(tpu[1][b, : il[b], : 2 * tl[b] + 1], cpu[1][b, : il[b], : 2 * tl[b] + 1])
