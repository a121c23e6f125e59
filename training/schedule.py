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
