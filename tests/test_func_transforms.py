"""torch.func on tpu against the CPU: Jacobians and Hessians batch the
cotangent or tangent while the saved activation stays unbatched, so the
activation backward kernels must broadcast (as ATen's do), and forward-mode
AD reaches the `*_jvp` ops."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same

ACTIVATIONS = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": F.relu,
    "threshold": lambda t: F.threshold(t, 0.1, 2.0),
    "elu": F.elu,
    "selu": F.selu,
    "celu": lambda t: F.celu(t, 0.7),
    "softplus": lambda t: F.softplus(t, beta=2.0, threshold=1.5),
    "leaky_relu": lambda t: F.leaky_relu(t, 0.2),
    "hardtanh": lambda t: F.hardtanh(t, -0.5, 0.5),
    "relu6": F.relu6,
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "gelu": F.gelu,
    "silu": F.silu,
    "mish": F.mish,
}


def _x():
    torch.manual_seed(0)
    return torch.randn(3, 4) * 3


@pytest.mark.parametrize("name", list(ACTIVATIONS))
@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
def test_jacobians_of_activations(name, transform, mode):
    jac = getattr(torch.func, transform)(ACTIVATIONS[name])
    x = _x()
    assert_same(jac(x.to("tpu")), jac(x))


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "elu", "softplus", "gelu"])
def test_hessians_of_activations(name, mode):
    hess = torch.func.hessian(lambda t: ACTIVATIONS[name](t).pow(2).sum())
    x = _x()[0]
    assert_same(hess(x.to("tpu")), hess(x), rtol=1e-5, atol=1e-5)


def test_backward_kernels_broadcast_grad_against_input():
    # The direct form of what the batching rules do: a [2, 3] gradient for a [3] input.
    g, y = torch.randn(2, 3), torch.randn(3).sigmoid()
    for op in (torch.ops.aten.tanh_backward, torch.ops.aten.sigmoid_backward):
        assert_same(op(g.to("tpu"), y.to("tpu")), op(g, y))
    assert_same(
        torch.ops.aten.threshold_backward(g.to("tpu"), y.to("tpu"), 0.5), torch.ops.aten.threshold_backward(g, y, 0.5)
    )
    with pytest.raises(RuntimeError, match="must match the size"):
        torch.ops.aten.tanh_backward(torch.ones(2, 4, device="tpu"), torch.ones(3, device="tpu"))


def test_ntk_of_a_relu_network(mode):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.randn(3, 4)

    def ntk(model, x):
        params = {k: v.detach() for k, v in model.named_parameters()}
        jac = torch.func.vmap(torch.func.jacrev(lambda p, xi: torch.func.functional_call(model, p, (xi,))), (None, 0))(
            params, x
        )
        flat = torch.cat([j.flatten(2) for j in jac.values()], dim=2)
        return torch.einsum("aik,bjk->abij", flat, flat)

    cpu = ntk(net, x)
    assert_same(ntk(net.to("tpu"), x.to("tpu")), cpu, rtol=1e-5, atol=1e-5)


def test_forward_mode_ad_through_glu(mode):
    import torch.autograd.forward_ad as fwAD

    torch.manual_seed(0)
    x, dx = torch.randn(2, 6), torch.randn(2, 6)
    out = []
    for dev in ("cpu", "tpu"):
        with fwAD.dual_level():
            primal, tangent = fwAD.unpack_dual(F.glu(fwAD.make_dual(x.to(dev), dx.to(dev)), -1))
            out.append((primal, tangent))
    assert_same(out[1], out[0])
    assert_same(torch.func.jacfwd(lambda t: F.glu(t, 0))(x.to("tpu")), torch.func.jacfwd(lambda t: F.glu(t, 0))(x))
