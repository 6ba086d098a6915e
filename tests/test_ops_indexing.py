"""Indexing ops on tpu against the CPU: index_select, advanced indexing
(x[i, j], x[:, i] = v, accumulate), bool-mask assignment, gather, scatter
(src/value/reduce), scatter_add, scatter_reduce, index_add/copy/fill, take,
masked_scatter, embedding (forward and backward); negative indices, out=,
non-contiguous inputs, gradients, and out-of-range errors."""
import pytest
import torch

import torch_tpu_rs
from conftest import assert_same, run_both

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32, torch.bool]
# The heavier tests run over fewer dtypes (the lowering is dtype-generic).
FEW = [torch.float32, torch.bfloat16, torch.int64, torch.bool]


def make(*shape, dtype=torch.float32):
    if dtype == torch.bool:
        return torch.randn(*shape) > 0
    if dtype.is_floating_point:
        return torch.randn(*shape).to(dtype)
    return torch.randint(-50, 50, shape, dtype=dtype)


def idx(*v, dtype=torch.int64):
    return torch.tensor(v, dtype=dtype)


def raises_index_error(fn, kind=IndexError):
    """The op raises IndexError at once or at the next sync (.cpu()); or,
    where the CPU raises RuntimeError (gather, scatter, index_add), that."""
    with pytest.raises(kind, match="out of range|out of bounds") as raised:
        r = fn()
        (r if isinstance(r, torch.Tensor) else r[0]).cpu()
    assert type(raised.value) is kind, f"raised {type(raised.value).__name__}, expected {kind.__name__}"
    torch_tpu_rs.synchronize() if hasattr(torch_tpu_rs, "synchronize") else None


# ------------------------------------------------------------------ index_select / take

@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select(dtype):
    x = make(5, 4, 3, dtype=dtype)
    for dim, i in [(0, idx(4, 0, 0, 2)), (1, idx(3, 1)), (2, idx(2)), (-1, idx(0, 2, 1, 0)), (0, idx(1, dtype=torch.int32))]:
        assert_same(*run_both(lambda x, i: x.index_select(dim, i), x, i))
    assert_same(*run_both(lambda x, i: x.transpose(0, 2).index_select(1, i), x, idx(3, 0)))
    assert_same(*run_both(lambda x, i: x.index_select(0, i), x, torch.tensor(3)))
    assert_same(*run_both(lambda x, i: x.index_select(1, i), x, idx()))


def test_index_select_out_and_errors():
    x = torch.randn(5, 3)

    def f(x, i):
        o = torch.empty(0, device=x.device)
        torch.index_select(x, 0, i, out=o)
        return o

    assert_same(*run_both(f, x, idx(1, 4)))
    xt = x.to("tpu")
    raises_index_error(lambda: xt.index_select(0, idx(5).to("tpu")))
    raises_index_error(lambda: xt.index_select(0, idx(-1).to("tpu")))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_take(dtype):
    x = make(4, 5, dtype=dtype)
    assert_same(*run_both(torch.take, x, idx(0, 19, -1, -20, 7)))
    assert_same(*run_both(lambda x, i: torch.take(x.t(), i), x, torch.tensor([[1, 2], [3, 4]])))
    raises_index_error(lambda: torch.take(x.to("tpu"), idx(20).to("tpu")))


def test_embedding_forward_backward():
    w = torch.randn(10, 4)
    i = torch.tensor([[1, 2, 1], [9, 0, 1]])
    assert_same(*run_both(torch.nn.functional.embedding, i, w))

    for kw in [{}, dict(padding_idx=1), dict(scale_grad_by_freq=True), dict(padding_idx=0, scale_grad_by_freq=True)]:
        def f(i, w):
            w = w.clone().requires_grad_()
            y = torch.nn.functional.embedding(i, w, **kw)
            y.backward(torch.arange(24.0, device=w.device).reshape(2, 3, 4))
            return w.grad

        assert_same(*run_both(f, i, w))
    raises_index_error(lambda: torch.nn.functional.embedding(idx(10).to("tpu"), w.to("tpu")))


# ------------------------------------------------------------------ advanced indexing

