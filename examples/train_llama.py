"""Train a small Llama-style model on the `tpu` device with synthetic tokens.

    python examples/train_llama.py [--steps 60] [--batch 8] [--seq 64] [--device tpu]

The data are random arithmetic sequences modulo the vocabulary, so the loss
falls quickly once the model learns to continue them. Prints a progress bar
with loss and tokens/s, then a summary with final loss, throughput and the
number of XLA compiles.
"""
from __future__ import annotations

import argparse
import json
import time

import torch
from tqdm import tqdm

import torch_tpu_rs
from torch_tpu_rs.models import Llama, LlamaConfig
from torch_tpu_rs.models.synthetic import arithmetic_sequences


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--device", default="tpu")
    p.add_argument("--mode", default=None, help="eager mode: strict (default), fused or debug")
    p.add_argument("--compile", action="store_true", help='run the step through torch.compile(backend="tpu")')
    p.add_argument("--log-every", type=int, default=5, help="read the loss back every N steps")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = p.parse_args()

    if args.mode:
        torch_tpu_rs.set_eager_mode(args.mode)
    torch.manual_seed(0)
    cfg = LlamaConfig(dim=args.dim, n_layers=args.layers, max_seq_len=max(128, args.seq))
    model = Llama(cfg).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(0)
    batches = [arithmetic_sequences(gen, args.batch, args.seq + 1, cfg.vocab_size) for _ in range(8)]
    batches = [b.to(args.device) for b in batches]
    tokens_per_step = args.batch * args.seq

    print(
        f"Llama-style model: {model.num_params() / 1e6:.2f} M parameters, {cfg.n_layers} layers, "
        f"dim {cfg.dim}; device {args.device}"
        + (f" ({torch.tpu.get_device_name()}, "
           + ("torch.compile" if args.compile else f"{torch_tpu_rs.get_eager_mode()} eager") + ")"
           if args.device == "tpu" else "")
    )
    before = torch_tpu_rs.metrics()
    loss_value = float("nan")
    first_step_s = None
    start = time.perf_counter()
    bar = tqdm(range(args.steps), desc="train", unit="step")
    def train_step(batch):
        loss = model.loss(batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    if args.compile:
        train_step = torch.compile(train_step, backend=args.device if args.device == "tpu" else "inductor")
    for step in bar:
        t0 = time.perf_counter()
        loss = train_step(batches[step % len(batches)])
        if step % args.log_every == 0 or step == args.steps - 1:
            loss_value = loss.item()  # the only host sync in the loop
            elapsed = time.perf_counter() - start
            bar.set_postfix(loss=f"{loss_value:.4f}", tok_s=f"{tokens_per_step * (step + 1) / elapsed:,.0f}")
        if first_step_s is None:
            first_step_s = time.perf_counter() - t0
    if args.device == "tpu":
        torch.tpu.synchronize()
    total = time.perf_counter() - start
    after = torch_tpu_rs.metrics()

    steady_steps = max(args.steps - 1, 1)
    steady_s = max(total - (first_step_s or 0.0), 1e-9)
    summary = {
        "final_loss": round(loss_value, 5),
        "steps": args.steps,
        "tokens_per_s": round(tokens_per_step * steady_steps / steady_s, 1),
        "steps_per_s": round(steady_steps / steady_s, 3),
        "first_step_s": round(first_step_s or 0.0, 3),
        "achieved_gflops": round(cfg.flops_per_token() * tokens_per_step * steady_steps / steady_s / 1e9, 3),
        "compiles": after["compiles"] - before["compiles"],
        "compile_seconds": round(after["compile_seconds"] - before["compile_seconds"], 2),
        "executions": after["executions"] - before["executions"],
        "host_syncs": after["host_syncs"] - before["host_syncs"],
        "cpu_fallbacks": sum(after["fallbacks"].values()),
    }
    if args.json:
        print(json.dumps(summary))
        return
    print()
    print(f"final loss        {summary['final_loss']:.4f}")
    print(f"throughput        {summary['tokens_per_s']:,.0f} tokens/s ({summary['steps_per_s']:.2f} steps/s, "
          f"{summary['achieved_gflops']:.2f} GFLOP/s achieved)")
    print(f"first step        {summary['first_step_s']:.2f} s (includes compiling)")
    print(f"compiles          {summary['compiles']} ({summary['compile_seconds']:.1f} s)")
    print(f"executions        {summary['executions']}   host syncs {summary['host_syncs']}   "
          f"cpu fallbacks {summary['cpu_fallbacks']}")


if __name__ == "__main__":
    main()
