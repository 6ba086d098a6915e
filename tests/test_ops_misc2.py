"""More assorted ops on tpu against the CPU: index_reduce, nonzero_static,
put_, angle, channel_shuffle, logcumsumexp, histc, gcd/lcm, frexp,
segment_reduce."""
import copy

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


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_index_reduce(reduce, include_self, dtype):
    x = sample(dtype, 5, 3)
    src = sample(dtype, 4, 3, seed=1)
    idx = torch.tensor([0, 2, 0, 4])
    tpu, cpu = run_both(lambda a, i, s: a.index_reduce(0, i, s, reduce, include_self=include_self), x, idx, src)
    assert_same(tpu, cpu)
    tpu, cpu = run_both(lambda a, i, s: a.index_reduce(1, i, s, reduce, include_self=include_self),
                        x.t().contiguous(), idx, src.t().contiguous())
    assert_same(tpu, cpu)


@pytest.mark.parametrize("size,fill", [(0, -1), (3, -1), (12, 7)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_nonzero_static(size, fill, dtype):
    x = sample(dtype, 3, 4)
    if dtype != torch.bool:
        x[0, 1] = 0
    tpu, cpu = run_both(lambda a: torch.nonzero_static(a, size=size, fill_value=fill), x)
    assert_same(tpu, cpu)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_put(accumulate, dtype):
    x = sample(dtype, 3, 4)
    idx = torch.tensor([[0, -1], [5, 5]]) if accumulate else torch.tensor([[0, -1], [5, 7]])
    src = sample(dtype, 2, 2, seed=1)
    tpu, cpu = run_both(lambda a, i, s: a.clone().put_(i, s, accumulate=accumulate), x, idx, src)
    assert_same(tpu, cpu)
    tpu, cpu = run_both(lambda a, i, s: torch.put(a, i, s, accumulate), x, idx, src)
    assert_same(tpu, cpu)


def test_put_out_of_range():
    x = torch.zeros(4, device="tpu")
    with pytest.raises(IndexError):
        x.put_(torch.tensor([4], device="tpu"), torch.ones(1, device="tpu"))
        x.cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32, torch.bool])
def test_angle(dtype):
    x = sample(dtype, 4, 5)
    if dtype.is_floating_point:
        x[0, 0] = float("nan")
        x[0, 1] = -float("inf")
        x[0, 2] = 0.0
    tpu, cpu = run_both(torch.angle, x)
    assert_same(tpu, cpu)


@pytest.mark.parametrize("groups", [1, 2, 3])
def test_channel_shuffle(groups):
    x = sample(torch.float32, 2, 6, 3, 2)
    tpu, cpu = run_both(lambda a: torch.nn.functional.channel_shuffle(a, groups), x)
    assert_same(tpu, cpu)
    tpu, cpu = run_both(lambda a: torch.native_channel_shuffle(a, groups), x)
    assert_same(tpu, cpu)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_logcumsumexp(dtype, dim):
    x = sample(dtype, 4, 6) * 10
    x[1, 2] = -float("inf")
    x[2, :] = -float("inf")
    x[3, 1] = float("inf")
    x[0, 4] = float("nan")
    tpu, cpu = run_both(lambda a: torch.logcumsumexp(a, dim), x)
    assert_same(tpu, cpu)