@pytest.mark.parametrize("dtype", FEW)
def test_advanced_index_get(dtype):
    x = make(4, 5, 6, dtype=dtype)
    i, j = idx(3, 0, -1), idx(1, 4, -5)
    cases = [
        lambda x, i, j: x[i],
        lambda x, i, j: x[:, j],
        lambda x, i, j: x[i, j],
        lambda x, i, j: x[:, i, j],
        lambda x, i, j: x[i, :, j],  # non-adjacent: result dims go first
        lambda x, i, j: x[i[:, None], j[None, :]],  # broadcast 3x1 with 1x3
        lambda x, i, j: x[1:, i],
        lambda x, i, j: x[..., j],
        lambda x, i, j: x.transpose(0, 2)[j, :, i[:2, None]],
        lambda x, i, j: x[i.int(), j],
        lambda x, i, j: x[torch.tensor(2, device=x.device), j],
    ]
    for fn in cases:
        assert_same(*run_both(fn, x, i, j))


def test_advanced_index_out_of_range_and_bool():
    x = torch.randn(4, 5).to("tpu")
    raises_index_error(lambda: x[idx(4).to("tpu")])
    raises_index_error(lambda: x[:, idx(-6).to("tpu")])
    with pytest.raises(IndexError):
        x[idx(0, 1).to("tpu"), idx(0, 1, 2).to("tpu")]
    # A mask of the wrong shape: the CPU's IndexError and message.
    with pytest.raises(IndexError, match=r"The shape of the mask \[5\] at index 0 does not match"):
        x[torch.ones(5, dtype=torch.bool, device="tpu")]
    # Two masks at once (with equal counts, else PyTorch's own shape check
    # raises first) are not supported: a clear error, and the device still works.
    m1 = torch.tensor([True, False, True, False], device="tpu")
    m2 = torch.tensor([False, True, True, False, False], device="tpu")
    with pytest.raises(NotImplementedError, match="2 boolean masks"):
        torch.ops.aten.index.Tensor(x, [m1, m2])
    assert_same(x + 1, x.cpu() + 1)


MASK_CASES = {
    "x[m]": lambda x, m: x[m],
    "x[m[:, :, 0]]": lambda x, m: x[m[:, :, 0]],
    "x[:, m[0]]": lambda x, m: x[:, m[0]],
    "x[m[:, 0, 0], 2]": lambda x, m: x[m[:, 0, 0], 2],
    "x[idx, m[0, :, 0]]": lambda x, m: x[torch.tensor([2, 0], device=x.device).view(2, 1), m[0, :, 0]],
    "x[none]": lambda x, m: x[m[:, 0, 0] & False],
    "x[m] * 2 + 1": lambda x, m: x[m] * 2 + 1,
}


@pytest.mark.parametrize("mode", ["strict", "debug", "fused"])
@pytest.mark.parametrize("case", list(MASK_CASES))
def test_bool_mask_getitem(case, mode):
    # x[mask] reads the mask's count back first (a host sync, as on CUDA).
    x = make(3, 4, 5)
    mask = x > 0
    previous = torch_tpu_rs.get_eager_mode()
    torch_tpu_rs.set_eager_mode(mode)
    try:
        syncs = torch_tpu_rs.metrics()["host_sync_sources"]
        got = MASK_CASES[case](x.to("tpu"), mask.to("tpu"))
        got.cpu()
        after = torch_tpu_rs.metrics()["host_sync_sources"]
    finally:
        torch_tpu_rs.set_eager_mode(previous)
    assert_same(got, MASK_CASES[case](x, mask))
    source = "data-dependent output size (nonzero, masked_select, x[mask])"
    assert after.get(source, 0) > syncs.get(source, 0)


def test_bool_mask_getitem_backward():
    x = make(3, 4, 5)
    mask = x > 0.5
    xt = x.to("tpu").requires_grad_()
    xc = x.clone().requires_grad_()
    (xt[mask.to("tpu")] ** 2).sum().backward()
    (xc[mask] ** 2).sum().backward()
    assert_same(xt.grad, xc.grad)


