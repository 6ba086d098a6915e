"""torch.compile(backend="tpu"): compiled training matches eager; graph
breaks, recompiles on dtype changes and guards on captured constants."""
import pytest
import torch

import torch_tpu_rs
from torch_tpu_rs.models import MLP, Llama, LlamaConfig


def train(device, make_model, batch, loss_fn, make_opt, compiled, steps=5):
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = make_model().to(device)
    opt = make_opt(model.parameters())
    batch = [b.to(device) for b in batch]

    def step(*b):
        loss = loss_fn(model, *b)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    if compiled:
        step = torch.compile(step, backend="tpu")
    return [step(*batch).item() for _ in range(steps)]


def mlp_case():
    g = torch.Generator().manual_seed(1)
    batch = (torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g))
    return MLP, batch, lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y)


def llama_case():
    cfg = LlamaConfig(vocab_size=128, dim=32, n_layers=1, n_heads=4, hidden_dim=64, max_seq_len=32)
    batch = (torch.randint(0, 128, (2, 17), generator=torch.Generator().manual_seed(2)),)
    return (lambda: Llama(cfg)), batch, lambda m, t: m.loss(t)


OPTS = {
    # Stock optimizers with default arguments: AdamW keeps its step counter on the CPU.
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-3),
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05),
}


@pytest.mark.parametrize("opt", list(OPTS))
@pytest.mark.parametrize("case", ["mlp", "llama"])
def test_compiled_training_matches_eager(case, opt):
    make_model, batch, loss_fn = mlp_case() if case == "mlp" else llama_case()
    eager = train("tpu", make_model, batch, loss_fn, OPTS[opt], compiled=False)
    compiled = train("tpu", make_model, batch, loss_fn, OPTS[opt], compiled=True)
    cpu = train("cpu", make_model, batch, loss_fn, OPTS[opt], compiled=False)
    assert compiled == pytest.approx(eager, rel=1e-4)
    assert compiled == pytest.approx(cpu, rel=1e-4)
    assert compiled[-1] < compiled[0]


def test_each_graph_is_one_program():
    torch._dynamo.reset()

    @torch.compile(backend="tpu")
    def f(x, y):
        return ((x @ y).relu() * 2 + 1).sum(dim=0)

    x, y = torch.randn(8, 8, device="tpu"), torch.randn(8, 8, device="tpu")
    f(x, y)
    before = torch_tpu_rs.metrics()["executions"]
    out = f(x, y)
    assert torch_tpu_rs.metrics()["executions"] - before == 1
    torch.testing.assert_close(out.cpu(), ((x.cpu() @ y.cpu()).relu() * 2 + 1).sum(dim=0))


def test_graph_break_falls_back_to_eager():
    torch._dynamo.reset()

    def f(x):
        y = x * 2
        print("graph break here")  # Dynamo splits the function
        return y.sin() + 1

    breaks = torch_tpu_rs.metrics()["graph_breaks"]
    x = torch.randn(5)
    out = torch.compile(f, backend="tpu")(x.to("tpu"))
    torch.testing.assert_close(out.cpu(), f(x))
    assert torch_tpu_rs.metrics()["graph_breaks"] > breaks


def test_recompiles_on_dtype_change():
    torch._dynamo.reset()
    f = torch.compile(lambda x: x * 3 + 1, backend="tpu")
    graphs = torch_tpu_rs.metrics()["compiled_graphs"]
    f(torch.ones(4, device="tpu"))
    f(torch.ones(4, device="tpu"))
    assert torch_tpu_rs.metrics()["compiled_graphs"] == graphs + 1
    recompiles = torch_tpu_rs.metrics()["graph_recompiles"]
    out = f(torch.ones(4, dtype=torch.float64, device="tpu"))
    assert out.dtype == torch.float64 and out.cpu().tolist() == [4.0] * 4
    m = torch_tpu_rs.metrics()
    assert m["compiled_graphs"] == graphs + 2
    assert m["graph_recompiles"] == recompiles + 1
    assert any("dtype mismatch" in r for r in m["graph_recompile_reasons"]), m["graph_recompile_reasons"]
    assert "recompiled: " in torch_tpu_rs.metrics_report()


def test_recompile_counts_outlive_dynamos_bounded_history():
    # Dynamo keeps only its last 64 compilation records; counting from them
    # alone lost recompiles after a long run (or a long test session).
    torch._dynamo.reset()
    f = torch.compile(lambda x: x - 1, backend="tpu")
    f(torch.ones(2, device="tpu"))
    before = torch_tpu_rs.metrics()["graph_recompiles"]
    f(torch.ones(2, dtype=torch.float64, device="tpu"))
    assert torch_tpu_rs.metrics()["graph_recompiles"] == before + 1
    torch._dynamo.utils.clear_compilation_metrics()
    assert torch_tpu_rs.metrics()["graph_recompiles"] == before + 1


