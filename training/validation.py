"""Validation metrics shared by the trainer (training/trainer.py) and scripts/diagnose/validation.py."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Protocol, Tuple

import torch

from evaluation.metrics import psnr

Batches = List[Dict[str, torch.Tensor]]


class Interpolates(Protocol):
    """What validation runs: a model.Network, or anything with its two steps (a flow state for a batch of pairs,
    then the frames at times t from it), such as scripts/diagnose/validation.py's flow at another scale."""

    def estimate_flow(self, one: torch.Tensor, two: torch.Tensor) -> Any: ...

    def synthesize(self, state: Any, t: torch.Tensor) -> torch.Tensor: ...


def validation_psnr(net: Interpolates, sets: Dict[str, Batches], boundaries: Dict[str, List[torch.Tensor]],
                    subsets: Optional[Dict[str, List[torch.Tensor]]] = None
                    ) -> Tuple[Dict[str, float], Optional[float]]:
    """The network's mean per-triplet PSNR on each set, and its PSNR over the pixels of ``boundaries`` (masks
    per batch of the sets named there, from ``training.data.motion_boundaries``), pooled over those sets: None
    when they hold no such pixel. With ``subsets`` (a bool per triplet of each batch of the sets named there,
    e.g. ``training.linearity.near_linear_subsets``), also the mean PSNR over those triplets, pooled, as
    ``means["near-linear"]`` (NaN when there are none). Runs under the caller's no_grad / autocast / eval
    settings."""
    means = {}
    error_sum, pixels = 0.0, 0
    chosen = []
    for name, batches in sets.items():
        scores = []
        for i, b in enumerate(batches):
            out = net.synthesize(net.estimate_flow(b["one"], b["two"]), b["t"]).float()
            scores.append(psnr(out, b["mid"]))
            if subsets is not None and name in subsets:
                chosen.append(scores[-1][subsets[name][i].to(scores[-1].device)])
            if name in boundaries:
                mask = boundaries[name][i]
                error = (out.clamp(0, 1) - b["mid"]).pow(2).mean(1, keepdim=True)
                error_sum += float(error[mask].sum())
                pixels += int(mask.sum())
        means[name] = float(torch.cat(scores).mean())
    if subsets is not None:
        picked = torch.cat(chosen) if chosen else torch.zeros(0)
        means["near-linear"] = float(picked.mean()) if picked.numel() else float("nan")
    boundary = -10.0 * math.log10(max(error_sum / pixels, 1e-10)) if pixels else None
    return means, boundary


TIE = 0.005  # dB: validation scores closer than this are a tie (run-to-run noise is larger still)


def replaces_kept(score: float, boundary: Optional[float], best_score: float, kept_score: float,
                  kept_boundary: Optional[float], tie: float = TIE) -> bool:
    """Whether a checkpoint replaces the kept weights: its score beats the kept one's by more than ``tie``, or
    (a tie) it lies within ``tie`` of the best score so far and has the higher PSNR near motion boundaries.
    Without boundary figures (old progress files, footage without boundaries) the higher score wins."""
    if score > kept_score + tie:
        return True
    if boundary is None or kept_boundary is None:
        return score > kept_score
    return score >= best_score - tie and boundary > kept_boundary
