"""Compiled graphs are recorded once and replayed (python/torch_tpu_rs/_replay.py,
crates/engine/src/replay.rs): replays match the CPU for in-place updates,
views, CPU scalars, random numbers and changed input layouts, and a graph
that cannot be replayed is recorded every call, still correct."""
import pytest
import torch

import torch_tpu_rs
from torch_tpu_rs.models import Llama, LlamaConfig


def deltas(before, keys=("graph_flushes", "graph_replays", "executions", "compiles")):
    now = torch_tpu_rs.metrics()
    return {k: now[k] - before[k] for k in keys}


def test_steady_state_training_only_replays():
    torch._dynamo.reset()
    cfg = LlamaConfig(vocab_size=64, dim=32, n_layers=1, n_heads=4, hidden_dim=64, max_seq_len=32)
    tokens = torch.randint(0, 64, (2, 17), generator=torch.Generator().manual_seed(3))
    losses = {}
    for device in ("cpu", "tpu"):
        torch.manual_seed(0)
        model = Llama(cfg).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)  # step counters on the CPU
        t = tokens.to(device)

        def step():
            loss = model.loss(t)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        if device == "tpu":
            step = torch.compile(step, backend="tpu")
        unreplayable = dict(torch_tpu_rs.metrics()["unreplayable_graphs"])
        out = [step().item() for _ in range(2)]
        before = torch_tpu_rs.metrics()
        out += [step().item() for _ in range(3)]
        losses[device] = out
    d = deltas(before)
    # Forward, backward and optimizer graphs: each call replays, none records.
    assert d["graph_flushes"] == 0 and d["compiles"] == 0
    # (Eager ops between Dynamo's graphs, such as backward's ones_like, add executions.)
    assert d["graph_replays"] == 9
    assert torch_tpu_rs.metrics()["unreplayable_graphs"] == unreplayable
    assert losses["tpu"] == pytest.approx(losses["cpu"], rel=1e-4)


def test_replay_updates_inputs_and_returns_views():
    torch._dynamo.reset()

    def f(x, acc, n):
        acc.add_(x * n)  # an input updated in place, scaled by a CPU scalar
        n.add_(1)  # CPU state, as AdamW's step counter
        flat = (x * 2).reshape(-1)
        return x.t(), flat[3:], acc[1:], (acc * x).sum()

    g = torch.compile(f, backend="tpu")
    x = torch.randn(4, 3)
    acc_cpu, acc_tpu = torch.zeros(4, 3), torch.zeros(4, 3, device="tpu")
    n_cpu, n_tpu = torch.tensor(1.0), torch.tensor(1.0)
    before = torch_tpu_rs.metrics()
    for i in range(4):
        xi = x + i
        want = f(xi, acc_cpu, n_cpu)
        got = g(xi.to("tpu"), acc_tpu, n_tpu)
        for w, o in zip(want, got):
            assert o.device.type == "tpu" and o.shape == w.shape and o.stride() == w.stride()
            torch.testing.assert_close(o.cpu(), w)
        torch.testing.assert_close(acc_tpu.cpu(), acc_cpu)
        assert n_tpu.item() == n_cpu.item() == i + 2
    assert deltas(before)["graph_replays"] == 3
    # The view of the updated input shares its storage, as in eager.
    out = g(x.to("tpu"), acc_tpu, n_tpu)
    assert out[2].untyped_storage().data_ptr() == acc_tpu.untyped_storage().data_ptr()


def test_replay_draws_fresh_random_numbers():
    torch._dynamo.reset()
    g = torch.compile(lambda x: torch.nn.functional.dropout(x, 0.5, training=True), backend="tpu")
    x = torch.ones(64, device="tpu")
    runs = []
    for _ in range(2):
        torch.manual_seed(7)
        runs.append([g(x).cpu() for _ in range(3)])
    # The first run records then replays; the second only replays: same draws.
    for a, b in zip(*runs):
        torch.testing.assert_close(a, b)
    assert not torch.equal(runs[0][0], runs[0][1])
    assert set(runs[0][1].unique().tolist()) <= {0.0, 2.0}


def test_changed_input_layout_records_again():
    torch._dynamo.reset()
    g = torch.compile(lambda v: v * 3 + 1, backend="tpu")
    base = torch.arange(12.0)
    base_tpu = base.to("tpu")
    # Same shape and strides, another offset into the same storage: the
    # recorded program read offset 1, so this call must not replay it.
    for lo in (1, 1, 0, 2):
        torch.testing.assert_close(g(base_tpu[lo:lo + 8]).cpu(), base[lo:lo + 8] * 3 + 1)
    # A storage of another size.
    other = torch.arange(20.0)
    torch.testing.assert_close(g(other.to("tpu")[1:9]).cpu(), other[1:9] * 3 + 1)


