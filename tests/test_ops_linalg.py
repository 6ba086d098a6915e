"""Matrix products (mm, bmm, addmm, baddbmm, addbmm, mv, addmv, dot, outer,
addr, matmul, linear) on tpu against the CPU: values, dtypes, out=, in-place,
non-contiguous inputs, gradients and error types."""
import pytest
import torch

from conftest import assert_same, run_both

FLOATS = [torch.float32, torch.float64, torch.bfloat16]
DTYPES = FLOATS + [torch.int64, torch.int32]


def make(*shape, dtype=torch.float32):
    if dtype.is_floating_point:
        return torch.randn(*shape).to(dtype)
    return torch.randint(-4, 5, shape, dtype=dtype)


def tol(dtype):
    # bf16 products of length-k sums round differently with another summation order.
    return dict(rtol=2e-2, atol=5e-2) if dtype == torch.bfloat16 else {}


@pytest.mark.parametrize("dtype", DTYPES)
def test_mm(dtype):
    a, b = make(5, 7, dtype=dtype), make(7, 3, dtype=dtype)
    assert_same(*run_both(torch.mm, a, b), **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_mm_noncontiguous(dtype):
    a, b = make(7, 5, dtype=dtype), make(3, 14, dtype=dtype)
    assert_same(*run_both(lambda x, y: torch.mm(x.t(), y[:, ::2].t()), a, b), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_bmm(dtype):
    a, b = make(2, 4, 6, dtype=dtype), make(2, 6, 3, dtype=dtype)
    assert_same(*run_both(torch.bmm, a, b), **tol(dtype))
    assert_same(*run_both(lambda x, y: torch.bmm(x.transpose(1, 2), y.transpose(1, 2)), b, a), **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_addmm_beta_alpha(dtype):
    s, a, b = make(5, 3, dtype=dtype), make(5, 4, dtype=dtype), make(4, 3, dtype=dtype)
    assert_same(*run_both(lambda s, a, b: torch.addmm(s, a, b), s, a, b), **tol(dtype))
    assert_same(*run_both(lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=-2), s, a, b), **tol(dtype))
    # a broadcast bias, as linear gives
    bias = make(3, dtype=dtype)
    assert_same(*run_both(lambda s, a, b: torch.addmm(s, a, b, alpha=3), bias, a, b), **tol(dtype))


def test_addmm_int():
    s, a, b = make(5, 3, dtype=torch.int64), make(5, 4, dtype=torch.int64), make(4, 3, dtype=torch.int64)
    assert_same(*run_both(lambda s, a, b: torch.addmm(s, a, b, beta=2, alpha=3), s, a, b))


def test_addmm_beta_zero_ignores_nan():
    s = torch.full((2, 3), float("nan"))
    a, b = torch.randn(2, 4), torch.randn(4, 3)
    tpu, cpu = run_both(lambda s, a, b: torch.addmm(s, a, b, beta=0), s, a, b)
    assert not torch.isnan(tpu.cpu()).any()
    assert_same(tpu, cpu)


def test_addmm_inplace_and_out():
    s, a, b = torch.randn(4, 3), torch.randn(4, 5), torch.randn(5, 3)

    def inplace(s, a, b):
        s = s.clone()
        s.addmm_(a, b, beta=0.25, alpha=2.0)
        return s

    assert_same(*run_both(inplace, s, a, b))

    def out(s, a, b):
        o = torch.empty(4, 3, device=s.device)
        r = torch.addmm(s, a, b, out=o)
        assert r is o
        return o

    assert_same(*run_both(out, s, a, b))

    def out_mm_wrong_shape(a, b):
        o = torch.zeros(0, device=a.device)
        torch.mm(a, b, out=o)
        return o

    assert_same(*run_both(out_mm_wrong_shape, a, b))

    def out_view(a, b):
        o = torch.zeros(4, 6, device=a.device)
        torch.mm(a, b, out=o[:, :3])
        return o

    assert_same(*run_both(out_view, a, b))


@pytest.mark.parametrize("dtype", FLOATS)
def test_baddbmm_addbmm(dtype):
    s, a, b = make(2, 4, 3, dtype=dtype), make(2, 4, 5, dtype=dtype), make(2, 5, 3, dtype=dtype)
    assert_same(*run_both(lambda s, a, b: torch.baddbmm(s, a, b, beta=0.5, alpha=1.5), s, a, b), **tol(dtype))
    s2 = make(4, 3, dtype=dtype)
    assert_same(*run_both(lambda s, a, b: torch.addbmm(s, a, b, beta=2, alpha=0.5), s2, a, b), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_mv_addmv_dot(dtype):
    m, v, s = make(4, 6, dtype=dtype), make(6, dtype=dtype), make(4, dtype=dtype)
    assert_same(*run_both(torch.mv, m, v), **tol(dtype))
    assert_same(*run_both(lambda s, m, v: torch.addmv(s, m, v, beta=2, alpha=3), s, m, v), **tol(dtype))
    assert_same(*run_both(torch.dot, v, v * 2), **tol(dtype))
    assert_same(*run_both(lambda m, v: torch.mv(m.t(), v), make(4, 6, dtype=dtype), s), **tol(dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_outer_addr(dtype):
    a, b, s = make(4, dtype=dtype), make(3, dtype=dtype), make(4, 3, dtype=dtype)
    assert_same(*run_both(torch.outer, a, b), **tol(dtype))
    assert_same(*run_both(lambda s, a, b: torch.addr(s, a, b, beta=0.5, alpha=2), s, a, b), **tol(dtype))


@pytest.mark.parametrize(
    "sa,sb",
    [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)), ((2, 3, 4), (4, 5)),
     ((2, 3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 5)), ((2, 2, 3, 4), (2, 2, 4, 5)), ((4,), (2, 4, 5))],
)
def test_matmul_shapes(sa, sb):
    a, b = torch.randn(*sa), torch.randn(*sb)
    assert_same(*run_both(torch.matmul, a, b))


@pytest.mark.parametrize("dtype", FLOATS)
def test_linear(dtype):
    x, w, bias = make(2, 3, 4, dtype=dtype), make(5, 4, dtype=dtype), make(5, dtype=dtype)
    assert_same(*run_both(torch.nn.functional.linear, x, w, bias), **tol(dtype))
    assert_same(*run_both(torch.nn.functional.linear, x, w), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_trace(dtype):
    assert_same(*run_both(torch.trace, make(4, 6, dtype=dtype)), **tol(dtype))
    assert_same(*run_both(lambda x: torch.trace(x.t()), make(5, 3, dtype=dtype)), **tol(dtype))


@pytest.mark.parametrize("use_gelu", [False, True])
def test_addmm_activation(use_gelu):
    s, a, b = torch.randn(3), torch.randn(4, 5), torch.randn(5, 3)
    f = lambda s, a, b: torch.ops.aten._addmm_activation(s, a, b, beta=0.5, alpha=2.0, use_gelu=use_gelu)
    assert_same(*run_both(f, s, a, b), rtol=1e-5, atol=1e-5)


def test_matmul_backward():
    a, b = torch.randn(2, 3, 4), torch.randn(4, 5)

    def f(a, b):
        a, b = a.clone().requires_grad_(), b.clone().requires_grad_()
        y = a @ b
        y.backward(torch.ones_like(y) * 0.5 + torch.arange(5.0, device=y.device))
        return a.grad, b.grad

    assert_same(*run_both(f, a, b), rtol=1e-5, atol=1e-5)


def test_linear_backward():
    x, w, bias = torch.randn(3, 4), torch.randn(5, 4), torch.randn(5)

    def f(x, w, bias):
        x, w, bias = (t.clone().requires_grad_() for t in (x, w, bias))
        y = torch.nn.functional.linear(x, w, bias)
        y.backward(y.detach() * 2)
        return x.grad, w.grad, bias.grad

    assert_same(*run_both(f, x, w, bias), rtol=1e-5, atol=1e-5)


def test_bmm_dot_backward():
    a, b, v = torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.randn(4)

    def f(a, b, v):
        a, b, v = (t.clone().requires_grad_() for t in (a, b, v))
        y = torch.bmm(a, b)
        y.backward(torch.ones_like(y) * 0.5 + torch.arange(5.0, device=y.device))
        torch.dot(v, v).backward()
        y = torch.mv(a[0], v)
        y.backward(y.detach())
        return a.grad, b.grad, v.grad

    assert_same(*run_both(f, a, b, v), rtol=1e-5, atol=1e-5)


def raises_like_cpu(fn, *args):
    with pytest.raises(Exception) as cpu:
        fn(*args)
    tpu_args = [a.to("tpu") for a in args]
    with pytest.raises(type(cpu.value)):
        fn(*tpu_args)


def test_errors():
    raises_like_cpu(torch.mm, torch.randn(3, 4), torch.randn(5, 6))
    raises_like_cpu(torch.mm, torch.randn(3, 4), torch.randn(4, 6).double())
    raises_like_cpu(torch.mm, torch.randn(3), torch.randn(4, 6))
    raises_like_cpu(torch.bmm, torch.randn(2, 3, 4), torch.randn(3, 4, 6))
    raises_like_cpu(torch.dot, torch.randn(3), torch.randn(4))
    raises_like_cpu(torch.mv, torch.randn(3, 4), torch.randn(5))
    raises_like_cpu(torch.addmm, torch.randn(3, 5).double(), torch.randn(3, 4), torch.randn(4, 5))
    raises_like_cpu(torch.trace, torch.randn(3))
    raises_like_cpu(torch.mm, torch.ones(2, 2, dtype=torch.bool), torch.ones(2, 2, dtype=torch.bool))


def test_error_message_names_shapes():
    with pytest.raises(RuntimeError, match=r"3x4 and 5x6"):
        torch.mm(torch.randn(3, 4).to("tpu"), torch.randn(5, 6).to("tpu"))
