"""Fused Eager: ops are recorded and run as one program; results equal
Strict Eager, steady-state training compiles nothing, modes switch safely."""
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu_rs
from torch_tpu_rs.models import MLP, Llama, LlamaConfig
from conftest import assert_same


@pytest.fixture
def fused():
    torch_tpu_rs.set_eager_mode("fused")
    yield
    torch_tpu_rs.set_eager_mode("strict")


def in_mode(mode, fn, *args):
    torch_tpu_rs.set_eager_mode(mode)
    try:
        out = fn(*[a.to("tpu") for a in args])
        return out.cpu() if isinstance(out, torch.Tensor) else [o.cpu() for o in out]
    finally:
        torch_tpu_rs.set_eager_mode("strict")


CASES = {
    "chain": lambda x, y: ((x * 2 + y).relu() - y.exp()).sum(dim=1),
    "views_and_inplace": lambda x, y: x.t().clone().mul_(3)[1:].add_(y.t()[1:]),
    "matmul_softmax": lambda x, y: torch.softmax(x @ y.t(), dim=-1),
    "cat_index": lambda x, y: torch.cat([x, y], 0)[torch.tensor([0, 5, 2], device=x.device)],
    "reductions": lambda x, y: [x.amax(0), y.mean(), torch.argmax(x, 1)],
    "random_free_dropout_eval": lambda x, y: torch.nn.functional.dropout(x, 0.5, training=False) + y,
}


@pytest.mark.parametrize("name", list(CASES))
def test_fused_equals_strict(name):
    torch.manual_seed(0)
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    strict = in_mode("strict", CASES[name], x, y)
    fused_out = in_mode("fused", CASES[name], x, y)
    if isinstance(strict, list):
        for a, b in zip(fused_out, strict):
            torch.testing.assert_close(a, b)
    else:
        torch.testing.assert_close(fused_out, strict)


def test_ops_are_deferred_until_a_value_is_needed(fused):
    before = torch_tpu_rs.metrics()
    x = torch.ones(8, 8, device="tpu")
    for _ in range(20):
        x = x * 1.5 + 1
    mid = torch_tpu_rs.metrics()
    assert mid["executions"] == before["executions"]  # nothing ran yet
    value = x.sum().item()  # a value is needed: one flush
    after = torch_tpu_rs.metrics()
    assert after["graph_flushes"] >= before["graph_flushes"] + 1
    assert after["executions"] - before["executions"] <= 3
    y = 1.0
    for _ in range(20):
        y = y * 1.5 + 1
    assert value == pytest.approx(64 * y)


def test_printing_and_synchronize_flush(fused):
    x = torch.arange(6.0, device="tpu").reshape(2, 3) * 2
    assert "10." in repr(x)
    y = x + 1
    torch.tpu.synchronize()
    assert torch_tpu_rs.metrics()["flush_reasons"].get("synchronize", 0) >= 1
    assert y.cpu().tolist() == [[1.0, 3.0, 5.0], [7.0, 9.0, 11.0]]


def test_switching_modes_mid_program():
    torch_tpu_rs.set_eager_mode("fused")
    x = torch.arange(4.0, device="tpu") * 3
    torch_tpu_rs.set_eager_mode("strict")  # the pending graph runs first
    y = x + 1
    torch_tpu_rs.set_eager_mode("fused")
    z = y * x
    torch_tpu_rs.set_eager_mode("debug")
    assert z.cpu().tolist() == [0.0, 12.0, 42.0, 90.0]
    torch_tpu_rs.set_eager_mode("strict")


def train(mode, make_model, batch, steps):
    torch_tpu_rs.set_eager_mode(mode)
    try:
        torch.manual_seed(0)
        model = make_model().to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        losses = []
        for _ in range(steps):
            loss = model.loss(*batch) if hasattr(model, "loss") else torch.nn.functional.cross_entropy(model(batch[0]), batch[1])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, model
    finally:
        torch_tpu_rs.set_eager_mode("strict")


