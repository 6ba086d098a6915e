"""Fused Eager's shape buckets (`_fused_buckets.py`): a training step whose
sequence length or batch size changes compiles once per power-of-two
bucket, not once per size, and every loss and weight still equals
PyTorch on the CPU. Regions that cannot be bucketed run at their exact
sizes, counted with the reason."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

import torch_tpu_rs
from torch_tpu_rs._bucketing import bucket
from torch_tpu_rs.models import MLP
from torch_tpu_rs.models.llama import Llama, LlamaConfig


@pytest.fixture(autouse=True)
def _fused():
    torch._dynamo.reset()
    torch_tpu_rs.set_eager_mode("fused")
    yield
    torch_tpu_rs.set_eager_mode("strict")
    torch._dynamo.reset()


def _programs() -> int:
    """Programs made ready by XLA: compiled now or loaded from the disk cache."""
    m = torch_tpu_rs.metrics()
    return m["compiles"] + m["cache_hits_disk"]


def _close(a, b, tol=1e-5):
    torch.testing.assert_close(a.detach().cpu(), b.detach().cpu(), rtol=tol, atol=tol)


def _train_beside_cpu(cpu, tpu, make_opt, batch, loss_of, sizes):
    """Trains `cpu` and `tpu` on the same batches, comparing every loss;
    returns the programs made ready per step."""
    opt_cpu, opt_tpu = make_opt(cpu.parameters()), make_opt(tpu.parameters())
    made = []
    for n in sizes:
        b = batch(n)
        want = loss_of(cpu, b)
        opt_cpu.zero_grad()
        want.backward()
        opt_cpu.step()
        before = _programs()
        got = loss_of(tpu, tuple(t.to("tpu") for t in b))
        opt_tpu.zero_grad()
        got.backward()
        opt_tpu.step()
        _close(got, want, 1e-4)  # a host read: the step has run
        made.append(_programs() - before)
    for a, b in zip(cpu.parameters(), tpu.parameters()):
        _close(b, a, 1e-4)
    return made


def _llama():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, dim=32, n_layers=1, n_heads=2, hidden_dim=48, max_seq_len=64)
    cpu, tpu = Llama(cfg), Llama(cfg).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    return cpu, tpu, (lambda n: (torch.randint(0, cfg.vocab_size, (2, n)),)), (lambda m, b: m.loss(b[0]))


def _mlp(depth: int = 2):
    """An MLP; tests that count sizes take a depth of their own (its own op
    sequence), since the engine remembers the sizes each sequence ran at."""
    torch.manual_seed(0)
    cpu, tpu = MLP(16, 32, 4, depth=depth), MLP(16, 32, 4, depth=depth).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    batch = lambda n: (torch.randn(n, 16), torch.randint(0, 4, (n,)))  # noqa: E731
    return cpu, tpu, batch, (lambda m, b: F.cross_entropy(m(b[0]), b[1]))


@pytest.mark.parametrize("case,warmup,sizes,optimizer", [
    # the sequence length changes (AdamW: its bias corrections change every step too)
    ("llama", [9, 9, 13, 10, 11, 14, 15], [17, 20, 31, 40, 64, 12, 33, 50, 24, 3], "adamw"),
    ("mlp", [8, 8, 6, 5, 7, 10, 12], [3, 16, 17, 30, 9, 31, 4], "sgd"),  # the batch size changes
])
def test_training_over_changing_sizes_compiles_once_per_bucket(case, warmup, sizes, optimizer):
    """After a few steps (the first, whose optimizer makes its state; four
    sizes of the same step, after which tracing starts; two traced sizes),
    each new size runs the bucketed program of its power-of-two bucket: a
    new bucket compiles once, a known one not at all."""
    cpu, tpu, batch, loss_of = {"llama": _llama, "mlp": _mlp}[case]()
    make_opt = {"adamw": lambda p: torch.optim.AdamW(p, lr=1e-2),
                "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)}[optimizer]
    runs = torch_tpu_rs.metrics()["bucketed_regions"]
    made = _train_beside_cpu(cpu, tpu, make_opt, batch, loss_of, warmup + sizes)
    m = torch_tpu_rs.metrics()
    assert m["fused_bucket_refusals"] == {}
    assert m["bucketed_regions"] - runs >= len(sizes)
    after = made[len(warmup):]
    seen = {bucket(warmup[-1])}  # the first step run bucketed
    for n, programs in zip(sizes, after):
        new = bucket(n) not in seen
        seen.add(bucket(n))
        assert programs <= (1 if new else 0), f"size {n} (bucket {bucket(n)}) made {programs} programs: {made}"


def test_a_region_that_no_longer_fits_runs_at_its_exact_sizes():
    """A number that was the same at two sizes is a constant of the bucketed
    program (here a slice's end); a later step where it changes is refused
    and runs as before, one program for its sizes, with the same results."""
    torch.manual_seed(0)
    cpu, tpu = MLP(16, 32, 4), MLP(16, 32, 4).to("tpu")
    tpu.load_state_dict(cpu.state_dict())
    calls = []

    def loss_of(m, b):
        calls.append(None)
        k = 3 if len(calls) <= 16 else 2  # 8 steps (a CPU and a tpu call each), then 2
        return F.cross_entropy(m(b[0]), b[1])[None].expand(4)[:k].sum()

    runs = torch_tpu_rs.metrics()["bucketed_regions"]
    batch = lambda n: (torch.randn(n, 16), torch.randint(0, 4, (n,)))  # noqa: E731
    made = _train_beside_cpu(cpu, tpu, lambda p: torch.optim.SGD(p, lr=0.1), batch, loss_of,
                             [8, 8, 6, 5, 7, 10, 12, 9, 11])
    refusals = torch_tpu_rs.metrics()["fused_bucket_refusals"]
    assert any("2 where the graph has 3" in reason for reason in refusals), refusals
    assert torch_tpu_rs.metrics()["bucketed_regions"] == runs + 2  # 12 and 9, not 11
    assert made[-1] >= 1  # its own program


def test_without_the_hook_every_size_compiles():
    """`TORCH_TPU_FUSED_BUCKETS=0` leaves the hook out: each new size is a
    new program, as before."""
    torch_tpu_rs._C.set_bucket_hook(None)
    try:
        cpu, tpu, batch, loss_of = _mlp()
        runs = torch_tpu_rs.metrics()["bucketed_regions"]
        made = _train_beside_cpu(cpu, tpu, lambda p: torch.optim.SGD(p, lr=0.1), batch, loss_of,
                                 [8, 8, 21, 22, 23, 26])
        assert torch_tpu_rs.metrics()["bucketed_regions"] == runs
        assert all(p >= 1 for p in made[2:]), made  # the first two: a new graph, then its repeat
    finally:
        torch_tpu_rs._C.set_bucket_hook(torch_tpu_rs._bucket_hook)


def _tracing() -> bool:
    import torch_tpu_rs._fused_buckets as buckets

    return buckets._buckets.trace is not None


def test_a_last_partial_batch_does_not_start_tracing():
    """Tracing costs every op some microseconds, so one odd size (an
    epoch's last, partial batch) does not start it: only a fourth size of
    the same step does."""
    cpu, tpu, batch, loss_of = _mlp(depth=4)
    _train_beside_cpu(cpu, tpu, lambda p: torch.optim.SGD(p, lr=0.1), batch, loss_of, [8, 8, 8, 5, 8, 8, 5, 8])
    assert not _tracing()


def test_tracing_stops_once_sizes_settle():
    """A few sizes over and over: once their exact programs are compiled,
    a long run of regions needs no bucket, and tracing stops."""
    import torch_tpu_rs._fused_buckets as buckets

    cpu, tpu, batch, loss_of = _mlp(depth=3)
    opt = lambda p: torch.optim.SGD(p, lr=0.1)  # noqa: E731
    _train_beside_cpu(cpu, tpu, opt, batch, loss_of, [8, 8, 6, 5, 7])
    assert _tracing()
    _train_beside_cpu(cpu, tpu, opt, batch, loss_of, [8, 6, 5, 7] * (buckets.SETTLED_REGIONS // 4 + 2))
    assert not _tracing()


def test_leaving_fused_eager_stops_tracing():
    """Tracing is Fused Eager's: its dispatch mode must not stay on in
    Strict Eager or under torch.compile."""
    cpu, tpu, batch, loss_of = _mlp(depth=5)
    _train_beside_cpu(cpu, tpu, lambda p: torch.optim.SGD(p, lr=0.1), batch, loss_of, [8, 8, 6, 5, 7])
    assert _tracing() and torch._C._len_torch_dispatch_stack() == 1
    torch_tpu_rs.set_eager_mode("strict")
    assert not _tracing() and torch._C._len_torch_dispatch_stack() == 0