def test_cpu_scalar_math_runs_in_the_device_program(monkeypatch):
    """AdamW-style bias corrections from a CPU step counter: the counter is
    updated on the CPU, the math on it joins the device program (one
    uploaded value, not one per result), and results match the CPU."""
    from torch_tpu_rs import _replay

    splits = []
    split_cpu = _replay._split_cpu
    monkeypatch.setattr(_replay, "_split_cpu", lambda gm: splits.append(split_cpu(gm)) or splits[-1])
    torch._dynamo.reset()

    def f(p, step):
        step += 1
        c1 = 1 - 0.9 ** step
        c2 = (1 - 0.999 ** step).sqrt()
        return p * c2 / c1

    g = torch.compile(f, backend="tpu")
    p = torch.randn(6)
    steps = {"cpu": torch.tensor(0.0), "tpu": torch.tensor(0.0)}
    for _ in range(4):  # recorded once, then replayed
        want = f(p, steps["cpu"])
        got = g(p.to("tpu"), steps["tpu"])
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=0)
        assert steps["tpu"].device.type == "cpu" and steps["tpu"].item() == steps["cpu"].item()
    split = next(s for s in splits if isinstance(s, _replay._Split) and s.cpu_gm is not None)
    cpu_ops = {n.target for n in split.cpu_gm.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.pow.Scalar not in cpu_ops and torch.ops.aten.sqrt.default not in cpu_ops, cpu_ops
    assert split.n_boundary == 1  # only the updated counter is uploaded


def test_graph_that_cannot_replay_is_recorded_each_call():
    torch._dynamo.reset()

    def f(x):
        s = x.sum().cpu()  # a device value feeds CPU work inside the graph
        return x * (s + 1).to(x.device)

    g = torch.compile(f, backend="tpu")
    for i in range(3):
        x = torch.randn(5) + i
        torch.testing.assert_close(g(x.to("tpu")).cpu(), f(x))
    reasons = torch_tpu_rs.metrics()["unreplayable_graphs"]
    assert any("CPU value from device values" in r for r in reasons), reasons


def test_dead_graphs_release_their_plans():
    import gc

    x = torch.randn(8, device="tpu")
    counts = []
    for i in range(4):
        torch._dynamo.reset()
        g = torch.compile(lambda v: v * 2 + i, backend="tpu")
        g(x)
        torch.testing.assert_close(g(x).cpu(), x.cpu() * 2 + i)
        del g
        gc.collect()
        counts.append(torch_tpu_rs.metrics()["replay_plans"])
    # A plan holds its executable: graphs Dynamo dropped must not keep theirs.
    assert counts[-1] <= counts[0], counts


def test_replayed_index_check_raises_at_sync():
    torch._dynamo.reset()
    g = torch.compile(lambda x, i: x[i] * 2, backend="tpu")
    x = torch.arange(5.0, device="tpu")
    g(x, torch.tensor([1, 2], device="tpu"))
    before = torch_tpu_rs.metrics()["graph_replays"]
    torch.testing.assert_close(g(x, torch.tensor([3, -1], device="tpu")).cpu(), torch.tensor([6.0, 8.0]))
    with pytest.raises(IndexError, match="index out of range"):
        g(x, torch.tensor([3, 7], device="tpu")).cpu()
    assert torch_tpu_rs.metrics()["graph_replays"] - before == 2
    # The device keeps working.
    torch.testing.assert_close(g(x, torch.tensor([0, 4], device="tpu")).cpu(), torch.tensor([0.0, 8.0]))


def test_threads_calling_one_compiled_graph_get_their_own_results():
    torch._dynamo.reset()

    def f(x, w):
        return torch.relu(x @ w).sum(0) * 2

    g = torch.compile(f, backend="tpu")
    w = torch.randn(8, 8)
    wt = w.to("tpu")
    torch._dynamo.mark_static(wt)

    inputs = [[torch.randn(4, 8, generator=torch.Generator().manual_seed(10 * t + i)) for i in range(15)] for t in range(2)]
    results, errors = [[], []], []

    def worker(t):
        try:
            for x in inputs[t]:
                results[t].append(g(x.to("tpu"), wt).cpu())
        except Exception as e:  # surfaced below: a thread's exception is otherwise lost
            errors.append(e)

    import sys
    import threading

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(2)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # hand the GIL over often, so the calls interleave
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors
    for t in range(2):
        assert len(results[t]) == len(inputs[t])
        for x, got in zip(inputs[t], results[t]):
            torch.testing.assert_close(got, f(x, w))
