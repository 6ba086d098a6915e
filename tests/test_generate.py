"""Generation with a key/value cache (`KVCache`, `Llama.generate`) on tpu
against the CPU, in each eager mode and compiled, and what it compiles."""
import pytest
import torch

import torch_tpu_rs
from torch_tpu_rs.models import KVCache, Llama, LlamaConfig

CFG = LlamaConfig(max_seq_len=64)


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    cpu = Llama(CFG).eval()
    tpu = Llama(CFG).eval()
    tpu.load_state_dict(cpu.state_dict())
    return cpu, tpu.to("tpu")


def prompt(batch, length, seed):
    return torch.randint(0, CFG.vocab_size, (batch, length), generator=torch.Generator().manual_seed(seed))


def counts():
    m = torch_tpu_rs.metrics()
    return m["compiles"] + m["cache_hits_disk"], m["executions"], m["flush_reasons"].get("repeating loop body", 0)


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"])
def test_cached_forward_matches_the_full_forward(models, mode):
    """A prompt fed in two chunks through the cache gives the logits of one
    forward pass over all of it."""
    cpu, tpu = models
    torch_tpu_rs.set_eager_mode(mode)
    tokens = prompt(2, 11, seed=1)
    cache = KVCache(CFG, 2, max_len=16, device="tpu")
    t = tokens.to("tpu")
    chunked = torch.cat([tpu(t[:, :7], cache, torch.arange(7, device="tpu")),
                         tpu(t[:, 7:], cache, torch.arange(7, 11, device="tpu"))], dim=1)
    torch.testing.assert_close(chunked.cpu(), cpu(tokens), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["strict", "fused", "debug"])
def test_greedy_generation_matches_the_cpu(models, mode):
    cpu, tpu = models
    torch_tpu_rs.set_eager_mode(mode)
    tokens = prompt(3, 9, seed=2)
    out = tpu.generate(tokens.to("tpu"), 20)
    assert out.device.type == "tpu" and out.shape == (3, 20)
    assert torch.equal(out.cpu(), cpu.generate(tokens, 20))


def test_compiled_generation_matches_the_cpu_and_replays(models):
    cpu, tpu = models
    compiled = Llama(CFG).eval()
    compiled.load_state_dict(cpu.state_dict())
    compiled = compiled.to("tpu")
    compiled.forward = torch.compile(compiled.forward, backend="tpu")
    tokens = prompt(2, 8, seed=3)
    assert torch.equal(compiled.generate(tokens.to("tpu"), 12).cpu(), cpu.generate(tokens, 12))
    before = torch_tpu_rs.metrics()
    again = prompt(2, 8, seed=4)
    assert torch.equal(compiled.generate(again.to("tpu"), 12).cpu(), cpu.generate(again, 12))
    after = torch_tpu_rs.metrics()
    assert after["compiled_graphs"] == before["compiled_graphs"]  # no new Dynamo graph
    assert after["graph_replays"] - before["graph_replays"] >= 11  # a decode step is one replayed program


def test_fused_generation_runs_one_program_per_decode_step(models):
    """A generation loop never syncs, so no step ends in a host read: Fused
    Eager finds the loop body in the graph's tail and cuts every step there.
    A longer generation then reuses the step's program instead of compiling
    the whole loop again."""
    cpu, tpu = models
    torch_tpu_rs.set_eager_mode("fused")
    cache = KVCache(CFG, 2, max_len=48, device="tpu")
    first = prompt(2, 10, seed=5)
    assert torch.equal(tpu.generate(first.to("tpu"), 16, cache=cache).cpu(), cpu.generate(first, 16))
    assert torch.equal(tpu.generate(first.to("tpu"), 16, cache=cache).cpu(), cpu.generate(first, 16))

    programs, executions, loops = counts()
    tokens = prompt(2, 10, seed=6)
    out = tpu.generate(tokens.to("tpu"), 30, cache=cache).cpu()
    new_programs, new_executions, new_loops = counts()
    assert torch.equal(out, cpu.generate(tokens, 30))
    assert new_loops - loops == 1
    assert new_executions - executions >= 28  # one per step, not one for all 30
    assert new_programs - programs <= 1  # only the graph after the last full step is new


def test_strict_decode_steps_compile_nothing_new(models):
    cpu, tpu = models
    tpu.generate(prompt(2, 10, seed=7).to("tpu"), 8).cpu()
    programs = counts()[0]
    tokens = prompt(2, 10, seed=8)
    assert torch.equal(tpu.generate(tokens.to("tpu"), 8).cpu(), cpu.generate(tokens, 8))
    assert counts()[0] == programs


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_prompt_lengths_in_one_bucket_share_programs(models, mode):
    """A prompt is padded to the next power of two for its forward pass:
    lengths 9 to 16 run the same programs, and the tokens do not change."""
    cpu, tpu = models
    torch_tpu_rs.set_eager_mode(mode)
    cache = KVCache(CFG, 2, max_len=40, device="tpu")
    # Fused Eager settles after a few lengths: the first request fills a
    # fresh cache, then view offsets (where the prompt ends) become program
    # arguments once a graph compiles again for them alone.
    for warm in range(9, 13):
        tpu.generate(prompt(2, warm, seed=warm), 6, cache=cache).cpu()
    programs = counts()[0]
    for length in range(13, 17):
        tokens = prompt(2, length, seed=length)  # on the host: padded there
        out = tpu.generate(tokens, 6, cache=cache)
        assert out.device.type == "tpu"
        assert torch.equal(out.cpu(), cpu.generate(tokens, 6)), length
    assert counts()[0] == programs
    # Unpadded, the same tokens.
    tokens = prompt(2, 13, seed=13)
    assert torch.equal(tpu.generate(tokens, 6, cache=cache, bucket_prompt=False).cpu(), cpu.generate(tokens, 6))


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_sampling_is_reproducible_under_manual_seed(models, mode):
    _, tpu = models
    torch_tpu_rs.set_eager_mode(mode)
    tokens = prompt(2, 6, seed=9).to("tpu")
    runs = []
    for _ in range(2):
        torch.manual_seed(123)
        runs.append(tpu.generate(tokens, 10, temperature=0.8).cpu())
    assert torch.equal(runs[0], runs[1])
    assert runs[0].min() >= 0 and runs[0].max() < CFG.vocab_size


def test_a_cache_too_short_is_refused_with_what_to_do(models):
    _, tpu = models
    cache = KVCache(CFG, 1, max_len=12, device="tpu")
    with pytest.raises(ValueError, match=r"needs 15 cache positions, but the cache holds 12.*KVCache\(max_len="):
        tpu.generate(prompt(1, 5, seed=10).to("tpu"), 10, cache=cache)
    with pytest.raises(ValueError, match="max_len must be in 1..64"):
        KVCache(CFG, 1, max_len=65)
    # The model still generates afterwards.
    assert tpu.generate(prompt(1, 5, seed=10).to("tpu"), 4, cache=cache).shape == (1, 4)


def test_serving_example_runs_one_program_per_token_in_fused_eager():
    """examples/serve_llama.py end to end: after the first requests, a request
    compiles nothing and each token is about one program execution."""
    import json
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, os.path.join(root, "examples", "serve_llama.py"), "--mode", "fused", "--json",
           "--requests", "4", "--train-steps", "30", "--prompt-len", "8", "--new-tokens", "12"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["compiles_per_request"][-2:] == [0, 0], summary
    assert summary["executions_per_token"] <= 1.5, summary
    assert 0.0 <= summary["accuracy"] <= 1.0 and summary["cpu_fallbacks"] == 0
