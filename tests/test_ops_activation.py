"""Activation functions and their backward ops on tpu against the CPU:
forward over dtypes, in-place, out=, non-contiguous inputs, and gradients
from autograd."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same, run_both

FLOATS = [torch.float32, torch.float64, torch.bfloat16]

ACTS = {
    "relu": F.relu,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "leaky_relu_default": F.leaky_relu,
    "elu": lambda x: F.elu(x, alpha=1.3),
    "selu": F.selu,
    "celu": lambda x: F.celu(x, alpha=0.7),
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu,
    "mish": F.mish,
    "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.0, threshold=3.0),
    "hardtanh": F.hardtanh,
    "hardtanh_range": lambda x: F.hardtanh(x, -0.5, 2.0),
    "relu6": F.relu6,
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "threshold": lambda x: F.threshold(x, 0.5, -2.0),
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}
INT_OK = {"relu", "threshold", "hardtanh", "hardtanh_range", "relu6"}


def sample(dtype, *shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, generator=g).to(dtype)
    x = torch.randn(*shape, generator=g, dtype=torch.float64) * 3
    x.view(-1)[:6] = torch.tensor([0.0, -3.0, 3.0, 25.0, -25.0, 0.5], dtype=torch.float64)
    return x.to(dtype)


CASES = [(n, d) for n in ACTS for d in FLOATS + ([torch.int64] if n in INT_OK else [])]


@pytest.mark.parametrize("name,dtype", CASES, ids=[f"{n}-{str(d)[6:]}" for n, d in CASES])
def test_forward(name, dtype):
    assert_same(*run_both(ACTS[name], sample(dtype, 5, 8)))


def test_forward_nan_and_inf():
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, 1.0])
    # (gelu(inf) is NaN on the CPU, an artifact of its vectorized erf; not compared)
    for name in ["relu", "silu", "hardtanh", "softplus", "elu", "leaky_relu", "threshold", "mish"]:
        assert_same(*run_both(ACTS[name], x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", [n for n in ACTS if n not in ("leaky_relu_default", "hardtanh_range", "softplus_beta")])
def test_backward(name, dtype):
    x = sample(dtype, 4, 9, seed=1)
    gout = sample(dtype, 4, 9, seed=2)

    def grad(x, gout):
        x = x.detach().clone().requires_grad_()
        y = ACTS[name](x)
        y.backward(gout)
        return x.grad

    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
    assert_same(*run_both(grad, x, gout), **tol)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_backward_op_directly(approximate):
    g, x = torch.randn(3, 7), torch.randn(3, 7)
    assert_same(*run_both(lambda g, x: torch.ops.aten.gelu_backward(g, x, approximate=approximate), g, x))


def test_backward_ops_directly():
    g, x = torch.randn(3, 7), torch.randn(3, 7) * 3
    aten = torch.ops.aten
    assert_same(*run_both(lambda g, x: aten.threshold_backward(g, x, 0.5), g, x))
    assert_same(*run_both(lambda g, x: aten.leaky_relu_backward(g, x, 0.1, False), g, x))
    assert_same(*run_both(lambda g, x: aten.elu_backward(g, 1.0, 1.0, 1.0, False, x), g, x))
    assert_same(*run_both(lambda g, x: aten.elu_backward(g, 1.5, 1.0, 1.0, True, F.elu(x, 1.5)), g, x))
    assert_same(*run_both(lambda g, x: aten.softplus_backward(g, x, 1.0, 20.0), g, x))
    assert_same(*run_both(lambda g, x: aten.hardtanh_backward(g, x, -1.0, 1.0), g, x))
    assert_same(*run_both(lambda g, x: aten.sigmoid_backward(g, torch.sigmoid(x)), g, x))
    assert_same(*run_both(lambda g, x: aten.tanh_backward(g, torch.tanh(x)), g, x))
    assert_same(*run_both(lambda g, x: aten.silu_backward(g, x), g, x))
    assert_same(*run_both(lambda g, x: aten.mish_backward(g, x), g, x))
    assert_same(*run_both(lambda g, x: aten.hardswish_backward(g, x), g, x))
    assert_same(*run_both(lambda g, x: aten.hardsigmoid_backward(g, x), g, x))


INPLACE = {
    "relu_": lambda x: F.relu(x, inplace=True),
    "leaky_relu_": lambda x: F.leaky_relu(x, 0.3, inplace=True),
    "elu_": lambda x: F.elu(x, inplace=True),
    "hardtanh_": lambda x: F.hardtanh(x, inplace=True),
    "threshold_": lambda x: F.threshold(x, 0.1, 20.0, inplace=True),
    "silu_": lambda x: F.silu(x, inplace=True),
    "hardswish_": lambda x: F.hardswish(x, inplace=True),
    "hardsigmoid_": lambda x: F.hardsigmoid(x, inplace=True),
    "mish_": lambda x: F.mish(x, inplace=True),
    "sigmoid_": lambda x: x.sigmoid_(),
}


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace(name):
    def f(x):
        x = x.clone()
        r = INPLACE[name](x)
        assert r is x
        return x

    assert_same(*run_both(f, sample(torch.float32, 4, 6)))

    def on_view(x):
        x = x.clone()
        INPLACE[name](x[:, ::2])
        return x

    assert_same(*run_both(on_view, sample(torch.float32, 4, 6)))


def test_out_and_non_contiguous():
    x = sample(torch.float32, 4, 6)
    assert_same(*run_both(lambda x, o: torch._C._nn.gelu(x, out=o), x, torch.empty(4, 6)))
    with pytest.warns(UserWarning):
        assert_same(*run_both(lambda x, o: torch._C._nn.silu(x, out=o), x, torch.empty(2)))
    # (gelu(inf) is NaN on the CPU, an artifact of its vectorized erf; not compared)
    for name in ["relu", "silu", "elu", "hardswish", "threshold"]:
        assert_same(*run_both(lambda x: ACTS[name](x.t()), x))
        assert_same(*run_both(lambda x: ACTS[name](x[:, 1::2]), x))


def test_int_inputs_rejected_like_cpu():
    for fn in [F.gelu, F.silu, F.elu, lambda x: F.leaky_relu(x, 0.1)]:
        with pytest.raises((RuntimeError, NotImplementedError)):
            fn(torch.arange(4))
        with pytest.raises((RuntimeError, NotImplementedError)):
            fn(torch.arange(4, device="tpu"))
    with pytest.raises(NotImplementedError):
        F.relu(torch.ones(2, dtype=torch.bool, device="tpu"))