def test_bool_mask_getitem_with_cpu_fallback():
    x = torch.randn(4, 5)
    torch_tpu_rs._C.set_cpu_fallback(True)
    try:
        tpu = x.to("tpu")[x.to("tpu") > 0]
    finally:
        torch_tpu_rs._C.set_cpu_fallback(False)
    assert_same(tpu, x[x > 0])


@pytest.mark.parametrize("dtype", FEW)
def test_index_put(dtype):
    x = make(4, 5, 3, dtype=dtype)
    v = make(2, 3, dtype=dtype)

    def put(x, i, v, acc=False, key=None):
        x = x.clone()
        return torch.ops.aten.index_put_(x, key(i), v, acc)

    i = idx(3, -4)
    assert_same(*run_both(lambda x, i, v: put(x, i, v, key=lambda i: [i]), x, i, v[:, None, :]))
    assert_same(*run_both(lambda x, i, v: put(x, i, v, key=lambda i: [None, i + 1]), x, i, v[None]))
    assert_same(*run_both(lambda x, i, v: put(x, i, v, key=lambda i: [i, None, i.abs() - 2]), x, i, v[:, :1]))
    assert_same(*run_both(lambda x, i, v: put(x, i, v[0, 0], key=lambda i: [i, i]), x, i, v))
    assert_same(*run_both(lambda x, i, v: put(x.transpose(0, 1), i, v[0], key=lambda i: [None, i]), x, i, v))
    if dtype != torch.bool:
        d = idx(1, 1, 2, 1)
        assert_same(*run_both(lambda x, i, v: put(x, i, v, True, key=lambda i: [i]), x, d, make(4, 5, 3, dtype=dtype)),
                    rtol=0.02, atol=0.1)
        assert_same(*run_both(lambda x, i, v: put(x, i, v, True, key=lambda i: [None, i, i - 1]), x, d, make(4, 4, dtype=dtype)),
                    rtol=0.02, atol=0.1)


def test_index_put_errors():
    x = torch.randn(4, 5).to("tpu")
    raises_index_error(lambda: x.clone().index_put_((idx(4).to("tpu"),), torch.ones(5).to("tpu")))
    with pytest.raises(RuntimeError, match="dtypes match"):
        x.clone().index_put_((idx(1).to("tpu"),), torch.ones(5, dtype=torch.float64).to("tpu"))
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x.clone().index_put_((idx(1, 2).to("tpu"),), torch.ones(3, 5).to("tpu"))


def test_setitem_forms():
    x = torch.randn(6, 4)

    def f(x):
        x = x.clone()
        i = torch.tensor([0, 5, 2], device=x.device)
        x[i] = 1.5  # index_fill_
        x[i, 1] = torch.tensor([7.0, 8.0, 9.0], device=x.device)
        x[:, torch.tensor([3], device=x.device)] += 10
        x[1:3][:, torch.tensor([0, 1], device=x.device)] = -1
        return x

    assert_same(*run_both(f, x))


def test_mask_setitem():
    x = torch.randn(4, 5)

    def f(x):
        x = x.clone()
        m = x > 0.3
        x[m] = torch.arange(float(int((x.cpu() > 0.3).sum())), device=x.device)
        x[x < -1] = 0.5
        rows = torch.tensor([True, False, True, False], device=x.device)
        x[rows] = torch.ones(5, device=x.device) * 3
        x[:, torch.tensor([False, True, False, True, False], device=x.device)] = torch.tensor([[-2.0], [-3.0], [-4.0], [-5.0]], device=x.device)
        x.index_put_((rows,), torch.ones(2, 5, device=x.device), accumulate=True)
        return x

    assert_same(*run_both(f, x))
    xt = x.to("tpu")
    with pytest.raises(IndexError, match="mask"):
        xt[torch.tensor([True, False]).to("tpu")] = 1.0
    with pytest.raises(Exception, match="shape mismatch"):
        xt.clone().index_put_((torch.tensor([True, False, True, True]).to("tpu"),), torch.ones(2, 5).to("tpu")).cpu()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_masked_scatter(dtype):
    x, m, s = make(3, 4, dtype=dtype), torch.randn(3, 4) > 0, make(20, dtype=dtype)
    assert_same(*run_both(lambda x, m, s: x.masked_scatter(m, s), x, m, s))
    assert_same(*run_both(lambda x, m, s: x.clone().masked_scatter_(m[0], s.reshape(4, 5)), x, m, s))
    with pytest.raises(Exception, match="source"):
        x.to("tpu").masked_scatter(torch.ones(3, 4, dtype=torch.bool).to("tpu"), s[:3].to("tpu")).cpu()


