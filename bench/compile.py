"""torch.compile(backend="tpu") benchmark: prints one JSON object.

For MLP and Llama-style training steps: compiled steps/s, the first step's
time (which includes compiling), and PyTorch CPU eager steps/s measured in
this same run, round-robin (bench/rounds.py): medians over rounds, and the
ratio as the median of per-round ratios.

llama_changing_lengths: the compiled Llama training step (`dynamic=True`)
over many sequence lengths, one step each, as a data loader without padding
feeds it: the programs it needed (compiled or loaded from the disk cache)
against the number of lengths, and its total time against PyTorch CPU eager
on the same batches.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

import torch_tpu_rs
from rounds import interleaved, median, paired_ratio
from torch_tpu_rs.models import MLP, Llama, LlamaConfig


class Training:
    """One model and AdamW on one device, eager or through torch.compile;
    each call times `steps` training steps and returns steps/s."""

    def __init__(self, make_model, make_batch, loss_fn, device, compiled, steps):
        self.steps = steps
        torch.manual_seed(0)
        model = make_model().to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        batch = [t.to(device) for t in make_batch()]

        def step(*b):
            loss = loss_fn(model, *b)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        if compiled:
            step = torch.compile(step, backend="tpu")
        self.step = lambda: step(*batch)
        t0 = time.perf_counter()
        self.step().item()
        self.first_step_s = time.perf_counter() - t0
        for _ in range(2):
            self.step()

    def __call__(self) -> float:
        t0 = time.perf_counter()
        for _ in range(self.steps):
            loss = self.step()
        loss.item()
        return self.steps / (time.perf_counter() - t0)


def changing_lengths(cfg, n_lengths: int, mode: str = "compiled") -> dict:
    """Trains one step per sequence length, lengths in 2..max_seq_len+1:
    compiled (`mode="compiled"`) or in an eager mode ("fused", "strict")."""
    torch._dynamo.reset()
    lengths = (torch.randperm(cfg.max_seq_len, generator=torch.Generator().manual_seed(0))[:n_lengths] + 2).tolist()
    batches = [torch.randint(0, cfg.vocab_size, (8, n)) for n in lengths]
    seconds = {}
    for device in ("tpu", "cpu"):
        torch.manual_seed(0)
        model = Llama(cfg).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step(tokens):
            loss = model.loss(tokens)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        if device == "tpu":
            if mode == "compiled":
                step = torch.compile(step, backend="tpu", dynamic=True)
            else:
                torch_tpu_rs.set_eager_mode(mode)
            start = torch_tpu_rs.metrics()
            programs = start["compiles"] + start["cache_hits_disk"]
        t0 = time.perf_counter()
        for b in batches:
            step(b.to(device)).item()
        seconds[device] = time.perf_counter() - t0
        torch_tpu_rs.set_eager_mode("strict")
        if device == "tpu":
            m = torch_tpu_rs.metrics()
            programs = m["compiles"] + m["cache_hits_disk"] - programs
    m = torch_tpu_rs.metrics()
    return {
        "lengths": len(lengths),
        "programs": programs,
        f"{mode}_s": round(seconds["tpu"], 2),
        "cpu_eager_s": round(seconds["cpu"], 2),
        **({"exact_shape_graphs": m["exact_shape_graphs"]} if mode == "compiled" else
           {"bucketed_regions": m["bucketed_regions"] - start["bucketed_regions"],
            "fused_bucket_refusals": m["fused_bucket_refusals"]}),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=10, help="training steps per timed sample")
    p.add_argument("--rounds", type=int, default=5, help="round-robin rounds of samples")
    p.add_argument("--lengths", type=int, default=40, help="sequence lengths for llama_changing_lengths")
    args = p.parse_args()
    torch.set_num_threads(2)
    cfg = LlamaConfig(vocab_size=256, dim=128, n_layers=2, n_heads=4, hidden_dim=344, max_seq_len=128)
    cases = {
        "mlp": (lambda: MLP(64, 256, 10, depth=3), lambda: (torch.randn(64, 64), torch.randint(0, 10, (64,))),
                lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y)),
        "llama": (lambda: Llama(cfg), lambda: (torch.randint(0, 256, (8, 65)),), lambda m, t: m.loss(t)),
    }
    result = {"platform": torch.tpu.get_device_name(), "rounds": args.rounds}
    for name, (mk, batch, loss) in cases.items():
        torch._dynamo.reset()
        compiled = Training(mk, batch, loss, "tpu", True, args.steps)
        cpu = Training(mk, batch, loss, "cpu", False, args.steps)
        s = interleaved({"compiled": compiled, "cpu": cpu}, args.rounds)
        result[name] = {
            "compiled_steps_per_s": round(median(s["compiled"]), 2),
            "first_step_s": round(compiled.first_step_s, 3),
            "cpu_eager_steps_per_s": round(median(s["cpu"]), 2),
            "ratio_compiled_over_cpu": round(paired_ratio(s["compiled"], s["cpu"]), 3),
        }
    result["llama_changing_lengths"] = changing_lengths(cfg, args.lengths)
    m = torch_tpu_rs.metrics()
    result["metrics"] = {
        k: m[k] for k in ["compiles", "compiled_graphs", "graph_breaks", "cache_hits_disk", "graph_replays",
                          "unreplayable_graphs", "bucketed_graphs"]
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
