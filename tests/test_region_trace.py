"""Eager work traced into an ATen graph (`_region_trace.py`), and two traces
at other sizes made into one graph over symbolic sizes
(`_region_generalize.py`): the pieces Fused Eager's shape buckets build on.

A traced training step, rerun from the state it started from, must redo
exactly what eager did (the loss and every update). A generalized step,
compiled with its changing dims marked dynamic, must match eager and the
CPU at sizes neither trace saw, at one program per bucket."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import torch_tpu_rs
from conftest import assert_same
from torch_tpu_rs._bucketing import bucket
from torch_tpu_rs._region_generalize import NotGeneralizable, generalize
from torch_tpu_rs._region_trace import RegionTrace
from torch_tpu_rs.models import MLP
from torch_tpu_rs.models.llama import Llama, LlamaConfig


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    torch_tpu_rs.set_eager_mode("strict")


def _programs() -> int:
    m = torch_tpu_rs.metrics()
    return m["compiles"] + m["cache_hits_disk"]


def _close(a, b, tol=1e-5):
    torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), rtol=tol, atol=tol)


def _step(model, opt, loss_fn):
    loss = loss_fn()
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def _assert_rerun_redoes(trace, tol=1e-5):
    """What the region computed (each live output, and each input as the
    region left it) against its graph rerun from the kept inputs."""
    start = list(trace.input_values)
    rerun = trace.graph_module()(*start)
    live = [o.tensor() for o in trace.outputs]
    assert len(rerun) == len(live) >= 1
    for got, want in zip(rerun, live):
        if want is not None:  # (a storage alive through another tensor object)
            _close(got, want, tol)
    updated = 0
    for kept, ref in zip(start, trace.inputs):
        real = ref()
        if real is not None:
            _close(kept, real, tol)  # the rerun updated the copy as the region updated the tensor
            updated += 1
    assert updated >= 1


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_a_traced_training_step_reruns_to_the_same_loss_and_updates(mode):
    """An MLP step with AdamW (its CPU step counters, foreach updates and
    bias corrections read with .item()), traced in either eager mode."""
    torch_tpu_rs.set_eager_mode(mode)
    torch.manual_seed(0)
    model = MLP(16, 32, 4).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = torch.randn(8, 16, device="tpu"), torch.randint(0, 4, (8,), device="tpu")
    before = [p.detach().cpu().clone() for p in model.parameters()]
    _step(model, opt, lambda: F.cross_entropy(model(x), y))
    with RegionTrace(keep_inputs=True) as trace:
        loss = _step(model, opt, lambda: F.cross_entropy(model(x), y))  # noqa: F841  (alive: an output)
    assert "aten._foreach_addcdiv_.ScalarList" in trace.ops and "aten.mm.default" in trace.ops
    # A list an op returns (AdamW's square roots) is a graph value, not an input.
    sqrt = [n for n in trace.graph.nodes if n.target is torch.ops.aten._foreach_sqrt.default]
    assert sqrt and len(sqrt[0].users) == len(list(model.parameters()))
    _assert_rerun_redoes(trace)
    assert any(not torch.equal(b, p.detach().cpu()) for b, p in zip(before, model.parameters()))


def test_the_backward_reads_saved_outputs_as_graph_values_not_inputs():
    """Autograd saves a tanh's output and hands the backward a new tensor
    object over the same storage: it is the tanh node, not an input."""
    w = torch.randn(5, device="tpu", requires_grad=True)
    with RegionTrace() as trace:
        y = torch.tanh(w * 2)
        y.sum().backward()
    placeholders = [n for n in trace.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 1  # w only
    backward = [n for n in trace.graph.nodes if n.target is torch.ops.aten.tanh_backward.default]
    assert backward
    saved = backward[0].args[1]
    while saved.target is torch.ops.aten.detach.default:  # autograd saves a detached alias
        saved = saved.args[0]
    assert saved.target is torch.ops.aten.tanh.default


def _llama_case():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, dim=32, n_layers=1, n_heads=2, hidden_dim=48, max_seq_len=64)
    cpu = Llama(cfg)
    tpu = Llama(cfg).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    batch = lambda n: torch.randint(0, cfg.vocab_size, (2, n))  # noqa: E731
    return cpu, tpu, batch, lambda m, tokens: m.loss(tokens)


def _mlp_case():
    torch.manual_seed(0)
    cpu = MLP(16, 32, 4)
    tpu = MLP(16, 32, 4).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    batch = lambda n: (torch.randn(n, 16), torch.randint(0, 4, (n,)))  # noqa: E731
    return cpu, tpu, batch, lambda m, b: F.cross_entropy(m(b[0]), b[1])


def _to(b, device):
    return b.to(device) if isinstance(b, torch.Tensor) else tuple(t.to(device) for t in b)


OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2),
}


@pytest.mark.parametrize("case,sizes,traced,optimizer", [
    ("llama", [10, 15, 17, 20, 31, 40, 64, 11], (9, 13), "adamw"),  # the sequence length changes
    ("llama", [10, 17, 33, 5], (9, 13), "sgd"),
    ("mlp", [5, 12, 16, 17, 30, 3], (8, 6), "adamw"),  # the batch size changes
])
def test_a_generalized_training_step_matches_eager_and_cpu_at_new_sizes(case, sizes, traced, optimizer):
    """Steps traced at two sizes become one graph whose view sizes, slice
    ends and loss divisors follow the inputs, and whose AdamW bias
    corrections (floats that follow the step count) are inputs; compiled
    with those dims dynamic, it redoes each later step (loss and updated
    weights) as eager did and as the CPU does, at one program per bucket
    and with no recompile for new numbers."""
    cpu, tpu, batch, loss_of = {"llama": _llama_case, "mlp": _mlp_case}[case]()
    opt_cpu, opt_tpu = OPTIMIZERS[optimizer](cpu.parameters()), OPTIMIZERS[optimizer](tpu.parameters())

    def step(n, trace_it):
        b = batch(n)
        want = _step(cpu, opt_cpu, lambda: loss_of(cpu, b))
        with RegionTrace(keep_inputs=trace_it) as trace:
            got = _step(tpu, opt_tpu, lambda: loss_of(tpu, _to(b, "tpu")))
        _close(got, want, 1e-4)
        return trace, got

    step(traced[0], False)  # AdamW's first step makes its state: other ops than the steps after
    gen = generalize(step(traced[0], False)[0], step(traced[1], False)[0])
    assert gen.dynamic, "the changing dim is found"
    extra = [n.name for n in gen.gm.graph.nodes if n.op == "placeholder" and not n.name.startswith("input_")]
    assert extra == (["numbers"] if optimizer == "adamw" else []), extra  # no float passed as a number
    compiled = torch.compile(gen.gm, backend="tpu")
    m = torch_tpu_rs.metrics()
    bucketed, exact, recompiles = m["bucketed_graphs"], dict(m["exact_shape_graphs"]), m["graph_recompiles"]
    programs = 0  # made ready while the compiled step ran (the eager steps beside it compile too)
    buckets = set()
    for n in sizes:
        trace, loss = step(n, True)
        inputs = list(trace.input_values)
        for i, dims in gen.dynamic.items():
            for d in dims:
                torch._dynamo.mark_dynamic(inputs[i], d)
        ready = _programs()
        outs = compiled(*inputs, *gen.numbers_for(trace))
        programs += _programs() - ready
        buckets.add(bucket(n))
        assert len(outs) == 1  # the loss: all else the step made is gone
        _close(outs[0], loss, 1e-5)
        for kept, ref in zip(inputs, trace.inputs):
            if ref() is not None:
                _close(kept, ref(), 1e-5)  # weights updated as eager updated them
    for a, b in zip(cpu.parameters(), tpu.parameters()):
        _close(b, a, 1e-4)
    m = torch_tpu_rs.metrics()
    assert m["bucketed_graphs"] == bucketed + 1 and m["exact_shape_graphs"] == exact
    assert m["graph_recompiles"] == recompiles, m["graph_recompile_reasons"]
    assert programs <= len(buckets), f"{programs} programs for {sorted(buckets)}"


def test_traces_of_other_ops_are_not_generalized_and_unexplained_numbers_are_inputs():
    x = torch.randn(4, 3, device="tpu")
    with RegionTrace() as a:
        kept_a = (x * 2).sum()  # noqa: F841  (alive at the end: an output)
    with RegionTrace() as b:
        kept_b = (x + 2).sum()  # noqa: F841
    with pytest.raises(NotGeneralizable, match="different ops"):
        generalize(a, b)

    def region(n):
        with RegionTrace() as t:
            t.kept = x.sum(0, keepdim=True).expand(n, 3).clone()  # n is no size of x
        return t
    gen = generalize(region(5), region(6))
    numbers = gen.numbers_for(region(7))
    assert numbers == [7]
    out = gen.gm(x, *numbers)
    assert_same(out[0], x.cpu().sum(0, keepdim=True).expand(7, 3))


def test_a_later_trace_must_fit_the_generalized_graph():
    """A number that was the same in both traces is a constant; a third
    trace where it differs, or where a size expression does not give the
    traced number, is refused instead of run wrongly."""
    def region(n, k):
        x = torch.randn(n, 4, device="tpu")
        with RegionTrace() as t:
            t.kept = x.reshape(n * 4).narrow(0, 0, k).clone()  # alive at the end: an output
        return t
    gen = generalize(region(3, 2), region(5, 2))
    assert gen.numbers_for(region(7, 2)) == []
    with pytest.raises(NotGeneralizable, match="where the graph has 2"):
        gen.numbers_for(region(7, 3))
    with pytest.raises(NotGeneralizable, match="3 where the graph has 8"):
        gen2 = generalize(region(3, 2), region(5, 4))  # k = n - 1 here
        gen2.numbers_for(region(9, 3))
