"""Eager-mode benchmark: prints one JSON object.

tiny_op_us: median µs per `c = c + b` on 4 floats (N ops, synced at the
end), for tpu (Strict Eager) and for PyTorch CPU eager. mlp/llama: training
steps/s on tpu in Strict and Fused Eager and on PyTorch CPU eager, measured
in this same run, round-robin (bench/rounds.py): medians over rounds, and
ratios as medians of per-round ratios. startup_to_first_step_s: from `import
torch` to the end of the first training step in a fresh process, with an
empty and then a warm compilation cache; `from_import_torch_tpu_rs` starts
the clock after `import torch` and torch._dynamo, which torch.optim imports
on any device (what is left is the part this project controls).
fused_llama_changing_lengths: a Fused Eager Llama training step over 40
sequence lengths (as bench/compile.py's llama_changing_lengths), the
programs it needed against the number of lengths.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

import torch_tpu_rs
from rounds import interleaved, median, paired_ratio
from torch_tpu_rs.models import MLP, Llama, LlamaConfig


def sync(device: str) -> None:
    if device == "tpu":
        torch.tpu.synchronize()


class TinyOp:
    """`c = c + b` on 4 floats, `n` ops per sample, synced at the end."""

    def __init__(self, device: str, n: int):
        self.device, self.n = device, n
        self.b = torch.ones(4, device=device)
        self.c = torch.zeros(4, device=device)
        for _ in range(50):  # warm up (compile once)
            self.c = self.c + self.b
        sync(device)

    def __call__(self) -> float:
        """µs per op."""
        b, c = self.b, self.c
        t0 = time.perf_counter()
        for _ in range(self.n):
            c = c + b
        sync(self.device)
        self.c = c
        return (time.perf_counter() - t0) / self.n * 1e6


class Training:
    """One model and AdamW on one device in one eager mode; each call times
    `steps` training steps and returns steps/s."""

    def __init__(self, make_model, make_batch, loss_fn, device: str, mode: str, steps: int, warmup: int = 6):
        self.device, self.mode, self.steps = device, mode, steps
        torch_tpu_rs.set_eager_mode(mode)
        torch.manual_seed(0)
        model = make_model().to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        batch = [t.to(device) for t in make_batch()]

        def step():
            loss = loss_fn(model, *batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss

        self.step = step
        # Fused Eager needs a few steps before its step graph repeats (first
        # steps differ: no grads yet, optimizer state created).
        for _ in range(warmup):
            step()
        step().item()

    def __call__(self) -> float:
        torch_tpu_rs.set_eager_mode(self.mode)
        sync(self.device)
        t0 = time.perf_counter()
        for _ in range(self.steps):
            loss = self.step()
        loss.item()
        sync(self.device)
        return self.steps / (time.perf_counter() - t0)


STARTUP_SCRIPT = r"""
import time
t0 = time.perf_counter()
import torch
import torch._dynamo  # torch.optim imports it on any device; not this project's cost
t1 = time.perf_counter()
import torch_tpu_rs
from torch_tpu_rs.models import Llama, LlamaConfig
cfg = LlamaConfig(vocab_size=256, dim=128, n_layers=2, n_heads=4, hidden_dim=344, max_seq_len=128)
torch.manual_seed(0)
model = Llama(cfg).to("tpu")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
loss = model.loss(torch.randint(0, 256, (8, 65)).to("tpu"))
loss.backward()
opt.step()
loss.item()
end = time.perf_counter()
print(end - t0, end - t1, torch_tpu_rs.metrics()["compiles"])
"""


def startup_seconds(cache_dir: str) -> tuple[float, float, int]:
    """Seconds to the end of the first training step in a fresh process using
    `cache_dir` as the compilation cache: from `import torch`, and from
    `import torch_tpu_rs` (torch and Dynamo already imported: what this project adds)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", STARTUP_SCRIPT], capture_output=True, text=True, env=env, check=True)
    seconds, ours, compiles = out.stdout.split()[-3:]
    return float(seconds), float(ours), int(compiles)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=7, help="tiny-op samples per device")
    p.add_argument("--steps", type=int, default=10, help="training steps per timed sample")
    p.add_argument("--rounds", type=int, default=5, help="round-robin rounds of training samples")
    p.add_argument("--mode", default="strict")
    args = p.parse_args()
    torch_tpu_rs.set_eager_mode(args.mode)
    torch.set_num_threads(2)

    mlp = (lambda: MLP(64, 256, 10, depth=3), lambda: (torch.randn(64, 64), torch.randint(0, 10, (64,))),
           lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y))
    cfg = LlamaConfig(vocab_size=256, dim=128, n_layers=2, n_heads=4, hidden_dim=344, max_seq_len=128)
    llama = (lambda: Llama(cfg), lambda: (torch.randint(0, 256, (8, 65)),), lambda m, t: m.loss(t))

    result = {"mode": args.mode, "platform": torch.tpu.get_device_name(), "rounds": args.rounds}
    tiny = interleaved({"tpu": TinyOp("tpu", args.ops), "cpu": TinyOp("cpu", args.ops)}, args.repeats)
    result["tiny_op_us"] = {k: round(median(v), 2) for k, v in tiny.items()}
    for name, (mk, batch, loss) in {"mlp": mlp, "llama": llama}.items():
        runs = {"cpu": Training(mk, batch, loss, "cpu", "strict", args.steps)}
        for mode in ["strict", "fused"]:
            runs[f"tpu_{mode}"] = Training(mk, batch, loss, "tpu", mode, args.steps)
        compiles = torch_tpu_rs.metrics()["compiles"]
        s = interleaved(runs, args.rounds)
        entry = {k: round(median(v), 2) for k, v in s.items()}
        for mode in ["strict", "fused"]:
            entry[f"ratio_{mode}_over_cpu"] = round(paired_ratio(s[f"tpu_{mode}"], s["cpu"]), 3)
        entry["ratio_fused_over_strict"] = round(paired_ratio(s["tpu_fused"], s["tpu_strict"]), 3)
        entry["compiles_while_timed"] = torch_tpu_rs.metrics()["compiles"] - compiles
        result[f"{name}_steps_per_s"] = entry
    # Fused Eager over 40 sequence lengths, one training step each: programs
    # per bucket of lengths, not per length (`_fused_buckets.py`).
    from compile import changing_lengths

    result["fused_llama_changing_lengths"] = changing_lengths(cfg, 40, mode="fused")
    torch_tpu_rs.set_eager_mode(args.mode)
    import tempfile

    with tempfile.TemporaryDirectory() as cache_dir:
        cold, cold_ours, cold_compiles = startup_seconds(cache_dir)
        warm, warm_ours, warm_compiles = startup_seconds(cache_dir)
    result["startup_to_first_step_s"] = {
        "cold_cache": round(cold, 3),
        "warm_cache": round(warm, 3),
        "warm_over_cold": round(warm / cold, 3),
        "from_import_torch_tpu_rs": {"cold_cache": round(cold_ours, 3), "warm_cache": round(warm_ours, 3),
                                     "warm_over_cold": round(warm_ours / cold_ours, 3)},
        "compiles_cold": cold_compiles,
        "compiles_warm": warm_compiles,
    }
    result["metrics"] = {k: v for k, v in torch_tpu_rs.metrics().items() if not isinstance(v, dict)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
