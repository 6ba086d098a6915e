"""Automatic mixed precision: torch.autocast("tpu") casts the ops CUDA casts,
and torch.amp.GradScaler("tpu") unscales, skips steps with infs and grows or
backs off its scale exactly as on the CPU."""
import pytest
import torch
import torch.nn.functional as F

from conftest import assert_same


def test_get_amp_supported_dtype():
    assert torch.tpu.get_amp_supported_dtype() == [torch.bfloat16, torch.float16]
    assert torch.tpu.is_bf16_supported()


def test_autocast_defaults_to_bfloat16():
    # TPUs compute in bfloat16; torch.autocast("cuda") would give float16.
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    x = torch.randn(4, 4, device="tpu")
    with torch.autocast("tpu"):
        assert (x @ x).dtype == torch.bfloat16
    with torch.tpu.amp.autocast():
        assert (x @ x).dtype == torch.bfloat16


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_matmuls_run_in_low_precision_and_match_cpu(mode, dtype):
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 8)
    lin_t = torch.nn.Linear(16, 8).to("tpu")
    lin_t.load_state_dict(lin.state_dict())
    x, w = torch.randn(4, 16), torch.randn(16, 8)
    # The CPU's autocast casts linear and matmul to `dtype` too (the CPU
    # supports float16 autocast since torch 2.4).
    with torch.autocast("cpu", dtype=dtype):
        want = (lin(x), x @ w, torch.bmm(x[None], w[None]))
    with torch.autocast("tpu", dtype=dtype):
        assert torch.is_autocast_enabled("tpu") and torch.get_autocast_dtype("tpu") == dtype
        got = (lin_t(x.to("tpu")), x.to("tpu") @ w.to("tpu"), torch.bmm(x.to("tpu")[None], w.to("tpu")[None]))
    for g, c in zip(got, want):
        assert g.dtype == dtype
        assert_same(g, c)
    # Outside the region nothing is cast.
    assert (x.to("tpu") @ w.to("tpu")).dtype == torch.float32


def test_autocast_keeps_precision_sensitive_ops_in_float32(mode):
    """As on CUDA: softmax, log_softmax, sum and losses run in float32 even on
    low-precision inputs."""
    x = torch.randn(4, 10).to(torch.bfloat16)
    target = torch.randint(0, 10, (4,))
    with torch.autocast("tpu", dtype=torch.bfloat16):
        xt = x.to("tpu")
        sm = torch.softmax(xt, -1)
        lsm = F.log_softmax(xt, -1)
        s = xt.sum()
        loss = F.nll_loss(lsm, target.to("tpu"))
    for got, want in ((sm, torch.softmax(x.float(), -1)), (lsm, F.log_softmax(x.float(), -1)), (s, x.float().sum())):
        assert got.dtype == torch.float32
        assert_same(got, want)
    assert_same(loss, F.nll_loss(F.log_softmax(x.float(), -1), target))


