"""Session 44, rule L (docs/journal/scaling-study.md): ``--flow-scale auto`` with the half-scale flow chosen per
region instead of per pair. For a pair auto checks (its flow's p95 over 32 px), each direction's per-pixel warp error
(|frame - the other frame backward-warped to it|, channel mean) of the full- and the half-scale flow is averaged over
33 x 33 windows every 8 px; where the half-scale window error is lower, that region takes the half-scale flow (the
window choice upsampled bilinearly: a soft seam). Everything else is training.holdout as it is; this script patches
Network.auto_choice and runs training.holdout's command line:

    PYTHONPATH=. python3 docs/journal/raw/probe_s44_local_auto.py --data F F2 --device cuda --bf16 \
        --motion quadratic --weights weights/network.safetensors --flow-scale auto --json out.json

A probe: nothing here is product code.
"""

import sys

import torch
import torch.nn.functional as F

from model.network import AUTO_SCALE, Network
from model.warp import backwarp

WINDOW, STRIDE = 33, 8


def window_error(frame: torch.Tensor, other: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
    """The mean warp error of ``flow`` (frame -> other) over WINDOW x WINDOW windows every STRIDE pixels."""
    error = (frame.float() - backwarp(other.float(), flow.float(), "border")).abs().mean(1, keepdim=True)
    return F.avg_pool2d(error, WINDOW, STRIDE, padding=WINDOW // 2, count_include_pad=False)


def local_choice(self, one, two, feats_one, feats_two, flow_fwd, flow_bwd, candidates):
    half_fwd, half_bwd, _ = self._flows_at(one, two, feats_one, feats_two, AUTO_SCALE)
    chosen = []
    for frame, other, full, half in ((one, two, flow_fwd, half_fwd), (two, one, flow_bwd, half_bwd)):
        better = (window_error(frame, other, half) < window_error(frame, other, full)).float()
        weight = F.interpolate(better, size=frame.shape[2:], mode="bilinear", align_corners=False)
        weight = weight * candidates.view(-1, 1, 1, 1).float()
        chosen.append((weight * half.float() + (1 - weight) * full.float()).to(full.dtype))
    return chosen[0], chosen[1]


if __name__ == "__main__":
    Network.auto_choice = local_choice
    from training.holdout import main

    sys.exit(main(sys.argv[1:]))