def test_mlp_training_fused_equals_strict():
    g = torch.Generator().manual_seed(3)
    batch = (torch.randn(16, 32, generator=g).to("tpu"), torch.randint(0, 10, (16,), generator=g).to("tpu"))
    strict, _ = train("strict", MLP, batch, 6)
    fused_losses, _ = train("fused", MLP, batch, 6)
    assert fused_losses == pytest.approx(strict, rel=1e-5)


def test_llama_steady_state_compiles_nothing():
    cfg = LlamaConfig(vocab_size=128, dim=32, n_layers=1, n_heads=4, hidden_dim=64, max_seq_len=32)
    tokens = (torch.randint(0, 128, (2, 17), generator=torch.Generator().manual_seed(4)).to("tpu"),)
    strict, _ = train("strict", lambda: Llama(cfg), tokens, 6)
    torch_tpu_rs.set_eager_mode("fused")
    try:
        torch.manual_seed(0)
        model = Llama(cfg).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        losses = []
        per_step = []
        for step in range(6):
            before = torch_tpu_rs.metrics()
            loss = model.loss(*tokens)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            after = torch_tpu_rs.metrics()
            per_step.append((after["compiles"] - before["compiles"], after["executions"] - before["executions"]))
    finally:
        torch_tpu_rs.set_eager_mode("strict")
    assert losses == pytest.approx(strict, rel=1e-5)
    steady = per_step[3:]
    assert all(c == 0 for c, _ in steady), per_step  # zero compiles per step
    assert all(e == steady[0][1] and e <= 3 for _, e in steady), per_step  # few, constant executions


def test_loop_without_syncs_is_cut_every_period(fused):
    """A loop that never reads a value is cut once its graph's tail is the
    loop body twice over (long before the size bound), and from there on
    every period of the op sequence, so later graphs reuse one program."""
    g = torch.Generator().manual_seed(0)
    x_cpu, w_cpu = torch.randn(16, 32, generator=g), torch.randn(32, 32, generator=g) / 6

    def body(y, x, w):
        for _ in range(7):  # 4 ops per layer, 28 per call
            y = torch.tanh(y @ w) * 0.5 + x
        return y

    x, w = x_cpu.to("tpu"), w_cpu.to("tpu")
    y, y_cpu = x.clone(), x_cpu.clone()
    def programs_and_cuts():
        # A new program is compiled, or loaded from a warm disk cache.
        m = torch_tpu_rs.metrics()
        reasons = m["flush_reasons"]
        return m["compiles"] + m["cache_hits_disk"], reasons.get("repeating loop body", 0), reasons.get("graph size bound", 0)

    start_programs, start_cuts, start_bound_cuts = programs_and_cuts()
    programs = []
    for i in range(260):  # ~7300 ops: past the 3000-op bound twice over
        y, y_cpu = body(y, x, w), body(y_cpu, x_cpu, w_cpu)
        if i % 20 == 19:
            programs.append(programs_and_cuts()[0] - start_programs)
    torch.testing.assert_close(y.cpu(), y_cpu, rtol=1e-4, atol=1e-5)
    end_programs, end_cuts, end_bound_cuts = programs_and_cuts()
    assert end_cuts - start_cuts == 1  # found the loop once, then cut by period
    assert end_bound_cuts == start_bound_cuts
    assert programs[-4:] == [programs[-1]] * 4, programs  # steady state: no new program


def test_training_without_a_sync_per_step_is_cut_per_step_not_per_layer(fused):
    """Steps that never sync (and update the weights by hand, so no
    optimizer step ends the graph) put step N+1's forward in the graph of
    step N's update, where the weights are pending values. The loop found
    there must be the whole step: the layers of a deep model look alike by
    ops, but each touches its own weights, pending or not."""
    torch.manual_seed(0)
    model = Llama(LlamaConfig(n_layers=4)).to("tpu")
    batch = torch.randint(0, 256, (2, 17)).to("tpu")
    torch.tpu.synchronize()
    before = torch_tpu_rs.metrics()["graph_flushes"]
    steps = 5
    for _ in range(steps):
        loss = model.loss(batch)
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 1e-3 * p.grad
                p.grad = None
    loss.item()
    # One graph per step at most (plus the read): cut per layer, it was 4 a step.
    assert torch_tpu_rs.metrics()["graph_flushes"] - before <= steps + 1


