"""torch.optim's fused steps (`Adam/AdamW/SGD(fused=True)`) on tpu, against
the CPU's own fused kernels: parameters and optimizer state after a few
steps under a learning-rate schedule, in Strict and Fused Eager, f32 and
bf16; GradScaler's unscale-and-skip; a tensor learning rate; torch.compile.
A schedule must not recompile: the hyperparameters are runtime numbers."""
import pytest
import torch
import torch.nn as nn

import torch_tpu_rs
from conftest import assert_same

CONFIGS = {
    "adam": (torch.optim.Adam, {}),
    "adam_amsgrad_weight_decay": (torch.optim.Adam, dict(amsgrad=True, weight_decay=0.1)),
    "adamw": (torch.optim.AdamW, {}),
    "adamw_maximize": (torch.optim.AdamW, dict(maximize=True, weight_decay=0.05)),
    "sgd": (torch.optim.SGD, {}),
    "sgd_momentum_weight_decay": (torch.optim.SGD, dict(momentum=0.9, weight_decay=0.01)),
    "sgd_nesterov": (torch.optim.SGD, dict(momentum=0.9, nesterov=True)),
    "sgd_dampening_maximize": (torch.optim.SGD, dict(momentum=0.5, dampening=0.3, maximize=True)),
}


def model(device, dtype=torch.float32):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(device, dtype)


def batches(n, dtype=torch.float32):
    g = torch.Generator().manual_seed(1)
    return [torch.randn(5, 8, generator=g).to(dtype) for _ in range(n)]


def train(device, opt_cls, kw, dtype=torch.float32, steps=4, compiled=False):
    """`steps` fused optimizer steps with a decaying learning rate; returns
    the parameters, then every optimizer state tensor in a fixed order."""
    m = model(device, dtype)
    opt = opt_cls(m.parameters(), fused=True, **{"lr": 1e-2, **kw})
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.8)

    def step(x):
        opt.zero_grad()
        loss = m(x).float().pow(2).sum()
        loss.backward()
        opt.step()
        return loss

    if compiled:
        step = torch.compile(step, backend="tpu")
    for x in batches(steps, dtype):
        step(x.to(device))
        sched.step()
    state = [t for p in m.parameters() for _, t in sorted(opt.state[p].items()) if isinstance(t, torch.Tensor)]
    return [p.detach() for p in m.parameters()] + state


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(CONFIGS))
def test_fused_optimizer_matches_cpu(name, dtype, mode):
    opt_cls, kw = CONFIGS[name]
    tpu, cpu = train("tpu", opt_cls, kw, dtype), train("cpu", opt_cls, kw, dtype)
    assert len(tpu) == len(cpu) >= 4
    assert_same(tpu, cpu, **({} if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)))


def test_learning_rate_schedule_does_not_recompile(mode):
    """Each step runs with a new lr (and Adam's bias corrections change with
    the step); after the first steps nothing compiles."""
    m = model("tpu")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, fused=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    xs = [x.to("tpu") for x in batches(6)]
    for i, x in enumerate(xs):
        if i == 2:
            torch.tpu.synchronize()
            before = torch_tpu_rs.metrics()["compiles"]
        opt.zero_grad()
        m(x).pow(2).sum().backward()
        opt.step()
        sched.step()
    torch.tpu.synchronize()
    assert torch_tpu_rs.metrics()["compiles"] == before
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-2 / 7)


@pytest.mark.parametrize("lr_device", ["cpu", "tpu"])
def test_tensor_learning_rate(lr_device):
    """`lr` as a tensor takes the `.tensor_lr` overloads."""
    tpu = train("tpu", torch.optim.Adam, dict(lr=torch.tensor(0.01, device=lr_device)))
    cpu = train("cpu", torch.optim.Adam, dict(lr=torch.tensor(0.01)))
    assert_same(tpu, cpu)


def scaled_training(device):
    """Fused Adam under GradScaler; the third batch overflows, so that step
    is skipped (found_inf) and the scale backs off."""
    m = model(device)
    opt = torch.optim.Adam(m.parameters(), lr=0.1, fused=True)
    scaler = torch.amp.GradScaler(device, init_scale=1024.0)
    for i, x in enumerate(batches(4)):
        if i == 2:
            x[0, 0] = float("inf")
        opt.zero_grad()
        scaler.scale(m(x.to(device)).sum()).backward()
        scaler.step(opt)
        scaler.update()
    return [p.detach() for p in m.parameters()], scaler.get_scale()


def test_grad_scaler_unscales_and_skips_overflowing_steps(mode):
    (tpu, tpu_scale), (cpu, cpu_scale) = scaled_training("tpu"), scaled_training("cpu")
    assert_same(tpu, cpu)
    assert tpu_scale == cpu_scale == 512.0


def adam_op_args(device):
    g = torch.Generator().manual_seed(3)
    lists = [[torch.randn(3, 4, generator=g).to(device) for _ in range(2)] for _ in range(5)]
    lists[3] = [t.abs() for t in lists[3]]  # exp_avg_sqs are non-negative
    lists[4] = [t.abs() for t in lists[4]]
    steps = [torch.tensor(3.0, device=device) for _ in range(2)]
    return lists, steps


@pytest.mark.parametrize("found_inf", [0.0, 1.0])
def test_fused_adam_op_unscales_grads_in_place_unless_skipped(found_inf, mode):
    """grad_scale divides the grads, which are stored back unscaled; with
    found_inf == 1 no tensor changes at all."""
    results = {}
    for device in ("tpu", "cpu"):
        lists, steps = adam_op_args(device)
        before = [t.clone() for ts in lists for t in ts]
        torch._fused_adam_(*lists, steps, lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.1, eps=1e-8,
                           amsgrad=True, maximize=False, grad_scale=torch.tensor([4.0], device=device),
                           found_inf=torch.tensor([found_inf], device=device))
        results[device] = [t for ts in lists for t in ts]
        if found_inf and device == "tpu":
            assert_same(results[device], [t.cpu() for t in before])
    assert_same(results["tpu"], results["cpu"])
    if not found_inf:
        grads_before = adam_op_args("cpu")[0][1]
        assert_same(results["tpu"][2:4], [g / 4 for g in grads_before])


def test_mismatched_state_is_a_clear_error_and_the_device_keeps_working(mode):
    """The error comes from the lowering, after the op's hyperparameters
    were added as arguments: in Fused Eager the pending graph must come out
    as it was (work recorded before the error still runs, right)."""
    lists, steps = adam_op_args("tpu")
    pending = lists[0][0] * 2 + 1
    lists[2][1] = torch.zeros(4, 3, device="tpu")
    message = r"_fused_adam_: exp_avgs\[1\] has shape \[4, 3\] .* but params\[1\] has shape \[3, 4\]"
    with pytest.raises(RuntimeError, match=message):
        torch._fused_adam_(*lists, steps, lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8,
                           amsgrad=False, maximize=False)
        torch.tpu.synchronize()
    assert_same(pending, adam_op_args("cpu")[0][0][0] * 2 + 1)
    assert_same(train("tpu", torch.optim.AdamW, {}), train("cpu", torch.optim.AdamW, {}))


@pytest.mark.parametrize("name", ["adamw", "sgd_momentum_weight_decay"])
def test_compiled_training_with_a_fused_optimizer_matches_cpu(name):
    opt_cls, kw = CONFIGS[name]
    torch._dynamo.reset()
    tpu = train("tpu", opt_cls, kw, steps=3, compiled=True)
    assert_same(tpu, train("cpu", opt_cls, kw, steps=3))
