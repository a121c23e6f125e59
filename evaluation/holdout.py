"""The held-out sets' measure: a method's PSNR and detail kept on triplets of footage (which triplets, and the
classical baseline they are measured against, are training.holdout's).

A triplet is scored as users get its middle frame: from the pair alone (``method.interpolate``, run.py's pair
mode, float output), or, where it kept a frame beside the pair on either side, along run.py --video's path
(``method.interpolate_video`` on the uint8 frames, through those neighbours: quadratic paths, CUDA graphs on a GPU;
uint8 output, as a video holds it). t = 0.5, whole frames.
"""

from __future__ import annotations

from typing import List, Optional, Protocol, Sequence

import numpy as np
import torch

from evaluation.methods import Benchmark, Method
from evaluation.metrics import detail_kept, nchw, psnr, to_float

# whole frames (the triplets are scored as they were chosen); otherwise the user's defaults
HOLDOUT = Benchmark("held-out footage", engine=(("tile", 0),), note="t = 0.5")


class HeldOutTriplet(Protocol):
    """What is read of a triplet (``training.holdout.Triplet``): 3 x H x W uint8 RGB CPU tensors."""

    one: torch.Tensor
    mid: torch.Tensor
    two: torch.Tensor
    before: Optional[torch.Tensor]  # the frame as far before one as two is after it, if kept
    after: Optional[torch.Tensor]  # the frame as far after two, if kept


def _array(frame: torch.Tensor) -> np.ndarray:
    return frame.permute(1, 2, 0).numpy()


def middle_frame(method: Method, triplet: HeldOutTriplet) -> np.ndarray:
    """The method's middle frame of ``triplet``, H x W x 3 float in [0, 1] (the module docstring says which call)."""
    one, two = _array(triplet.one), _array(triplet.two)
    if triplet.before is None and triplet.after is None:
        return method.interpolate(to_float(one), to_float(two), 0.5)
    before, after = (None if x is None else _array(x) for x in (triplet.before, triplet.after))
    return to_float(method.interpolate_video(one, two, 0.5, before, after))


def triplet_scores(method: Method, triplets: Sequence[HeldOutTriplet],
                   details: Optional[List[float]] = None) -> torch.Tensor:
    """The method's PSNR on every triplet (a CPU tensor); ``details`` (if given) collects the detail kept."""
    scores = []
    with torch.no_grad():
        for triplet in triplets:
            out = nchw(middle_frame(method, triplet))
            mid = triplet.mid.float().div(255).unsqueeze(0)
            scores.append(psnr(out.clamp(0, 1), mid))
            if details is not None:
                details.append(detail_kept(out, mid))
    return torch.cat(scores)
