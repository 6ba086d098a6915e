"""A small Llama-style decoder: RMSNorm, rotary position embeddings (RoPE),
causal multi-head attention and a SwiGLU feed-forward block.

For generation the model takes a `KVCache`: keys and values of past
positions, preallocated at the cache's full length. A step writes its
positions into the cache and attends over all of it under a mask, so every
decode step has the same shapes and runs the same program: no compile per
new token in any mode (the approach of static caches in Hugging Face and
gpt-fast)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
import torch.nn.functional as F


@dataclass
class LlamaConfig:
    vocab_size: int = 256
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    hidden_dim: int = 172  # SwiGLU width, about 8/3 * dim
    max_seq_len: int = 128
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    dropout: float = 0.0

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def flops_per_token(self) -> float:
        """Training FLOPs per token (6 * parameters in matmuls, plus attention)."""
        d, h, L, V = self.dim, self.hidden_dim, self.n_layers, self.vocab_size
        matmul_params = L * (4 * d * d + 3 * d * h) + d * V
        attn = L * 2 * self.max_seq_len * d  # QK^T and AV per token, forward
        return 6 * matmul_params + 3 * 2 * attn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return x * rms * self.weight


def rope_tables(head_dim: int, seq_len: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    t = torch.arange(seq_len, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        self.wq = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wk = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wv = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.wo = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x, cos, sin, mask, cache=None, pos=None):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:
            # Positions are a tensor, not Python ints: the write and the mask
            # then read them as data, and the program never changes.
            k_cache, v_cache = cache
            k_cache.index_copy_(2, pos, k)
            v_cache.index_copy_(2, pos, v)
            k, v = k_cache, v_cache
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(mask, float("-inf"))
        attn = self.dropout(F.softmax(scores, dim=-1))
        out = (attn @ v).transpose(1, 2).reshape(b, s, -1)
        return self.wo(out)


class FeedForward(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
        self.w2 = nn.Linear(cfg.hidden_dim, cfg.dim, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.ffn = FeedForward(cfg)

    def forward(self, x, cos, sin, mask, cache=None, pos=None):
        x = x + self.attn(self.attn_norm(x), cos, sin, mask, cache, pos)
        return x + self.ffn(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        cos, sin = rope_tables(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, tokens: torch.Tensor, cache: "KVCache | None" = None,
                pos: torch.Tensor | None = None) -> torch.Tensor:
        """Logits for `tokens` ([batch, seq]). With a `cache`, `pos` ([seq],
        on the tokens' device) gives their positions; they are written into
        the cache and attend to every earlier position held there."""
        if cache is not None:
            return self._forward_cached(tokens, cache, pos)
        s = tokens.shape[1]
        x = self.embed(tokens)
        cos, sin = self.rope_cos[:s], self.rope_sin[:s]
        # True above the diagonal: position i does not attend to j > i. Built
        # from two aranges rather than sliced from an [L, L] buffer: the slice
        # is contiguous only when s == L, and Dynamo would guard on that.
        pos = torch.arange(s, device=tokens.device)
        mask = pos[None, :] > pos[:, None]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.head(self.norm(x))

    def _forward_cached(self, tokens, cache, pos):
        x = self.embed(tokens)
        cos, sin = self.rope_cos[pos], self.rope_sin[pos]
        # Query i sees cache slot j when j <= pos[i]: slots after it are the
        # future or still empty.
        slots = torch.arange(cache.max_len, device=tokens.device)
        mask = slots[None, :] > pos[:, None]
        for layer, kv in zip(self.layers, cache.layers):
            x = layer(x, cos, sin, mask, kv, pos)
        return self.head(self.norm(x))

    @torch.no_grad()
    def generate(self, prompt: torch.Tensor, max_new_tokens: int, cache: "KVCache | None" = None,
                 temperature: float = 0.0, generator: torch.Generator | None = None,
                 bucket_prompt: bool = True) -> torch.Tensor:
        """The `max_new_tokens` tokens that follow `prompt` ([batch, seq], on
        the model's device or the CPU), on the model's device: greedy, or
        sampled at `temperature`. The loop never waits for the host.

        With `bucket_prompt`, the prompt is padded to the next power of two
        (at most the cache's length) for its forward pass, so prompts of 9
        to 16 tokens share one program: a new prompt length compiles at most
        once per bucket. The padding writes cache slots from the prompt's
        end on, which each decode step overwrites before any position reads
        it (a query at position p sees slots up to p)."""
        b, s = prompt.shape
        device = self.embed.weight.device
        if cache is None:
            cache = KVCache(self.cfg, b, device=device, dtype=self.embed.weight.dtype)
        if s + max_new_tokens > cache.max_len:
            raise ValueError(
                f"generate: a prompt of {s} tokens plus {max_new_tokens} new ones needs {s + max_new_tokens} "
                f"cache positions, but the cache holds {cache.max_len}; pass a longer KVCache(max_len=...)"
            )
        padded = min(1 << (s - 1).bit_length(), cache.max_len) if bucket_prompt else s
        if padded > s:
            prompt = F.pad(prompt, (0, padded - s))
        # A prompt may come from the host: padded there, the device sees one
        # shape per bucket (in Fused Eager, padding on the device would make
        # the prompt's graph start from its exact length).
        prompt = prompt.to(device)
        pos = torch.arange(padded, device=device)
        logits = self(prompt, cache, pos)[:, s - 1]
        pos = pos[s - 1:s]
        out = []
        for i in range(max_new_tokens):
            if i:
                logits = self(out[-1], cache, pos)[:, -1]
            out.append(_pick(logits, temperature, generator))
            pos = pos + 1
        return torch.cat(out, dim=1)

    def loss(self, tokens: torch.Tensor) -> torch.Tensor:
        """Next-token cross-entropy over a batch of token sequences."""
        logits = self(tokens[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def _pick(logits: torch.Tensor, temperature: float, generator) -> torch.Tensor:
    """The next token of each row ([batch, 1]): the most likely one, or a
    draw from softmax(logits / temperature)."""
    if temperature <= 0:
        return logits.argmax(-1, keepdim=True)
    probs = F.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)


class KVCache:
    """Keys and values of past positions, one [batch, heads, max_len,
    head_dim] pair per layer, allocated once at full length (at most the
    model's `max_seq_len`, the length of its RoPE tables). Reuse one cache
    across requests of the same batch size: a new prompt overwrites the
    slots it needs, and the mask hides the rest."""

    def __init__(self, cfg: LlamaConfig, batch: int, max_len: int | None = None,
                 device=None, dtype: torch.dtype = torch.float32):
        max_len = cfg.max_seq_len if max_len is None else max_len
        if not 0 < max_len <= cfg.max_seq_len:
            raise ValueError(f"KVCache: max_len must be in 1..{cfg.max_seq_len} (the model's max_seq_len), got {max_len}")
        shape = (batch, cfg.n_heads, max_len, cfg.head_dim)
        self.max_len = max_len
        self.layers = [
            (torch.zeros(shape, device=device, dtype=dtype), torch.zeros(shape, device=device, dtype=dtype))
            for _ in range(cfg.n_layers)
        ]