def test_a_loop_that_reads_no_buffer_is_cut_early_too(fused):
    """`x = x * a + b` reads no weight, but is a loop all the same: it is cut
    after two copies of its body rather than at the size bound (XLA's
    compile time grows faster than linearly with such a chain: 75 s for the
    3000 ops of the bound)."""
    before = torch_tpu_rs.metrics()
    x, x_cpu = torch.ones(4, device="tpu"), torch.ones(4)
    for _ in range(3000):
        x, x_cpu = x * 0.5 + 0.25, x_cpu * 0.5 + 0.25
    torch.testing.assert_close(x.cpu(), x_cpu)
    after = torch_tpu_rs.metrics()
    reasons = {k: v - before["flush_reasons"].get(k, 0) for k, v in after["flush_reasons"].items()}
    assert reasons.get("repeating loop body") == 1 and not reasons.get("graph size bound"), reasons
    assert after["compiles"] + after["cache_hits_disk"] - before["compiles"] - before["cache_hits_disk"] <= 4


def test_env_var_selects_fused():
    code = "import torch_tpu_rs; print(torch_tpu_rs.get_eager_mode())"
    env = {k: v for k, v in os.environ.items() if k != "TPU_LAUNCH_BLOCKING"}
    env["TORCH_TPU_DEFER_AND_FUSE"] = "1"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.strip() == "fused", out.stderr


def test_out_of_range_index_is_raised_in_fused(fused):
    w = torch.randn(5, 3, device="tpu")
    with pytest.raises(IndexError):
        torch.index_select(w, 0, torch.tensor([9], device="tpu")).cpu()
    torch.tpu.synchronize()


def peak_memory(mode):
    torch_tpu_rs.set_eager_mode(mode)
    try:
        cfg = LlamaConfig(vocab_size=128, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_seq_len=32)
        torch.manual_seed(0)
        model = Llama(cfg).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        tokens = torch.randint(0, 128, (2, 17)).to("tpu")
        torch.tpu.synchronize()
        torch.tpu.reset_peak_memory_stats()
        for _ in range(3):
            loss = model.loss(tokens)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()
        torch.tpu.synchronize()
        return torch.tpu.max_memory_allocated()
    finally:
        torch_tpu_rs.set_eager_mode("strict")


def test_fused_peak_memory_within_bound_of_strict():
    # torch.tpu memory counts every live storage, pending ones included.
    strict, fused_peak = peak_memory("strict"), peak_memory("fused")
    assert fused_peak <= 1.3 * strict, (fused_peak, strict)


def test_host_upload_mid_graph_keeps_the_graph_and_the_order():
    """A whole-tensor upload into a storage the pending graph does not write
    does not flush; ops recorded before it see the old data, ops after it the
    new data. An upload into a storage the graph writes runs the graph first."""
    torch_tpu_rs.set_eager_mode("fused")
    try:
        x = torch.arange(4.0).to("tpu")
        torch.tpu.synchronize()
        flushes = torch_tpu_rs.metrics()["graph_flushes"]
        y = x * 2
        x.copy_(torch.full((4,), 10.0))
        z = x + 1
        assert torch_tpu_rs.metrics()["graph_flushes"] == flushes  # nothing ran yet
        assert y.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
        assert z.cpu().tolist() == [11.0] * 4
        w = torch.ones(4).to("tpu")
        w.add_(1)  # pending in the graph
        w.copy_(torch.full((4,), 7.0))
        assert w.cpu().tolist() == [7.0] * 4
    finally:
        torch_tpu_rs.set_eager_mode("strict")


