"""Data-parallel training of the small Llama-style model: one process per tpu
device, DistributedDataParallel over torch.distributed's "tpu" backend.

    torchrun --standalone --nproc_per_node 2 examples/train_ddp.py [--steps 30]

Each rank trains on its own synthetic batches (as train_llama.py makes
them); DDP averages the gradients, so every replica stays identical. Rank 0
shows a progress bar with the loss averaged over ranks and the tokens/s of
all ranks together, then a summary that also checks the replicas agree.
"""
from __future__ import annotations

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

import torch_tpu_rs
from torch_tpu_rs.models import Llama, LlamaConfig
from torch_tpu_rs.models.synthetic import arithmetic_sequences


def mean_over_ranks(x: torch.Tensor) -> float:
    x = x.detach().clone()
    dist.all_reduce(x)
    return x.item() / dist.get_world_size()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=8, help="sequences per rank and step")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--mode", default=None, help="eager mode: strict (default), fused or debug")
    p.add_argument("--log-every", type=int, default=5, help="average the loss over ranks every N steps")
    p.add_argument("--json", action="store_true", help="rank 0 prints the summary as JSON")
    args = p.parse_args()

    dist.init_process_group("tpu")  # rank and world size from torchrun
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("tpu", int(os.environ.get("LOCAL_RANK", rank)) % torch.tpu.device_count())
    torch.tpu.set_device(device)
    if args.mode:
        torch_tpu_rs.set_eager_mode(args.mode)

    torch.manual_seed(0)  # DDP broadcasts rank 0's weights anyway
    cfg = LlamaConfig(dim=args.dim, n_layers=args.layers, max_seq_len=max(128, args.seq))
    model = DistributedDataParallel(Llama(cfg).to(device))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    gen = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    batches = [arithmetic_sequences(gen, args.batch, args.seq + 1, cfg.vocab_size).to(device) for _ in range(8)]
    tokens_per_step = args.batch * args.seq * world

    if rank == 0:
        print(f"Llama-style model: {model.module.num_params() / 1e6:.2f} M parameters; DDP over {world} "
              f"processes ({torch.tpu.get_device_name()}, backend {dist.get_backend()})")
    before = torch_tpu_rs.metrics()
    loss_value = float("nan")
    start = time.perf_counter()
    bar = tqdm(range(args.steps), desc="train", unit="step", disable=rank != 0)
    for step in bar:
        tokens = batches[step % len(batches)]
        loss = model_loss(model, tokens)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % args.log_every == 0 or step == args.steps - 1:
            loss_value = mean_over_ranks(loss)
            elapsed = time.perf_counter() - start
            bar.set_postfix(loss=f"{loss_value:.4f}", tok_s=f"{tokens_per_step * (step + 1) / elapsed:,.0f}")
    torch.tpu.synchronize()
    total = time.perf_counter() - start
    after = torch_tpu_rs.metrics()

    # Every replica must hold the same weights: compare a checksum across ranks.
    checksum = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum().reshape(1)
    sums = [torch.empty_like(checksum) for _ in range(world)]
    dist.all_gather(sums, checksum)
    in_sync = all(torch.equal(s, sums[0]) for s in sums)
    summary = {
        "world_size": world,
        "final_loss": round(loss_value, 5),
        "steps": args.steps,
        "tokens_per_s": round(tokens_per_step * args.steps / total, 1),
        "replicas_in_sync": in_sync,
        "compiles": after["compiles"] - before["compiles"],
    }
    if rank == 0:
        if args.json:
            print(json.dumps(summary))
        else:
            print()
            print(f"final loss        {summary['final_loss']:.4f} (mean over {world} ranks)")
            print(f"throughput        {summary['tokens_per_s']:,.0f} tokens/s, all ranks")
            print(f"replicas in sync  {'yes' if in_sync else 'NO'}")
            print(f"compiles          {summary['compiles']} on rank 0")
    dist.destroy_process_group()


def model_loss(model: DistributedDataParallel, tokens: torch.Tensor) -> torch.Tensor:
    """Next-token cross entropy through DDP's forward (which hooks the
    gradient all-reduce into backward)."""
    logits = model(tokens[:, :-1])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


if __name__ == "__main__":
    main()
