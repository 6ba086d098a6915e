"""Synthetic token data for the examples: arithmetic sequences modulo the
vocabulary (start + k * step), which a small model learns to continue within
a few dozen steps, so both a falling loss and correct generations show that
training and serving work."""
from __future__ import annotations

import torch


def arithmetic_sequences(gen: torch.Generator, batch: int, length: int, vocab: int) -> torch.Tensor:
    """A [batch, length] int64 CPU tensor of sequences start + k * step
    (mod vocab), with random starts and steps from 1 to 7."""
    start = torch.randint(0, vocab, (batch, 1), generator=gen)
    step = torch.randint(1, 8, (batch, 1), generator=gen)
    return (start + step * torch.arange(length)) % vocab