def test_index_backward():
    x = torch.randn(5, 4)

    def f(x):
        x = x.clone().requires_grad_()
        i = torch.tensor([0, 3, 0, -1], device=x.device)
        y = x[i, 1:]
        y.backward(torch.arange(12.0, device=x.device).reshape(4, 3))
        z = x.index_select(0, torch.tensor([1, 1], device=x.device))
        z.backward(torch.ones(2, 4, device=x.device))
        return x.grad

    assert_same(*run_both(f, x))


# ------------------------------------------------------------------ gather / scatter

@pytest.mark.parametrize("dtype", DTYPES)
def test_gather(dtype):
    x = make(4, 5, dtype=dtype)
    i = torch.randint(0, 5, (4, 3))
    assert_same(*run_both(lambda x, i: x.gather(1, i), x, i))
    assert_same(*run_both(lambda x, i: x.gather(0, i), x, torch.randint(0, 4, (2, 5))))
    assert_same(*run_both(lambda x, i: x.t().gather(0, i.t()), x, i))
    assert_same(*run_both(lambda x, i: torch.take_along_dim(x, i, 1), x, i))
    assert_same(*run_both(lambda x, i: x.gather(1, i), x, torch.zeros(4, 0, dtype=torch.long)))


def test_gather_errors_and_backward():
    x = torch.randn(4, 5)
    raises_index_error(lambda: x.to("tpu").gather(1, torch.tensor([[5]]).to("tpu")), RuntimeError)
    raises_index_error(lambda: x.to("tpu").gather(1, torch.tensor([[-1]]).to("tpu")), RuntimeError)
    with pytest.raises(RuntimeError):
        x.to("tpu").gather(1, torch.tensor([0, 1]).to("tpu"))

    def f(x):
        x = x.clone().requires_grad_()
        i = torch.tensor([[0, 0, 4], [1, 2, 2], [3, 3, 3], [4, 0, 1]], device=x.device)
        y = x.gather(1, i)
        y.backward(torch.arange(12.0, device=x.device).reshape(4, 3))
        return x.grad

    assert_same(*run_both(f, x))


def unique_index(shape, n, dim):
    """Index with distinct positions along dim (scatter without collisions)."""
    cols = [torch.randperm(n)[: shape[dim]] for _ in range(shape[1 - dim])]
    i = torch.stack(cols, dim=1 - dim)
    return i


