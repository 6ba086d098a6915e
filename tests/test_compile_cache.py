"""The compilation cache on disk (TORCH_TPU_CACHE_DIR): a second process
with the same cache directory loads every program instead of compiling it,
gets the same results, and recompiles entries that were corrupted.

Every engine here runs in a subprocess with its own TORCH_TPU_CACHE_DIR, so
the tests never touch the real ~/.cache."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

# A small training step: matmuls, activations, a loss, backward and an
# optimizer step (a few dozen distinct programs).
WORKLOAD = r"""
import json, torch, torch_tpu_rs
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).to("tpu")
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(5, 8).to("tpu")
y = torch.tensor([0, 1, 2, 3, 0]).to("tpu")
losses = []
for _ in range(2):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
m = torch_tpu_rs.metrics()
print("RESULT", json.dumps({"losses": losses, "weight": model[0].weight.cpu().tolist(),
                  **{k: m[k] for k in ("compiles", "cache_hits_disk", "cache_disk_corrupt", "disk_cache_mode")}}))
"""


def run_workload(cache_dir, **env_overrides) -> dict:
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(cache_dir), **env_overrides)
    for k in ("TORCH_TPU_DUMP_IR", "TORCH_TPU_METRICS", "TORCH_TPU_CPU_FALLBACK"):
        env.pop(k, None)
    p = subprocess.run([sys.executable, "-c", WORKLOAD], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    line = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def valid_entry(data: bytes) -> bool:
    """The entry format: magic, u32 version, 32-byte key, u64 payload length,
    payload, SHA-256 of everything before it."""
    if len(data) < 84 or data[:8] != b"TPURSXC\n":
        return False
    n = int.from_bytes(data[44:52], "little")
    return len(data) == 84 + n and hashlib.sha256(data[:-32]).digest() == data[-32:]


def entries(cache_dir) -> list:
    return sorted(f for f in os.listdir(cache_dir) if f.endswith(".pjrtexe"))


@pytest.fixture(scope="module")
def cold(tmp_path_factory):
    """A first run in an empty cache directory."""
    d = tmp_path_factory.mktemp("compile_cache")
    return d, run_workload(d)


def test_cold_run_compiles_and_stores(cold):
    d, first = cold
    assert first["disk_cache_mode"] == "executable"
    assert first["compiles"] > 0
    assert first["cache_hits_disk"] == 0
    assert len(entries(d)) == first["compiles"]
    assert all(valid_entry((d / f).read_bytes()) for f in entries(d))
    # Nothing but whole entries is left in the directory (no temp files).
    assert sorted(os.listdir(d)) == entries(d)


def test_warm_run_skips_compiling(cold):
    d, first = cold
    second = run_workload(d)
    assert second["compiles"] == 0
    assert second["cache_hits_disk"] == first["compiles"]
    assert second["cache_disk_corrupt"] == 0
    assert second["losses"] == first["losses"]
    assert second["weight"] == first["weight"]


def test_corrupt_entries_are_recompiled(cold, tmp_path):
    d, first = cold
    # A copy of the warm directory with three entries damaged three ways.
    for f in os.listdir(d):
        (tmp_path / f).write_bytes((d / f).read_bytes())
    names = entries(tmp_path)
    assert len(names) >= 3
    damaged = {names[0]: b"garbage", names[1]: (tmp_path / names[1]).read_bytes()[:-10]}
    flipped = bytearray((tmp_path / names[2]).read_bytes())
    flipped[len(flipped) // 2] ^= 1
    damaged[names[2]] = bytes(flipped)
    for name, data in damaged.items():
        (tmp_path / name).write_bytes(data)
    third = run_workload(tmp_path)
    assert third["cache_disk_corrupt"] == 3
    assert third["compiles"] == 3
    assert third["cache_hits_disk"] == first["compiles"] - 3
    assert third["losses"] == first["losses"]
    # The recompiled programs were stored again, whole.
    for name, data in damaged.items():
        now = (tmp_path / name).read_bytes()
        assert now != data and valid_entry(now)


def test_off_disables_the_cache(tmp_path):
    out = run_workload("off", HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert out["disk_cache_mode"] == "off"
    assert out["compiles"] > 0 and out["cache_hits_disk"] == 0
    assert list(tmp_path.iterdir()) == []


def test_in_memory_cache_is_bounded_and_evicted_programs_still_run(tmp_path):
    """Each XLA executable holds memory mappings (a process has at most
    vm.max_map_count): the in-memory cache keeps the most recently used
    TORCH_TPU_MAX_CACHED_PROGRAMS programs; evicted ones come back from disk."""
    code = r"""
import json, torch, torch_tpu_rs
def maps():
    return sum(1 for _ in open("/proc/self/maps"))
start = maps()
for rep in range(2):
    for n in range(1, 61):
        assert (torch.ones(n, device="tpu") * 2).cpu().sum().item() == 2 * n
try:
    torch.ones(2, device="tpu") + torch.ones(3, device="tpu")
    raised = False
except RuntimeError:
    raised = True
m = torch_tpu_rs.metrics()
print(json.dumps({"cached": m["cached_programs"], "evicted": m["evicted_programs"],
                  "disk": m["cache_hits_disk"], "maps": maps() - start, "raised": raised}))
"""
    env = dict(os.environ, TORCH_TPU_MAX_CACHED_PROGRAMS="16", TORCH_TPU_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["cached"] <= 16 and r["evicted"] > 0
    assert r["disk"] > 0  # the second round reloads evicted programs from disk
    assert r["raised"]
    assert r["maps"] < 3 * 120  # far below one set of mappings per program ever compiled


def test_in_memory_cache_keeps_the_process_within_its_memory_mappings(tmp_path):
    """A fused graph's executable holds tens of mappings, so a count bound
    alone let a long Fused Eager run pass vm.max_map_count, and XLA's JIT
    then killed the process ("LLVM compilation error: Cannot allocate
    memory"). The cache also evicts when the process's mappings pass a
    budget (60% of the limit; TORCH_TPU_MAX_MAPPINGS here, to stay short)."""
    code = r"""
import json, os, torch, torch_tpu_rs
torch_tpu_rs.set_eager_mode("fused")
def maps():
    return sum(1 for _ in open("/proc/self/maps"))
budget = maps() + 300
os.environ["TORCH_TPU_MAX_MAPPINGS"] = str(budget)  # read at the first check
peak = 0
for rep in range(2):
    for n in range(1, 25):
        x = torch.ones(n, 4, device="tpu")
        y = ((x @ x.T).softmax(-1) * 2 + 1).sum(0).tanh()  # one fused graph per n
        y = y * n  # each of the n columns sums n rows of 2/n + 1, then tanh
        got, want = y.sum().item(), n * n * torch.tanh(torch.tensor(n + 2.0)).item()
        assert abs(got - want) < 1e-3 * n * n, (rep, n, got, want, torch_tpu_rs.metrics()["evicted_programs"])
        peak = max(peak, maps())
m = torch_tpu_rs.metrics()
print(json.dumps({"evicted": m["evicted_programs"], "cached": m["cached_programs"], "disk": m["cache_hits_disk"],
                  "peak": peak, "budget": budget}))
"""
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path))
    env.pop("TORCH_TPU_MAX_MAPPINGS", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["evicted"] > 0 and r["cached"] < 24
    assert r["disk"] > 0  # the second round reloads evicted graphs from disk
    # Checked every 8 compiles: the overshoot is a few programs' mappings.
    assert r["peak"] < r["budget"] + 600, r
