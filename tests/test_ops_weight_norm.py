"""Weight norm on tpu vs CPU. On an accelerator `nn.utils.weight_norm` and
`parametrizations.weight_norm` call the fused `_weight_norm_interface` (the
CPU composes it from plain ops for the same layers), so outputs and every
gradient are compared with the CPU, in Strict and Fused Eager."""
import pytest
import torch
import torch.nn as nn

from conftest import assert_same


LAYERS = {
    "linear_dim0": (lambda: nn.utils.parametrizations.weight_norm(nn.Linear(5, 3)), (4, 5)),
    "linear_last_dim": (lambda: nn.utils.parametrizations.weight_norm(nn.Linear(5, 3), dim=-1), (4, 5)),
    "conv1d_old_api": (lambda: nn.utils.weight_norm(nn.Conv1d(3, 4, 3)), (2, 3, 9)),
}


def train_step(make, shape, device, dtype):
    torch.manual_seed(0)
    m = make().to(device=device, dtype=dtype)
    x = torch.randn(shape).to(device=device, dtype=dtype).requires_grad_()
    y = m(x)
    (y.float() * torch.linspace(-1, 1, y.numel(), device=device).view_as(y)).sum().backward()
    return [y.detach(), x.grad] + [p.grad for p in m.parameters()]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.filterwarnings("ignore:.*torch.nn.utils.weight_norm. is deprecated:FutureWarning")
def test_weight_norm_layer_matches_cpu(name, dtype, mode):
    make, shape = LAYERS[name]
    tol = {} if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    assert_same(train_step(make, shape, "tpu", dtype), train_step(make, shape, "cpu", dtype), **tol)


@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_interface_and_backward_match_cpu(dim, mode):
    """The op itself: w, the saved norms (float32 for bf16 v, like CPU), and
    the backward op's grad_v and grad_g."""
    torch.manual_seed(0)
    v = torch.randn(3, 4, 5, dtype=torch.bfloat16)
    g_shape = [1, 1, 1]
    g_shape[dim] = v.shape[dim]
    g = torch.randn(g_shape, dtype=torch.bfloat16)
    grad_w = torch.randn_like(v)
    cpu = torch._weight_norm_interface(v, g, dim)
    tpu = torch._weight_norm_interface(v.to("tpu"), g.to("tpu"), dim)
    assert_same(tpu, cpu, rtol=2e-2, atol=2e-2)
    assert tpu[1].dtype == torch.float32
    cpu_back = torch.ops.aten._weight_norm_interface_backward(grad_w, v, g, cpu[1], dim)
    tpu_back = torch.ops.aten._weight_norm_interface_backward(*(t.to("tpu") for t in (grad_w, v, g, tpu[1])), dim)
    assert_same(tpu_back, cpu_back, rtol=2e-2, atol=2e-2)


def test_weight_norm_over_a_middle_dim_is_a_clear_error(mode):
    v, g = torch.randn(3, 4, 5, device="tpu"), torch.randn(1, 4, 1, device="tpu")
    with pytest.raises(RuntimeError, match="_weight_norm_interface: fused kernels can only be applied for first or last dim"):
        torch._weight_norm_interface(v, g, 1)
        torch.tpu.synchronize()
    assert (torch.ones(2, device="tpu") + 1).cpu().tolist() == [2.0, 2.0]