@pytest.mark.parametrize("dtype", FEW)
def test_scatter(dtype):
    x = make(4, 5, dtype=dtype)
    i = unique_index((4, 3), 5, 1)
    src = make(4, 4, dtype=dtype)
    assert_same(*run_both(lambda x, i, s: x.scatter(1, i, s), x, i, src))
    assert_same(*run_both(lambda x, i: x.scatter(1, i, 1), x, i))
    assert_same(*run_both(lambda x, i, s: x.t().scatter(0, i.t(), s), x, i, src))
    if dtype != torch.bool:
        dup = torch.randint(0, 5, (4, 6))
        big = make(4, 6, dtype=dtype)
        tol = dict(rtol=0.02, atol=0.1)
        assert_same(*run_both(lambda x, i, s: x.scatter_add(1, i, s), x, dup, big), **tol)
        assert_same(*run_both(lambda x, i, s: x.scatter(1, i, s, reduce="add"), x, dup, big), **tol)
        assert_same(*run_both(lambda x, i: x.scatter(1, i, 2, reduce="multiply"), x, dup), **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(dtype, reduce, include_self):
    x = make(3, 6, dtype=dtype)
    i = torch.randint(0, 6, (3, 5))
    s = make(3, 5, dtype=dtype)
    assert_same(*run_both(lambda x, i, s: x.scatter_reduce(1, i, s, reduce, include_self=include_self), x, i, s),
                rtol=1e-5, atol=1e-5)


def test_scatter_inplace_out_errors_backward():
    x, i, s = torch.randn(3, 4), torch.tensor([[0, 3], [1, 2], [2, 0]]), torch.randn(3, 2)

    def f(x, i, s):
        x = x.clone()
        x.scatter_(1, i, s)
        x.scatter_add_(0, i[:2, :1], s[:2, :1])
        o = torch.empty(0, device=x.device)
        torch.scatter(x, 1, i, 0.5, out=o)
        return x, o

    assert_same(*run_both(f, x, i, s))
    raises_index_error(lambda: x.to("tpu").scatter(1, torch.tensor([[4]]).to("tpu"), 1.0), RuntimeError)

    def g(x, i, s):
        x, s = x.clone().requires_grad_(), s.clone().requires_grad_()
        y = x.scatter(1, i, s)
        y.backward(torch.arange(12.0, device=x.device).reshape(3, 4))
        return x.grad, s.grad

    assert_same(*run_both(g, x, i, s))


# ------------------------------------------------------------------ index_add / copy / fill

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32])
def test_index_add_copy_fill(dtype):
    x = make(5, 4, dtype=dtype)
    src = make(3, 4, dtype=dtype)
    tol = dict(rtol=0.02, atol=0.1)
    assert_same(*run_both(lambda x, i, s: x.index_add(0, i, s), x, idx(1, 1, 4), src), **tol)
    assert_same(*run_both(lambda x, i, s: x.index_add(0, i, s, alpha=2), x, idx(0, 2, 2), src), **tol)
    assert_same(*run_both(lambda x, i, s: x.index_add(1, i, s), x, idx(3, 0), make(5, 2, dtype=dtype)), **tol)
    assert_same(*run_both(lambda x, i, s: x.t().index_add(0, i, s.t()), x, idx(3, 0), make(5, 2, dtype=dtype)), **tol)
    assert_same(*run_both(lambda x, i, s: x.index_copy(0, i, s), x, idx(4, 0, 2), src))
    assert_same(*run_both(lambda x, i: x.index_fill(1, i, -3), x, idx(0, -1)))
    assert_same(*run_both(lambda x, i: x.t().index_fill(0, i, 7), x, idx(2)))


def test_index_add_copy_fill_inplace_and_errors():
    x, s = torch.randn(5, 4), torch.randn(2, 4)

    def f(x, s):
        x = x.clone()
        x.index_add_(0, torch.tensor([1, 1], device=x.device), s)
        x.index_copy_(0, torch.tensor([3, 0], device=x.device), s)
        x.index_fill_(1, torch.tensor([2], device=x.device), torch.tensor(9.0, device=x.device))
        return x

    assert_same(*run_both(f, x, s))
    xt, st = x.to("tpu"), s.to("tpu")
    raises_index_error(lambda: xt.index_add(0, idx(5, 0).to("tpu"), st), RuntimeError)
    raises_index_error(lambda: xt.index_copy(0, idx(-1, 0).to("tpu"), st))
    raises_index_error(lambda: xt.index_fill(0, idx(5).to("tpu"), 1.0))
    with pytest.raises(RuntimeError):
        xt.index_add(0, idx(0).to("tpu"), st)


