"""Validation metrics shared by train.py and bench/diagnose_validation.py."""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import torch

from training.losses import psnr

Batches = List[Dict[str, torch.Tensor]]


def validation_psnr(net, sets: Dict[str, Batches],
                    boundaries: Dict[str, List[torch.Tensor]]) -> Tuple[Dict[str, float], Optional[float]]:
    """The network's mean per-triplet PSNR on each set, and its PSNR over the pixels of ``boundaries`` (masks
    per batch of the sets named there, from ``training.data.motion_boundaries``), pooled over those sets: None
    when they hold no such pixel. Runs under the caller's no_grad / autocast / eval settings."""
    means = {}
    error_sum, pixels = 0.0, 0
    for name, batches in sets.items():
        scores = []
        for i, b in enumerate(batches):
            out = net.synthesize(net.estimate_flow(b["one"], b["two"]), b["t"]).float()
            scores.append(psnr(out, b["mid"]))
            if name in boundaries:
                mask = boundaries[name][i]
                error = (out.clamp(0, 1) - b["mid"]).pow(2).mean(1, keepdim=True)
                error_sum += float(error[mask].sum())
                pixels += int(mask.sum())
        means[name] = float(torch.cat(scores).mean())
    boundary = -10.0 * math.log10(max(error_sum / pixels, 1e-10)) if pixels else None
    return means, boundary