def test_autocast_training_step_grads_match_cpu(mode):
    torch.manual_seed(1)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    mt = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to("tpu")
    mt.load_state_dict(m.state_dict())
    x, y = torch.randn(6, 8), torch.randint(0, 4, (6,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(m(x).float(), y)
    loss.backward()
    with torch.autocast("tpu", dtype=torch.bfloat16):
        loss_t = F.cross_entropy(mt(x.to("tpu")).float(), y.to("tpu"))
    loss_t.backward()
    assert_same(loss_t, loss, rtol=1e-2, atol=1e-2)
    for p, pt in zip(m.parameters(), mt.parameters()):
        assert pt.grad.dtype == torch.float32
        assert_same(pt.grad, p.grad, rtol=2e-2, atol=2e-2)


def _scaled_training(device: str, inject_inf_at: int | None):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(device)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**8, growth_interval=2)
    x, y = torch.randn(32, 8).to(device), torch.randn(32, 1).to(device)
    losses, scales = [], []
    for i in range(6):
        loss = F.mse_loss(m(x), y)
        scaler.scale(loss).backward()
        if i == inject_inf_at:
            with torch.no_grad():
                m[0].weight.grad[0, 0] = float("inf")
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        losses.append(loss.item())
        scales.append(scaler.get_scale())
    return losses, scales, [p.detach().cpu() for p in m.parameters()]


@pytest.mark.parametrize("inject_inf_at", [None, 2], ids=["clean", "inf-skips-a-step"])
def test_grad_scaler_matches_cpu(mode, inject_inf_at):
    losses, scales, params = _scaled_training("cpu", inject_inf_at)
    losses_t, scales_t, params_t = _scaled_training("tpu", inject_inf_at)
    # The scale doubles every 2 clean steps and halves after an inf.
    assert scales_t == scales
    assert losses_t == pytest.approx(losses, rel=1e-5)
    for p, pt in zip(params, params_t):
        torch.testing.assert_close(pt, p, rtol=1e-5, atol=1e-6)


def test_unscale_flags_nan_and_leaves_found_inf_raised():
    grads = [torch.tensor([1.0, 2.0]), torch.tensor([[4.0, float("nan")]])]
    for device in ("cpu", "tpu"):
        gs = [g.clone().to(device) for g in grads]
        found = torch.zeros(1, device=device)
        torch._amp_foreach_non_finite_check_and_unscale_(gs, found, torch.full((1,), 0.5, device=device))
        assert found.item() == 1.0
        assert gs[0].cpu().tolist() == [0.5, 1.0]
        # Once raised, a clean list does not clear it.
        clean = [torch.ones(3, device=device)]
        torch._amp_foreach_non_finite_check_and_unscale_(clean, found, torch.full((1,), 0.5, device=device))
        assert found.item() == 1.0 and clean[0].cpu().tolist() == [0.5, 0.5, 0.5]


def test_bad_scale_dtype_is_a_clear_error_and_the_device_keeps_working():
    g = [torch.ones(2, device="tpu")]
    with pytest.raises(RuntimeError, match=r"inv_scale must be a 1-element torch.float32 tensor, got shape \[2\]"):
        torch._amp_foreach_non_finite_check_and_unscale_(
            g, torch.zeros(1, device="tpu"), torch.ones(2, device="tpu")
        )
    assert (g[0] + 1).cpu().tolist() == [2.0, 2.0]


def test_autocast_inside_torch_compile_matches_cpu():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    mt = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to("tpu")
    mt.load_state_dict(m.state_dict())
    x = torch.randn(6, 8)

    def step(mod, x, device):
        with torch.autocast(device, dtype=torch.bfloat16):
            y = mod(x)
        return y, torch.softmax(y.float(), -1)[:, 0].sum()

    y, s = torch.compile(step, backend="tpu")(mt, x.to("tpu"), "tpu")
    y_cpu, s_cpu = step(m, x, "cpu")
    assert y.dtype == torch.bfloat16
    assert_same(y, y_cpu)
    s.backward()
    s_cpu.backward()
    assert_same(s, s_cpu, rtol=1e-2, atol=1e-2)
    for p, pt in zip(m.parameters(), mt.parameters()):
        assert_same(pt.grad, p.grad, rtol=2e-2, atol=2e-2)


def test_unscale_keeps_float64_gradients_in_float64():
    g = torch.tensor([1 / 3, 2 / 7], dtype=torch.float64)
    want = [g.clone()]
    torch._amp_foreach_non_finite_check_and_unscale_(want, torch.zeros(1), torch.full((1,), 0.1))
    got = [g.to("tpu")]
    found = torch.zeros(1, device="tpu")
    torch._amp_foreach_non_finite_check_and_unscale_(got, found, torch.full((1,), 0.1, device="tpu"))
    assert found.item() == 0.0
    torch.testing.assert_close(got[0].cpu(), want[0], rtol=1e-15, atol=0)


def test_binary_cross_entropy_is_refused_under_autocast_as_on_cuda():
    x = torch.rand(4, device="tpu")
    with torch.autocast("tpu", dtype=torch.float16):
        with pytest.raises(RuntimeError, match=r"(?s)unsafe to autocast.*binary_cross_entropy_with_logits"):
            torch.nn.functional.binary_cross_entropy(x, x)
        # The fused form is autocast-safe and computes in float32.
        assert torch.nn.functional.binary_cross_entropy_with_logits(x, x).dtype == torch.float32
    # Outside autocast it runs.
    ref = torch.nn.functional.binary_cross_entropy(x.cpu(), x.cpu())
    assert torch.allclose(torch.nn.functional.binary_cross_entropy(x, x).cpu(), ref, atol=1e-6)
