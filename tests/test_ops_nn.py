"""nn ops on tpu against the CPU, forward and backward: softmax/log_softmax,
cross_entropy/nll_loss, mse_loss, layer_norm, rms_norm, batch_norm,
embedding backward, dropout (statistically)."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same, run_both

FLOATS = [torch.float32, torch.float64, torch.bfloat16]


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def grads(fn, *tensors, needs=None):
    """fn's output and the gradients of a fixed random projection of it with
    respect to the tensors (all of them unless `needs` says which)."""

    def run(*ts):
        ts = [t.clone().requires_grad_(needs is None or needs[i]) if t.is_floating_point() else t
              for i, t in enumerate(ts)]
        out = fn(*ts)
        proj = make(out.shape, out.dtype, seed=7).to(out.device)
        (out.float() * proj.float()).sum().backward()
        return [out] + [t.grad for t in ts if t.is_floating_point() and t.grad is not None]

    return run_both(run, *tensors)


def tol(dtype):
    return dict(atol=3e-2, rtol=3e-2) if dtype == torch.bfloat16 else dict(atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("log", [False, True])
def test_softmax(dtype, dim, log):
    f = F.log_softmax if log else F.softmax
    x = make((4, 6, 5), dtype)
    assert_same(*grads(lambda t: f(t, dim), x), **tol(dtype))
    assert_same(*grads(lambda t: f(t.transpose(0, 2), dim), x), **tol(dtype))


def test_softmax_masked_and_scalar():
    x = make((3, 5))
    x[0, :2] = float("-inf")
    x[1, 4] = float("-inf")
    assert_same(*grads(lambda t: F.softmax(t, -1), x))
    assert_same(*grads(lambda t: F.log_softmax(t, 1), x[1:]))
    assert_same(*run_both(lambda t: F.softmax(t, 0), torch.tensor(1.5)))
    assert_same(*run_both(lambda t: F.softmax(t, -1, dtype=torch.float64), x))


def test_softmax_half_to_float():
    x = make((3, 5), torch.bfloat16)
    out = torch.ops.aten._softmax(x.to("tpu"), -1, True)
    assert_same(out, F.softmax(x.float(), -1))
    g = make((3, 5), seed=2)
    y = F.softmax(x.float(), -1)
    for op in [torch.ops.aten._softmax_backward_data, torch.ops.aten._log_softmax_backward_data]:
        assert_same(*run_both(lambda a, b: op(a, b, -1, torch.bfloat16), g, y))
        assert_same(*run_both(lambda a, b: op(a, b, 0, torch.float32), g.double(), y.double()))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    "kw",
    [{}, {"ignore_index": 2}, {"label_smoothing": 0.1}, {"ignore_index": 0, "label_smoothing": 0.2}, {"weight": True}],
    ids=["plain", "ignore", "smooth", "ignore_smooth", "weight"],
)
def test_cross_entropy(reduction, kw):
    _cross_entropy(torch.float32, reduction, kw)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("kw", [{"weight": True}, {"ignore_index": 0, "label_smoothing": 0.2}], ids=["weight", "smooth"])
def test_cross_entropy_dtypes(dtype, kw):
    _cross_entropy(dtype, "mean", kw)


def _cross_entropy(dtype, reduction, kw):
    x = make((6, 5), dtype)
    t = torch.tensor([1, 2, 0, 4, 2, 3])
    kw = dict(kw)
    w = (torch.rand(5, generator=torch.Generator().manual_seed(3)) + 0.5).to(dtype)
    if kw.pop("weight", False):
        f = lambda a, b, c: F.cross_entropy(a, b, weight=c, reduction=reduction, **kw)  # noqa: E731
    else:
        f = lambda a, b, c: F.cross_entropy(a, b, reduction=reduction, **kw)  # noqa: E731
    assert_same(*grads(f, x, t, w, needs=[True, False, False]), **tol(dtype))


def test_cross_entropy_nd_and_1d():
    x = make((2, 4, 3, 3))
    t = torch.randint(0, 4, (2, 3, 3), generator=torch.Generator().manual_seed(1))
    t[0, 0, 0] = -100
    assert_same(*grads(lambda a, b: F.cross_entropy(a, b), x, t))
    assert_same(*grads(lambda a, b: F.cross_entropy(a, b, reduction="none"), x, t))
    w = torch.rand(4) + 0.5
    assert_same(*grads(lambda a, b, c: F.nll_loss(F.log_softmax(a, 1), b, weight=c, reduction="sum"), x, t, w,
                       needs=[True, False, False]))
    assert_same(*grads(lambda a, b: F.cross_entropy(a, b), make((5,)), torch.tensor(3)))


def test_nll_loss_all_ignored_and_total_weight():
    x = make((3, 4))
    t = torch.tensor([1, 1, 1])
    for r in range(3):
        assert_same(*run_both(lambda a, b: torch.ops.aten.nll_loss_forward(a, b, None, r, 1), x, t))
    assert_same(*run_both(lambda a, b: torch.ops.aten.nll_loss_forward(a, b, None, 1, -100), x, t))


def test_nll_loss_errors():
    x = make((3, 4)).to("tpu")
    with pytest.raises(IndexError):
        F.nll_loss(x, torch.tensor([0, 4, 1]).to("tpu")).cpu()
    with pytest.raises(ValueError):
        F.nll_loss(x, torch.tensor([0, 1]).to("tpu"))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(dtype, reduction):
    a, b = make((4, 5), dtype), make((4, 5), dtype, seed=1)
    assert_same(*grads(lambda x, y: F.mse_loss(x, y, reduction=reduction), a, b), **tol(dtype))
    assert_same(*grads(lambda x, y: F.mse_loss(x.t(), y.t(), reduction=reduction), a, b), **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,ns", [((4, 8), (8,)), ((2, 3, 4, 5), (4, 5)), ((3, 6), (3, 6))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(dtype, shape, ns, affine):
    x = make(shape, dtype)
    if affine:
        w, b = make(ns, dtype, seed=1), make(ns, dtype, seed=2)
        assert_same(*grads(lambda a, c, d: F.layer_norm(a, ns, c, d, eps=1e-5), x, w, b), **tol(dtype))
    else:
        assert_same(*grads(lambda a: F.layer_norm(a, ns), x), **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_native_layer_norm_stats(dtype):
    x = make((4, 6), dtype)
    w = make((6,), dtype)
    assert_same(*run_both(lambda a: torch.native_layer_norm(a, (6,), None, None, 1e-5), x), **tol(dtype))
    assert_same(*run_both(lambda a, c: torch.native_layer_norm(a, (6,), c, c, 1e-5), x, w), **tol(dtype))


def test_layer_norm_mixed_dtype():
    x, w = make((4, 6), torch.bfloat16), make((6,))
    assert_same(*run_both(lambda a, c: torch.native_layer_norm(a, (6,), c, c, 1e-5), x, w), **tol(torch.bfloat16))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("weight", [True, False])
def test_rms_norm(dtype, weight):
    x = make((3, 4, 8), dtype)
    if weight:
        assert_same(*grads(lambda a, w: F.rms_norm(a, (8,), w, 1e-6), x, make((8,), dtype, 1)), **tol(dtype))
    else:
        assert_same(*grads(lambda a: F.rms_norm(a, (4, 8)), x), **tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 2, 2)])
def test_batch_norm_train_and_eval(dtype, shape):
    x = make(shape, dtype)
    w, b = make((3,), dtype, 1), make((3,), dtype, 2)
    rm, rv = make((3,), dtype, 3), torch.rand(3, dtype=dtype) + 0.5
    assert_same(*grads(lambda a, c, d, m, v: F.batch_norm(a, m.detach(), v.detach(), c, d, training=True),
                       x, w, b, rm, rv, needs=[True, True, True, False, False]))
    assert_same(*grads(lambda a, c, d, m, v: F.batch_norm(a, m.detach(), v.detach(), c, d, training=False),
                       x, w, b, rm, rv, needs=[True, True, True, False, False]))
    assert_same(*grads(lambda a: F.batch_norm(a, None, None, training=True), x))


def test_batch_norm_legit_running_stats():
    x = make((4, 3, 2))
    rm, rv = torch.zeros(3), torch.ones(3)
    cpu = torch.ops.aten._native_batch_norm_legit(x, None, None, rm, rv, True, 0.1, 1e-5)
    trm, trv = torch.zeros(3, device="tpu"), torch.ones(3, device="tpu")
    tpu = torch.ops.aten._native_batch_norm_legit(x.to("tpu"), None, None, trm, trv, True, 0.1, 1e-5)
    assert_same(tpu, cpu)
    assert_same(trm, rm)
    assert_same(trv, rv)


def test_batch_norm_module_running_stats():
    x = make((4, 3, 2))
    m_cpu = torch.nn.BatchNorm1d(3)
    m_tpu = torch.nn.BatchNorm1d(3).to("tpu")
    y_cpu, y_tpu = m_cpu(x), m_tpu(x.to("tpu"))
    assert_same(y_tpu, y_cpu)
    assert_same(m_tpu.running_mean, m_cpu.running_mean)
    assert_same(m_tpu.running_var, m_cpu.running_var)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("padding_idx", [-1, 2])
@pytest.mark.parametrize("freq", [False, True])
def test_embedding_dense_backward(dtype, padding_idx, freq):
    g = make((2, 5, 4), dtype)
    idx = torch.tensor([[1, 2, 1, 7, 0], [2, 2, 9, 1, 3]])
    assert_same(*run_both(lambda a, i: torch.ops.aten.embedding_dense_backward(a, i, 10, padding_idx, freq), g, idx),
                **tol(dtype))


def test_embedding_grad():
    w = make((10, 4))
    idx = torch.tensor([[1, 2, 1], [0, 2, 2]])
    assert_same(*grads(lambda a, i: F.embedding(i, a, padding_idx=2), w, idx))


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0])
def test_embedding_max_norm_renormalizes_the_looked_up_rows_in_place(norm_type):
    # nn.Embedding(max_norm=...) calls embedding_renorm_ on its weight: rows
    # looked up (once each, however often) are scaled down to max_norm.
    w = make((6, 4)) * 2
    idx = torch.tensor([[1, 2, 2], [5, 1, 0]])

    def run(w, idx):
        w = w.clone().requires_grad_()
        with torch.no_grad():
            torch.embedding_renorm_(w, idx, 0.7, norm_type)
        out = F.embedding(idx, w)
        out.sum().backward()
        return w.detach(), out, w.grad

    assert_same(*run_both(run, w, idx), rtol=1e-6, atol=1e-6)


def test_dropout_statistics_and_backward():
    torch.manual_seed(0)
    x = torch.ones(64, 64, device="tpu", requires_grad=True)
    p = 0.3
    y = F.dropout(x, p)
    kept = (y != 0).cpu()
    frac = kept.float().mean().item()
    assert abs(frac - (1 - p)) < 0.02, frac
    assert torch.allclose(y.cpu()[kept], torch.full((int(kept.sum()),), 1 / (1 - p)))
    y.backward(torch.full((64, 64), 2.0, device="tpu"))
    assert torch.equal(x.grad.cpu() != 0, kept)
    assert torch.allclose(x.grad.cpu()[kept], torch.full((int(kept.sum()),), 2 / (1 - p)))
    # rows are not all the same pattern (the bits differ per element)
    assert not torch.equal(kept[0], kept[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.int32, torch.bool])
def test_native_dropout_backward_promotes_like_cpu(dtype):
    # grad * mask * scale: the float scale makes an integer or bool grad float32.
    g = torch.tensor([[1, 0, 3], [2, 5, 1]]).to(dtype)
    mask = torch.tensor([[True, False, True], [False, True, True]])
    assert_same(*run_both(lambda g, m: torch.ops.aten.native_dropout_backward(g, m, 2.0), g, mask))


def test_dropout_reproducible_and_modes():
    x = make((16, 16)).to("tpu")
    torch.manual_seed(123)
    a = F.dropout(x, 0.5)
    b = F.dropout(x, 0.5)
    torch.manual_seed(123)
    c = F.dropout(x, 0.5)
    assert torch.equal(a.cpu(), c.cpu())
    assert not torch.equal(a.cpu(), b.cpu())
    assert_same(F.dropout(x, 0.5, training=False), x.cpu())
    assert_same(F.dropout(x, 0.0), x.cpu())
    assert_same(F.dropout(x, 1.0), torch.zeros(16, 16))
    out, mask = torch.native_dropout(x, 0.25, False)
    assert mask.dtype == torch.bool and bool(mask.all().cpu())
    out, mask = torch.native_dropout(make((8,), torch.bfloat16).to("tpu"), 0.25, True)
    assert out.dtype == torch.bfloat16 and mask.dtype == torch.bool


@pytest.mark.parametrize(
    "fn,args",
    [
        (lambda t: F.softmax(t, -1), [torch.randint(0, 3, (3, 4))]),
        (lambda t: F.mse_loss(t, t), [torch.randint(0, 3, (3, 4))]),
        (lambda t: torch.native_dropout(t, 0.5, True), [torch.randint(0, 3, (3, 4))]),
        (lambda t: F.batch_norm(t, None, None, training=True), [torch.randn(3)]),
        (lambda t: F.layer_norm(t, (5,)), [torch.randn(3, 4)]),
        (lambda t, u: F.nll_loss(t, u), [torch.randn(3, 4), torch.tensor([0.0, 1, 2])]),
    ],
    ids=["softmax_int", "mse_int", "dropout_int", "batch_norm_1d", "layer_norm_shape", "nll_float_target"],
)
def test_error_types(fn, args):
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(Exception) as tpu:
        fn(*[a.to("tpu") for a in args])
    assert tpu.type is cpu.type, f"{tpu.value!r} vs CPU {cpu.value!r}"
