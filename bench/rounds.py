"""Timing several configurations fairly on a noisy machine: round-robin.

Each round runs every configuration once, back to back, so a slow spell of
the machine hits all of them alike instead of whichever happened to run
then. A figure is the median over rounds; a ratio is the median of the
per-round ratios (paired samples), which cancels drift between rounds.
"""
from __future__ import annotations

import statistics
from typing import Callable


def interleaved(runs: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Calls every run once per round, in order; returns each run's samples."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            samples[name].append(run())
    return samples


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def paired_ratio(num: list[float], den: list[float]) -> float:
    """Median over rounds of num/den, each pair measured in the same round."""
    return statistics.median(a / b for a, b in zip(num, den))