def test_compiled_graphs_for_many_sizes_do_not_get_fused_eagers_hint():
    """Fused Eager's 'same graph for 4 sizes' hint is about Fused Eager;
    torch.compile graphs pass through the same recorder, but there Dynamo
    decides which sizes get a program (here dynamic=False asks for one per
    size), so the hint would be wrong."""
    import warnings

    torch._dynamo.reset()
    f = torch.compile(lambda a, w: (a @ w).sigmoid().mul(3.0).erf(), backend="tpu", dynamic=False)
    w = torch.randn(6, 5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for batch in (2, 3, 4, 5, 6):
            x = torch.randn(batch, 6)
            torch.testing.assert_close(f(x.to("tpu"), w.to("tpu")).cpu(), (x @ w).sigmoid().mul(3.0).erf())
    assert not [str(c.message) for c in caught if "different sizes" in str(c.message)]


def test_one_hot_range_check_under_compile():
    # one_hot's decomposition checks its classes with _assert_async.msg.
    torch._dynamo.reset()
    f = torch.compile(lambda i: torch.nn.functional.one_hot(i, 5), backend="tpu")
    i = torch.tensor([0, 3, 4])
    assert torch.equal(f(i.to("tpu")).cpu(), torch.nn.functional.one_hot(i, 5))
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        f(torch.tensor([0, 7], device="tpu")).cpu()


def test_guard_on_captured_python_constant():
    torch._dynamo.reset()
    scale = {"value": 2.0}

    @torch.compile(backend="tpu")
    def f(x):
        return x * scale["value"]

    x = torch.ones(3, device="tpu")
    assert f(x).cpu().tolist() == [2.0] * 3
    scale["value"] = 5.0
    assert f(x).cpu().tolist() == [5.0] * 3


def test_default_backend_compiles_tpu_graphs_with_tpu_backend():
    """torch.compile(model) without a backend means Inductor, which has no
    code generator for tpu here (it maps "tpu" to Pallas, which needs JAX):
    a script written for CUDA still runs, its tpu graphs going to the tpu
    backend, with one warning that says so."""
    import warnings

    from torch_tpu_rs import _after_dynamo

    torch._dynamo.reset()
    _after_dynamo._told = False
    graphs = torch_tpu_rs.metrics()["compiled_graphs"]
    make, batch, loss_fn = mlp_case()
    eager = train("cpu", make, batch, loss_fn, OPTS["adamw"], compiled=False, steps=3)

    torch.manual_seed(0)
    model = make().to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = (b.to("tpu") for b in batch)

    @torch.compile  # no backend: Inductor by default
    def step(x, y):
        loss = loss_fn(model, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [step(x, y).item() for _ in range(3)]
    assert losses == pytest.approx(eager, rel=1e-4)
    assert torch_tpu_rs.metrics()["compiled_graphs"] > graphs
    told = [w for w in caught if "backend='tpu'" in str(w.message)]
    assert len(told) == 1, [str(w.message) for w in caught]


@pytest.mark.parametrize("reentrant", [False, True])
def test_activation_checkpointing_with_dropout_recomputes_the_same_mask(reentrant):
    """The partitioner saves the generator state before a checkpointed
    region's dropout and recomputes it with that state in the backward: the
    compiled steps must equal eager ones, forward and gradients."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 2)).to("tpu")
    x0 = torch.randn(8, 4)

    def steps(fn):
        torch.manual_seed(1)
        out = []
        for _ in range(3):
            x = x0.to("tpu").requires_grad_()
            y = fn(x)
            y.sum().backward()
            out.append((y.detach().cpu(), x.grad.cpu()))
        return out

    eager = steps(model)
    compiled = steps(torch.compile(
        lambda x: torch.utils.checkpoint.checkpoint(model, x, use_reentrant=reentrant), backend="tpu"))
    for (ey, eg), (cy, cg) in zip(eager, compiled):
        assert torch.allclose(cy, ey, rtol=1e-5, atol=1e-6)
        assert torch.allclose(cg, eg, rtol=1e-5, atol=1e-6)
    # Distinct masks per step: the generator advanced.
    assert not torch.equal(eager[0][1], eager[1][1])


def test_device_queries_fold_under_fullgraph():
    @torch.compile(backend="tpu", fullgraph=True)
    def f(x):
        if torch.tpu.is_available() and torch.tpu.is_bf16_supported() and torch.tpu.is_initialized():
            return x * torch.tpu.device_count()
        return x

    x = torch.arange(3.0, device="tpu")
    assert f(x).cpu().tolist() == [0.0, torch.tpu.device_count(), 2.0 * torch.tpu.device_count()]
