"""Single-kernel benchmark at the Llama-style benchmark model's sizes:
prints one JSON object.

The training-step benchmarks (eager.py, compile.py) measure whole programs;
this one says where their time goes on the plugin in use. Each kernel runs
as one op in Strict Eager on tpu and in PyTorch CPU eager with 2 threads and
with 1 (round-robin, bench/rounds.py): microseconds per op (medians over
rounds), GFLOP/s for the matmuls, and the ratio to CPU eager with 2 threads
(>1: tpu is faster). On the XLA CPU plugin a ratio near the 1-thread ratio
means the plugin ran the kernel on one core.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

import torch_tpu_rs  # noqa: F401  (registers the tpu device)
from rounds import interleaved, median, paired_ratio

# [tokens, dim] x [dim, out] for the model of bench/eager.py: 8 x 64 tokens,
# dim 128, SwiGLU width 344, vocabulary 256, 4 heads of 32.
MATMULS = {"qkvo_512x128x128": (512, 128, 128), "w1w3_512x128x344": (512, 128, 344),
           "w2_512x344x128": (512, 344, 128), "head_512x128x256": (512, 128, 256)}


def kernels(device: str) -> dict:
    """name -> (zero-argument callable running one op, FLOPs or 0)."""
    g = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.rand(*shape, generator=g).add_(0.1).to(device)

    out = {}
    for name, (m, k, n) in MATMULS.items():
        a, w = rand(m, k), rand(n, k)
        out[f"linear_{name}"] = ((lambda a=a, w=w: torch.nn.functional.linear(a, w)), 2 * m * k * n)
    q, kt = rand(32, 64, 32), rand(32, 32, 64)
    out["bmm_attention_scores"] = ((lambda: torch.bmm(q, kt)), 2 * 32 * 64 * 32 * 64)
    s = rand(32, 64, 64)  # attention scores: batch*heads, seq, seq
    h = rand(512, 344)  # SwiGLU hidden activations
    x = rand(512, 128)
    out["softmax_scores"] = ((lambda: s.softmax(-1)), 0)
    out["silu_hidden"] = ((lambda: torch.nn.functional.silu(h)), 0)
    out["mul_hidden"] = ((lambda: h * h), 0)
    out["exp_scores"] = ((lambda: s.exp()), 0)
    out["rsqrt_scores"] = ((lambda: s.rsqrt()), 0)
    out["mean_last_dim"] = ((lambda: x.pow(2).mean(-1, keepdim=True)), 0)
    out["transpose_heads"] = ((lambda: x.view(8, 64, 4, 32).transpose(1, 2).contiguous()), 0)
    return out


class Timed:
    """Times `ops` calls of one kernel on one device (and CPU thread count)."""

    def __init__(self, fn, device: str, threads: int, ops: int):
        self.fn, self.device, self.threads, self.ops = fn, device, threads, ops

    def __call__(self) -> float:
        torch.set_num_threads(self.threads)
        for _ in range(3):
            self.fn()
        self.sync()
        t0 = time.perf_counter()
        for _ in range(self.ops):
            self.fn()
        self.sync()
        return (time.perf_counter() - t0) / self.ops * 1e6

    def sync(self) -> None:
        if self.device == "tpu":
            torch.tpu.synchronize()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=100, help="ops per timed sample")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    torch_tpu_rs.set_eager_mode("strict")
    tpu, cpu = kernels("tpu"), kernels("cpu")
    result = {"platform": torch.tpu.get_device_name(), "mode": "strict", "rounds": args.rounds, "kernels": {}}
    for name, (fn, flops) in tpu.items():
        s = interleaved({"tpu": Timed(fn, "tpu", 2, args.ops), "cpu_2_threads": Timed(cpu[name][0], "cpu", 2, args.ops),
                         "cpu_1_thread": Timed(cpu[name][0], "cpu", 1, args.ops)}, args.rounds)
        entry = {f"{k}_us": round(median(v), 1) for k, v in s.items()}
        if flops:
            entry.update({f"{k}_gflops": round(flops / median(v) / 1e3, 1) for k, v in s.items()})
        entry["ratio_tpu_over_cpu_2_threads"] = round(paired_ratio(s["cpu_2_threads"], s["tpu"]), 3)
        entry["ratio_tpu_over_cpu_1_thread"] = round(paired_ratio(s["cpu_1_thread"], s["tpu"]), 3)
        result["kernels"][name] = entry
    torch.set_num_threads(2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
