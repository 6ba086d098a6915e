"""Ops whose PyTorch kernel for a new backend is a decomposition
(CompositeExplicitAutograd) but which tpu lowers whole: native_group_norm,
logsumexp, addr, isinf and constant_pad_nd. Each runs as one program, and
matches the CPU in every dtype the decomposition handled: group norm in
bfloat16 as exactly as the CPU (the decomposition rounded every step to
bfloat16), bool addr, complex logsumexp and isinf, negative pads."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_tpu_rs
from conftest import assert_same, run_both


def _programs_run(fn, *cpu_args):
    """How many programs one call of fn on tpu runs (Strict Eager)."""
    args = [a.to("tpu") for a in cpu_args]
    torch.tpu.synchronize()
    before = torch_tpu_rs.metrics()["executions"]
    fn(*args)
    torch.tpu.synchronize()
    return torch_tpu_rs.metrics()["executions"] - before


@pytest.mark.parametrize(
    "name,fn,make",
    [
        ("group_norm", lambda x, w: F.group_norm(x, 2, w, w), lambda: (torch.randn(2, 4, 3, 5), torch.rand(4))),
        ("logsumexp", lambda x: torch.logsumexp(x, 1), lambda: (torch.randn(4, 5),)),
        ("addr", lambda s, a, b: torch.addr(s, a, b, beta=0.5, alpha=2), lambda: (torch.randn(3, 4), torch.randn(3), torch.randn(4))),
        ("isinf", torch.isinf, lambda: (torch.randn(4, 5),)),
        ("pad", lambda x: F.pad(x, (1, 2), value=3.0), lambda: (torch.randn(4, 5),)),
    ],
)
def test_runs_as_one_program(name, fn, make):
    args = make()
    assert_same(*run_both(fn, *args), rtol=1e-5, atol=1e-5)
    assert _programs_run(fn, *args) == 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_group_norm_in_low_precision_rounds_once_like_the_cpu(mode, dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(2, 6, 5, 5, generator=g) * 3 + 1).to(dtype)
    w, b = torch.randn(6, generator=g).to(dtype), torch.randn(6, generator=g).to(dtype)
    tpu, cpu = run_both(lambda x, w, b: F.group_norm(x, 3, w, b), x, w, b)
    # Both compute in float32 and round once: at most one ulp apart.
    ulp = 2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10
    diff = (tpu.cpu().double() - cpu.double()).abs()
    assert (diff <= ulp * cpu.double().abs().clamp_min(1)).all()


def test_group_norm_gradients_through_the_lowered_backward(mode):
    g = torch.Generator().manual_seed(1)
    x, w, b = torch.randn(2, 4, 3, 3, generator=g), torch.randn(4, generator=g), torch.randn(4, generator=g)

    def run(x, w, b):
        x, w, b = (v.clone().requires_grad_() for v in (x, w, b))
        F.group_norm(x, 2, w, b).pow(2).sum().backward()
        return x.grad, w.grad, b.grad

    for t, c in zip(*run_both(run, x, w, b)):
        assert_same(t, c, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("beta,alpha", [(True, True), (False, True), (True, False), (0, 1), (2, 0)])
def test_bool_addr(mode, beta, alpha):
    s = torch.tensor([[True, False, False], [False, True, False]])
    a, b = torch.tensor([True, False]), torch.tensor([True, True, False])
    assert_same(*run_both(lambda s, a, b: torch.addr(s, a, b, beta=beta, alpha=alpha), s, a, b))


def test_complex_logsumexp_and_isinf(mode):
    g = torch.Generator().manual_seed(2)
    z = torch.randn(3, 4, dtype=torch.complex64, generator=g) * 3
    for dims in (1, (0, 1), 0):
        assert_same(*run_both(lambda t: torch.logsumexp(t, dims), z), rtol=1e-5, atol=1e-5)
    inf, nan = float("inf"), float("nan")
    # 3e38 + 3e38j is finite although its magnitude overflows float32.
    w = torch.tensor([complex(3e38, 3e38), complex(inf, 0), complex(0, -inf), complex(nan, inf), 1 + 2j])
    assert_same(*run_both(torch.isinf, w))


def test_logsumexp_edge_values(mode):
    assert_same(*run_both(lambda t: torch.logsumexp(t, 0), torch.empty(0, 3)))
    inf = float("inf")
    assert_same(*run_both(lambda t: torch.logsumexp(t, 1), torch.tensor([[inf, 1.0], [-inf, -inf], [2.0, 3.0]])))


@pytest.mark.parametrize("pad", [(1, 2), (-1, 1), (0, 0, -1, 2), (2, -3, 1, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.complex64])
def test_constant_pad_crops_and_pads_every_dtype(mode, pad, dtype):
    x = (torch.arange(12) - 5).reshape(3, 4).to(dtype)
    assert_same(*run_both(lambda t: F.pad(t, pad, value=2), x))
