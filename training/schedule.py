"""Learning-rate schedule: linear warm-up, then cosine decay to a floor."""

from __future__ import annotations

import math


def learning_rate(step: int, base: float, warmup: int, total: int, floor: float = 0.02, start: int = 0) -> float:
    """The rate at ``step``: warm-up over ``warmup`` steps, then cosine down to ``floor`` x ``base`` over the rest
    of ``total`` steps, both counted from ``start`` (a schedule restarted on trained weights)."""
    step = max(0, step - start)
    if step < warmup:
        return base * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return base * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def rewarmed(rate: float, step: int, since: int, steps: int) -> float:
    """``rate`` ramped up linearly over ``steps`` steps from step ``since``: a fresh optimizer on trained weights
    (train.py --init-weights --rewarm) eases into the schedule where it stands instead of restarting it."""
    if steps <= 0 or step >= since + steps:
        return rate
    return rate * (max(0, step - since) + 1) / steps