def test_logcumsumexp_long_and_grad():
    x = torch.randn(3, 200, dtype=torch.float64) * 30
    tpu, cpu = run_both(lambda a: torch.logcumsumexp(a, 1), x)
    assert_same(tpu, cpu)
    x = torch.randn(5, 5)
    g = torch.randn(5, 5)
    xc = x.clone().requires_grad_()
    (gc,) = torch.autograd.grad(torch.logcumsumexp(xc, 0), xc, g)
    xt = x.to("tpu").requires_grad_()
    (gt,) = torch.autograd.grad(torch.logcumsumexp(xt, 0), xt, g.to("tpu"))
    assert_same(gt, gc, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("bins,lo,hi", [(10, 0, 0), (7, -1.0, 1.5), (1, 0, 10), (5, 2, 2)])
def test_histc(dtype, bins, lo, hi):
    x = sample(dtype, 40)
    x[0] = 1.5
    x[1] = -1.0
    tpu, cpu = run_both(lambda a: torch.histc(a, bins=bins, min=lo, max=hi), x)
    assert_same(tpu, cpu)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_gcd_lcm(dtype):
    g = torch.Generator().manual_seed(0)
    lo = 0 if dtype == torch.uint8 else -60
    a = torch.randint(lo, 60, (30,), generator=g).to(dtype)
    b = torch.randint(lo, 60, (30,), generator=g).to(dtype)
    a[0] = 0
    b[0] = 0
    a[1] = 0
    tpu, cpu = run_both(torch.gcd, a, b)
    assert_same(tpu, cpu)
    tpu, cpu = run_both(torch.lcm, a % 16, b % 16)
    assert_same(tpu, cpu)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_frexp(dtype):
    x = sample(dtype, 5, 4) * 1000
    x[0, 0] = 0.0
    x[0, 1] = -0.0
    x[0, 2] = 1.0
    x[0, 3] = 0.5
    x[1, 0] = -4.0
    tpu, cpu = run_both(torch.frexp, x)
    assert_same(tpu, cpu)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("initial", [None, 2.0])
def test_segment_reduce(reduce, initial):
    data = sample(torch.float32, 6, 3)
    lengths = torch.tensor([0, 2, 3, 1])
    tpu, cpu = run_both(lambda d, l: torch.segment_reduce(d, reduce, lengths=l, initial=initial), data, lengths)
    assert_same(tpu, cpu)
    offsets = torch.tensor([0, 0, 2, 5, 6])
    tpu, cpu = run_both(lambda d, o: torch.segment_reduce(d, reduce, offsets=o, initial=initial), data, offsets)
    assert_same(tpu, cpu)
    data2 = sample(torch.float32, 2, 5)
    lengths2 = torch.tensor([[1, 0, 4], [2, 2, 1]])
    tpu, cpu = run_both(lambda d, l: torch.segment_reduce(d, reduce, lengths=l, axis=1, initial=initial),
                        data2, lengths2)
    assert_same(tpu, cpu)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("include_last_offset", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_embedding_bag(mode, include_last_offset, dtype):
    w = sample(dtype, 10, 4)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = torch.tensor([0, 2, 2, 5, 8]) if include_last_offset else torch.tensor([0, 2, 2, 5])
    psw = sample(dtype, 8, seed=2) if mode == "sum" else None
    f = lambda w, i, o: torch.nn.functional.embedding_bag(
        i, w, o, mode=mode, include_last_offset=include_last_offset, per_sample_weights=psw if psw is None else psw.to(w.device))
    tpu, cpu = run_both(f, w, idx, offsets)
    assert_same(tpu, cpu)
    g = lambda w, i: torch.nn.functional.embedding_bag(i, w, mode=mode, padding_idx=4)
    tpu, cpu = run_both(g, w, idx.view(2, 4))
    assert_same(tpu, cpu)


# The CPU refuses max with scale_grad_by_freq, and per_sample_weights
# outside mode="sum", so those pairs are not cases.
EMBEDDING_BAG_GRAD_CASES = [
    (mode, case)
    for mode in ["sum", "mean", "max"]
    for case in ["offsets", "include_last_offset", "padding_idx", "2d", "scale_grad_by_freq", "per_sample_weights"]
    if not (case == "scale_grad_by_freq" and mode == "max") and not (case == "per_sample_weights" and mode != "sum")
]


@pytest.mark.parametrize("mode,case", EMBEDDING_BAG_GRAD_CASES)
def test_embedding_bag_grad(mode, case):
    """The gradients of nn.EmbeddingBag: the weight's (and per_sample_weights')."""
    w = sample(torch.float32, 10, 4)
    idx = torch.tensor([1, 2, 4, 4, 3, 9, 1, 1])
    offsets = torch.tensor([0, 2, 2, 5, 8]) if case == "include_last_offset" else torch.tensor([0, 2, 2, 5])
    psw = sample(torch.float32, 8, seed=2) if case == "per_sample_weights" else None

    def run(w, idx, offsets, psw):
        w = w.clone().requires_grad_()
        psw = psw.clone().requires_grad_() if psw is not None else None
        kwargs = dict(mode=mode, per_sample_weights=psw, include_last_offset=case == "include_last_offset",
                      scale_grad_by_freq=case == "scale_grad_by_freq",
                      padding_idx=4 if case == "padding_idx" else None)
        if case == "2d":
            y = torch.nn.functional.embedding_bag(idx.view(2, 4), w, **kwargs)
        else:
            y = torch.nn.functional.embedding_bag(idx, w, offsets, **kwargs)
        weights = torch.arange(y.numel(), dtype=y.dtype, device=y.device).view(y.shape)
        (y * weights).sum().backward()  # distinct per-output gradients
        return (y, w.grad) if psw is None else (y, w.grad, psw.grad)

    tpu, cpu = run_both(run, w, idx, offsets, psw)
    assert_same(tpu, cpu)


def test_embedding_bag_module_trains():
    torch.manual_seed(0)
    cpu_model = torch.nn.EmbeddingBag(20, 6, mode="mean")
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    idx, offsets = torch.randint(0, 20, (12,)), torch.tensor([0, 3, 7])
    losses = {}
    for name, model in (("cpu", cpu_model), ("tpu", tpu_model)):
        dev = next(model.parameters()).device
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        losses[name] = []
        for _ in range(3):
            loss = model(idx.to(dev), offsets.to(dev)).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[name].append(loss.item())
    assert losses["tpu"] == pytest.approx(losses["cpu"], rel=1e-5)


def test_embedding_bag_per_sample_weights_only_in_sum_mode():
    w, idx, offsets = torch.randn(5, 2), torch.tensor([0, 1, 2]), torch.tensor([0, 2])
    psw = torch.ones(3)
    for dev in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="per_sample_weights only supported with mode='sum'"):
            torch.ops.aten._embedding_bag(w.to(dev), idx.to(dev), offsets.to(dev), False, 1, False, psw.to(dev))[0].cpu()


def test_embedding_bag_sparse_gradients_are_refused_with_a_hint():
    bag = torch.nn.EmbeddingBag(10, 3, sparse=True).to("tpu")
    idx = torch.tensor([[1, 2], [3, 4]], device="tpu")
    with pytest.raises(NotImplementedError, match=r"sparse=False"):
        bag(idx).sum().backward()
    dense = torch.nn.EmbeddingBag(10, 3).to("tpu")
    dense.load_state_dict(bag.state_dict())
    dense(idx).sum().backward()
    assert dense.weight.grad.cpu()[[1, 2, 3, 4]].eq(0.5).all()  # mode="mean" over bags of 2


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce_grad(reduce):
    data = sample(torch.float32, 6, 3)
    lengths = torch.tensor([0, 2, 3, 1])
    g = sample(torch.float32, 4, 3, seed=3)
    dc = data.clone().requires_grad_()
    (gc,) = torch.autograd.grad(torch.segment_reduce(dc, reduce, lengths=lengths, initial=1.0), dc, g)
    dt = data.to("tpu").requires_grad_()
    out = torch.segment_reduce(dt, reduce, lengths=lengths.to("tpu"), initial=1.0)
    (gt,) = torch.autograd.grad(out, dt, g.to("tpu"))
    assert_same(gt, gc, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_gcd_lcm_of_converted_inputs(mode):
    # Euclid's steps run in a loop: unrolled 93 times, a gcd fed by a dtype
    # conversion in the same fused graph compiled for minutes (a hang).
    import torch_tpu_rs
    torch_tpu_rs.set_eager_mode(mode)
    a = torch.tensor([4, -7, 6, 0, 2**40, -12])
    b = torch.tensor([-5, 3, 9, 0, 2**20, 18])
    for conv in (torch.Tensor.int, torch.Tensor.long, lambda t: t.to(torch.int16)):
        f = lambda x, y: (torch.gcd(conv(x), conv(y)), torch.lcm(conv(x) % 100, conv(y) % 100))  # noqa: E731
        assert_same(*run_both(f, a, b))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_frexp_subnormals_and_specials(dtype):
    # Read from the bits: the plugin's float arithmetic treats subnormal
    # operands as zero, and frexp(1e-310) came out as (nan, INT_MIN).
    vals = [1e-310, 5e-324, -2.2250738585072014e-308, 1e-40, 1.4e-45, -7e-39, 6e-8, 1e-5,
            0.0, -0.0, 0.75, 1e300, float("inf"), float("-inf"), float("nan")]
    x = torch.tensor(vals, dtype=torch.float64).to(dtype)
    assert_same(*run_both(torch.frexp, x))


@pytest.mark.parametrize("padding_idx", [None, 1])
def test_embedding_bag_max_with_nan_follows_the_cpu_walk(padding_idx):
    # The CPU's first row sets a bag's maximum and later rows replace it only
    # when strictly greater: a NaN first row gives NaN, a later NaN is
    # skipped (tpu used to skip every NaN). max_indices follow suit.
    nan, inf = float("nan"), float("inf")
    w = torch.tensor([[1.0, nan], [2.0, 3.0], [nan, 0.5], [4.0, -1.0], [-inf, nan], [nan, nan]])
    idx = torch.tensor([0, 1, 2, 1, 3, 3, 4, 5, 5, 4, 1, 0])
    off = torch.tensor([0, 2, 4, 6, 8, 10])
    pad = -1 if padding_idx is None else padding_idx
    f = lambda w, i, o: torch.ops.aten._embedding_bag(w, i, o, False, 2, False, None, False, pad)  # noqa: E731
    t, c = run_both(f, w, idx, off)
    assert_same(t[0], c[0])
    assert_same(t[3], c[3])  # max_indices
