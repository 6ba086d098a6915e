"""Serve a small Llama-style model on the `tpu` device: batched generation
with a key/value cache.

    python examples/serve_llama.py [--requests 12] [--batch 4] [--prompt-len 16]
                                   [--new-tokens 48] [--mode fused] [--compile]

The model first trains briefly on arithmetic sequences (as train_llama.py),
so its generations can be checked: each request gives it the start of a
sequence (of a random length, up to --prompt-len) and counts how many
generated tokens continue it correctly. Prints a
progress bar with tokens/s, then a summary: accuracy, decode throughput,
latency of the first request (which compiles) and of the later ones (median),
and the compiles of each request.

The cache is allocated once at full length (`KVCache`), so every decode step
has the same shapes: in Fused Eager each step runs one program, the same for
every step and request, and under `--compile` a replayed one. Prompts are
padded to a power of two (on the host), so a new prompt length compiles
only when it opens a new bucket.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from tqdm import tqdm

import torch_tpu_rs
from torch_tpu_rs.models import KVCache, Llama, LlamaConfig
from torch_tpu_rs.models.synthetic import arithmetic_sequences


def train(model: Llama, steps: int, device: str, batch: int = 16, seq: int = 48) -> float:
    """A short AdamW run on arithmetic sequences; returns the last loss."""
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    gen = torch.Generator().manual_seed(0)
    loss = torch.zeros(())
    for _ in tqdm(range(steps), desc="train", unit="step"):
        tokens = arithmetic_sequences(gen, batch, seq + 1, model.cfg.vocab_size).to(device)
        loss = model.loss(tokens)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return loss.item()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=12)
    p.add_argument("--batch", type=int, default=4, help="sequences per request")
    p.add_argument("--prompt-len", type=int, default=16, help="longest prompt (each request draws from half that up)")
    p.add_argument("--new-tokens", type=int, default=48)
    p.add_argument("--train-steps", type=int, default=200)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--device", default="tpu")
    p.add_argument("--mode", default=None, help="eager mode: strict (default), fused or debug")
    p.add_argument("--compile", action="store_true", help='run the model through torch.compile(backend="tpu")')
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = p.parse_args()

    if args.mode:
        torch_tpu_rs.set_eager_mode(args.mode)
    torch.manual_seed(0)
    cfg = LlamaConfig(dim=args.dim, n_layers=args.layers, max_seq_len=max(128, args.prompt_len + args.new_tokens))
    model = Llama(cfg).to(args.device)
    where = args.device
    if args.device == "tpu":
        how = "torch.compile" if args.compile else f"{torch_tpu_rs.get_eager_mode()} eager"
        where += f" ({torch.tpu.get_device_name()}, {how})"
    print(f"Llama-style model: {model.num_params() / 1e6:.2f} M parameters, {cfg.n_layers} layers, dim {cfg.dim}; "
          f"device {where}")
    final_loss = train(model, args.train_steps, args.device)

    model.eval()
    if args.compile:
        model.forward = torch.compile(model.forward, backend=args.device if args.device == "tpu" else "inductor")
    cache = KVCache(cfg, args.batch, max_len=args.prompt_len + args.new_tokens, device=args.device)
    gen = torch.Generator().manual_seed(1)
    before = torch_tpu_rs.metrics()
    correct = total = 0
    latencies, compiles = [], []
    bar = tqdm(range(args.requests), desc="serve", unit="req")
    for i in bar:
        # Prompts of varying length, as requests come: generate() pads each
        # to a power of two, so lengths share programs by bucket.
        length = int(torch.randint(max(1, args.prompt_len // 2), args.prompt_len + 1, (), generator=gen))
        seqs = arithmetic_sequences(gen, args.batch, length + args.new_tokens, cfg.vocab_size)
        t0 = time.perf_counter()
        out = model.generate(seqs[:, :length], args.new_tokens, cache=cache).cpu()
        latencies.append(time.perf_counter() - t0)
        correct += int((out == seqs[:, length:]).sum())
        total += out.numel()
        compiles.append(torch_tpu_rs.metrics()["compiles"] - before["compiles"] - sum(compiles))
        bar.set_postfix(acc=f"{correct / total:.3f}", tok_s=f"{args.batch * args.new_tokens / latencies[-1]:,.0f}")
    after = torch_tpu_rs.metrics()

    # The median request after the first: the first one compiles.
    decode_s = statistics.median(latencies[1:] or latencies)
    tokens_per_request = args.batch * args.new_tokens
    # A forward pass costs a third of a training step's FLOPs per token.
    flops_per_token = cfg.flops_per_token() / 3
    summary = {
        "train_loss": round(final_loss, 4),
        "accuracy": round(correct / max(total, 1), 4),
        "requests": args.requests,
        "tokens_per_request": tokens_per_request,
        "tokens_per_s": round(tokens_per_request / decode_s, 1),
        "first_request_s": round(latencies[0], 3),
        "request_s": round(decode_s, 4),
        "achieved_gflops": round(flops_per_token * tokens_per_request / decode_s / 1e9, 3),
        "compiles": after["compiles"] - before["compiles"],
        "compiles_per_request": compiles,
        "executions_per_token": round((after["executions"] - before["executions"]) / (args.requests * args.new_tokens), 2),
        "host_syncs": after["host_syncs"] - before["host_syncs"],
        "cpu_fallbacks": sum(after["fallbacks"].values()),
    }
    if args.json:
        print(json.dumps(summary))
        return
    print()
    print(f"accuracy          {summary['accuracy']:.3f} of generated tokens continue their sequence "
          f"(train loss {summary['train_loss']:.3f})")
    print(f"throughput        {summary['tokens_per_s']:,.0f} tokens/s ({args.batch} sequences x "
          f"{args.new_tokens} tokens in {summary['request_s'] * 1e3:.1f} ms, "
          f"{summary['achieved_gflops']:.2f} GFLOP/s achieved)")
    print(f"first request     {summary['first_request_s']:.2f} s (includes compiling)")
    print(f"compiles          {summary['compiles']} while serving; per request: "
          + " ".join(str(c) for c in compiles))
    print(f"executions        {summary['executions_per_token']} per token   host syncs {summary['host_syncs']}   "
          f"cpu fallbacks {summary['cpu_fallbacks']}")


if __name__ == "__main__":
    main()
