"""Feature pyramid and coarse-to-fine bidirectional flow estimation (PWC-style).

One encoder serves both the flow estimator and the synthesis network. Flow is
estimated from the coarsest level down to ``finest`` (1/4 resolution by default)
and upsampled bilinearly to full resolution.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .correlation import correlation
from .layers import conv
from .warp import backwarp, resize_flow


class Encoder(nn.Module):
    """Pyramid of features at 1/2, 1/4, ... 1/2^len(widths) resolution."""

    def __init__(self, widths: Sequence[int]) -> None:
        super().__init__()
        levels = []
        c_in = 3
        for width in widths:
            levels.append(nn.Sequential(conv(c_in, width, stride=2), conv(width, width)))
            c_in = width
        self.levels = nn.ModuleList(levels)

    def forward(self, image: torch.Tensor) -> List[torch.Tensor]:
        feats = []
        x = image - 0.5
        for level in self.levels:
            x = level(x)
            feats.append(x)
        return feats


class FlowDecoder(nn.Module):
    """Predicts a flow residual at one level from the cost volume and the features."""

    def __init__(self, width: int, radius: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.radius = radius
        c_in = (2 * radius + 1) ** 2 + width + 2
        layers = []
        for h in hidden:
            layers.append(conv(c_in, h))
            c_in = h
        layers.append(conv(c_in, 2, act=False))
        self.net = nn.Sequential(*layers)

    def forward(self, one: torch.Tensor, two: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
        return self.head(correlation(one, self.warp(two, flow), self.radius), one, flow)

    # warp and head are the parts around the correlation kernel, which model.runtime.compile_network compiles
    @staticmethod
    def warp(two: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
        """The other frame's features moved by the current flow."""
        return backwarp(two, flow)

    def head(self, cost: torch.Tensor, one: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
        """The refined flow, from the cost volume, this frame's features and the current flow."""
        return flow + self.net(torch.cat([F.leaky_relu(cost, 0.1), one, flow.to(one.dtype)], 1)).to(flow.dtype)


class FlowEstimator(nn.Module):
    """Bidirectional flow: flows one->two and two->one from one batched pass."""

    def __init__(self, widths: Sequence[int], finest: int, radius: int, hidden: Sequence[int],
                 iterations: Sequence[int] = (1,)) -> None:
        super().__init__()
        self.finest = finest  # index into the pyramid, 1 = 1/4 resolution
        self.decoders = nn.ModuleList(
            [FlowDecoder(widths[level], radius, hidden) for level in range(finest, len(widths))]
        )
        levels = len(self.decoders)
        iterations = tuple(iterations)
        if len(iterations) not in (1, levels) or min(iterations, default=0) < 1:
            raise ValueError(f"flow_iterations {iterations}: give one count of at least 1 for every level, or "
                             f"{levels} counts (coarsest level first)")
        # passes of each level's decoder, coarsest first: a pass refines the estimate with the same weights
        self.iterations = iterations * levels if len(iterations) == 1 else iterations

    def forward(self, feats_one: List[torch.Tensor], feats_two: List[torch.Tensor],
                size: Sequence[int]) -> Tuple[torch.Tensor, torch.Tensor, List[torch.Tensor]]:
        """Return [flow one->two, flow two->one] at full resolution ``size`` plus the finest level.

        Output: (flow_fwd, flow_bwd, pyramid) where pyramid lists the batched
        (2N) flows at every estimated level, coarse to fine, for supervision.
        """
        n = feats_one[0].shape[0]
        pyramid = []
        flow = None
        for i, level in enumerate(range(len(feats_one) - 1, self.finest - 1, -1)):
            a, b = _both_ways(feats_one, feats_two, level)
            if flow is None:
                flow = torch.zeros(2 * n, 2, a.shape[2], a.shape[3], device=a.device, dtype=torch.float32)
            else:
                flow = _up2(flow, a.shape[2:])
            decoder = self.decoders[len(self.decoders) - 1 - i]
            for _ in range(self.iterations[i]):
                flow = decoder(a, b, flow)
            pyramid.append(flow)
        full = resize_flow(flow, tuple(size))
        return full[:n], full[n:], pyramid


def _both_ways(feats_one: List[torch.Tensor], feats_two: List[torch.Tensor],
               level: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Both directions in one batch: (one, two) and (two, one) features of ``level``, stacked."""
    return (torch.cat([feats_one[level], feats_two[level]], 0),
            torch.cat([feats_two[level], feats_one[level]], 0))


def _up2(flow: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    """A flow at the next finer pyramid level (twice the resolution, so twice the pixels of motion)."""
    return 2.0 * F.interpolate(flow, size=size, mode="bilinear", align_corners=False)