def test_recompile_for_new_sizes_is_named(fused):
    # A graph whose ops repeat with another batch size compiles again (Fused
    # Eager sees concrete sizes only); the metrics say why. (With a warm disk
    # cache the programs load instead of compiling; CI's cache starts empty.)
    key = "new sizes or dtypes for a graph seen before"
    w = torch.randn(16, 8, device="tpu")
    torch.tpu.synchronize()  # randn's graph runs now, not with the first batch
    outs = []
    for i, batch in enumerate((3, 5, 7)):
        if i == 1:
            before = torch_tpu_rs.metrics()
        x = torch.randn(batch, 16)
        y = ((x.to("tpu") @ w).relu() * 0.5 + 1.25).tanh().sum(dim=1)
        outs.append((y.cpu(), ((x @ w.cpu()).relu() * 0.5 + 1.25).tanh().sum(dim=1)))
    for got, want in outs:
        torch.testing.assert_close(got, want)
    after = torch_tpu_rs.metrics()
    compiled = after["compiles"] - before["compiles"]
    assert compiled + after["cache_hits_disk"] - before["cache_hits_disk"] == 2
    assert after["recompile_reasons"].get(key, 0) - before["recompile_reasons"].get(key, 0) == compiled


def test_a_graph_built_for_a_fourth_size_says_once_how_to_avoid_it(fused):
    """Fused Eager compiles per size (it sees concrete sizes only); when one
    graph has been built for 4 sizes it warns, once for that graph, and
    points at torch.compile(dynamic=True), which buckets sizes."""
    import warnings

    w = torch.randn(6, 5, device="tpu")
    torch.tpu.synchronize()
    hints = []
    for batch in (2, 3, 4, 5, 6, 7):
        x = torch.randn(batch, 6)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = (x.to("tpu") @ w).sigmoid().mul(3.0).erf().sum(0).cpu()
        torch.testing.assert_close(got, (x @ w.cpu()).sigmoid().mul(3.0).erf().sum(0))
        hints += [(batch, str(c.message)) for c in caught if "different sizes" in str(c.message)]
    assert len(hints) == 1, hints
    batch, message = hints[0]
    assert batch == 5  # the fourth size
    assert "for 4 different sizes" in message and 'torch.compile(model, backend="tpu", dynamic=True)' in message


def test_slicing_at_a_new_offset_each_step_stops_compiling(fused):
    # View offsets start as program constants (XLA slices statically); a
    # loop that walks its data would compile every step, so once a graph
    # compiles again for new offsets alone, offsets become arguments.
    base_cpu = torch.randn(64)
    base = base_cpu.to("tpu")
    torch.tpu.synchronize()
    late = []
    for i in range(10):
        m = torch_tpu_rs.metrics()
        got = (base[i:i + 8] * 2 + 1).sum().item()
        after = torch_tpu_rs.metrics()
        late.append(after["compiles"] + after["cache_hits_disk"] - m["compiles"] - m["cache_hits_disk"])
        assert got == pytest.approx((base_cpu[i:i + 8] * 2 + 1).sum().item(), rel=1e-5)
    assert sum(late[4:]) == 0, late


def test_threads_recording_at_once_get_their_own_results(fused):
    """Threads share the pending graphs (nn.DataParallel runs replicas in
    threads); each must get its own results, and tensors freed while another
    thread flushes must not be written (that was a use-after-free)."""
    import threading

    devices = min(torch.tpu.device_count(), 4)
    errors = []

    def work(i):
        try:
            dev = torch.device("tpu", i % devices)
            g = torch.Generator().manual_seed(i)
            for _ in range(30):
                a = torch.randn(16, 8, generator=g)
                t = a.to(dev)
                for _ in range(5):
                    t = torch.tanh(t * 1.5 + 0.25)  # intermediates are freed while others flush
                    a = torch.tanh(a * 1.5 + 0.25)
                torch.testing.assert_close(t.cpu(), a, rtol=1e-5, atol=1e-6)
        except Exception as e:  # reported below, from the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