@pytest.mark.parametrize(
    "case",
    [
        ("1-D", (5,), 0, {}),
        ("2-D dim 0", (5, 3), 0, {}),
        ("2-D dim 0, alpha 1.0", (5, 3), 0, {"alpha": 1.0}),
        ("2-D dim 0, alpha 2", (5, 3), 0, {"alpha": 2}),
        ("2-D last dim", (3, 5), 1, {}),
        ("3-D middle dim", (3, 5, 2), 1, {}),
        ("3-D last dim, alpha 0.5", (3, 2, 5), 2, {"alpha": 0.5}),
        ("2-D dim 0, int32 index", (5, 3), 0, {"index_dtype": torch.int32}),
    ],
    ids=lambda c: c[0],
)
def test_index_add_out_of_range_raises_what_the_cpu_raises(case):
    # The CPU's scatter_add shortcut (rank > 1, dim 0 or last, int64 index,
    # alpha 1) raises RuntimeError; its slice loop raises IndexError.
    _, shape, dim, kw = case
    index_dtype = kw.pop("index_dtype", torch.int64)
    src_shape = list(shape)
    src_shape[dim] = 2
    x, s, i = torch.zeros(shape), torch.ones(src_shape), torch.tensor([1, 5], dtype=index_dtype)
    with pytest.raises((IndexError, RuntimeError)) as on_cpu:
        x.index_add(dim, i, s, **kw)
    xt, st, it = x.to("tpu"), s.to("tpu"), i.to("tpu")
    raises_index_error(lambda: xt.index_add(dim, it, st, **kw), type(on_cpu.value))
    assert_same(*run_both(lambda x, i, s: x.index_add(dim, i, s, **kw), x, i.clamp(max=shape[dim] - 1), s))


@pytest.mark.parametrize("alpha", [1, 1 + 0j, 1 + 1j, 2j])
def test_index_add_out_of_range_with_a_complex_alpha(alpha):
    x, s, i = torch.zeros(5, 3, dtype=torch.cfloat), torch.ones(1, 3, dtype=torch.cfloat), torch.tensor([7])
    with pytest.raises((IndexError, RuntimeError)) as on_cpu:
        x.index_add(0, i, s, alpha=alpha)
    xt, st, it = x.to("tpu"), s.to("tpu"), i.to("tpu")
    raises_index_error(lambda: xt.index_add(0, it, st, alpha=alpha), type(on_cpu.value))


def test_index_select_of_a_zero_dim_source_is_zero_dim():
    for idx in [torch.tensor([0]), torch.tensor(0)]:
        assert_same(*run_both(lambda x, i: torch.index_select(x, 0, i), torch.tensor(3.0), idx))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_writes_through_expanded_views_keep_every_write(mode):
    # Each storage element of a stride-0 view takes the value written to it
    # (a plain scatter let the last row win, so index_put_ lost its writes).
    import warnings
    torch_tpu_rs.set_eager_mode(mode)

    def run(d):
        out = []
        c = torch.zeros(3, device=d)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "index_put_ on expanded tensors is deprecated"
            c.expand(2, 3).index_put_((torch.tensor([0, 1], device=d), torch.tensor([0, 2], device=d)),
                                      torch.tensor([1.0, 2.0], device=d))
            out.append(c)
            a = torch.zeros(1, 3, device=d)
            a.expand(2, 3)[torch.tensor([0]), torch.tensor([1])] = 5.0
            out.append(a)
            a = torch.zeros(1, 3, device=d)
            a.expand(4, 2, 3)[torch.tensor([3]), torch.tensor([1]), torch.tensor([2])] = 7.0
            out.append(a)
            n = torch.full((3,), float("nan"), device=d)
            n.expand(2, 3)[torch.tensor([1]), torch.tensor([0])] = 1.0
            out.append(n)
            e = torch.zeros(2, 1, dtype=torch.int64, device=d)
            e.expand(2, 4)[:, 2] = torch.tensor([5, 6], device=d)
            out.append(e)
        return out

    assert_same(run("tpu"), run("cpu"))


def test_index_put_takes_a_cpu_zero_dim_value(mode):
    # ATen moves a 0-dim CPU value to the device, so CUDA accepts these.
    def run(dev):
        t = torch.arange(6.0).to(dev)
        t[t > 2] = torch.tensor(-1.0)
        u = torch.arange(6.0).to(dev)
        u[torch.tensor([0, 1]).to(dev)] = torch.tensor(9.0)
        w = torch.zeros(4).to(dev)
        w.index_put_((torch.tensor([1, 1]).to(dev),), torch.tensor(2.0), accumulate=True)
        return t, u, w

    assert_same(run("tpu"), run("cpu"))
    # The dtype rule stays: an index_put of another dtype raises as on the CPU.
    with pytest.raises(RuntimeError, match="dtypes match"):
        torch.zeros(3, device="tpu")[torch.tensor([0], device="tpu")] = torch.tensor(1, dtype=torch.float64)
