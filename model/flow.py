"""Feature pyramid and coarse-to-fine bidirectional flow estimation (PWC-style).

One encoder serves both the flow estimator and the synthesis network. Flow is
estimated from the coarsest level down to ``finest`` (1/4 resolution by default)
and upsampled to full resolution: bilinearly, or (``upsample_hidden`` > 0) as a
learned convex combination of each coarse pixel's 3x3 neighbours (RAFT's
upsampling), which can keep motion boundaries sharp.
"""

from __future__ import annotations

from typing import List, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .correlation import correlation
from .layers import conv, zero_last_conv
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

    def __init__(self, width: int, radius: int, hidden: Sequence[int], zero_init: bool = False) -> None:
        super().__init__()
        self.radius = radius
        c_in = (2 * radius + 1) ** 2 + width + 2
        layers = []
        for h in hidden:
            layers.append(conv(c_in, h))
            c_in = h
        layers.append(conv(c_in, 2, act=False))
        self.net = nn.Sequential(*layers)
        if zero_init:  # a stage added to a trained network: it starts by passing the flow through
            zero_last_conv(self.net)

    def forward(self, one: torch.Tensor, two: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
        warped = backwarp(two, flow)
        cost = F.leaky_relu(correlation(one, warped, self.radius), 0.1)
        return flow + self.net(torch.cat([cost, one, flow.to(one.dtype)], 1)).to(flow.dtype)


class FlowEstimator(nn.Module):
    """Bidirectional flow: flows one->two and two->one from one batched pass."""

    def __init__(self, widths: Sequence[int], finest: int, radius: int, hidden: Sequence[int],
                 refine_hidden: Sequence[int] = (), upsample_hidden: int = 0) -> None:
        super().__init__()
        self.finest = finest  # index into the pyramid, 1 = 1/4 resolution
        self.decoders = nn.ModuleList(
            [FlowDecoder(widths[level], radius, hidden) for level in range(finest, len(widths))]
        )
        # optional: one more, lighter decoder a level finer (e.g. 1/2 resolution), zero-initialised
        self.refine = None
        if refine_hidden:
            if finest < 1:
                raise ValueError("flow_refine_hidden needs flow_finest_level >= 1: there is no finer level")
            self.refine = FlowDecoder(widths[finest - 1], radius, refine_hidden, zero_init=True)
        self.upsample = None
        if upsample_hidden:
            if refine_hidden:
                raise ValueError("flow_upsample_hidden and flow_refine_hidden cannot be combined: choose one")
            self.upsample = ConvexUpsampler(widths[finest], upsample_hidden, 2 ** (finest + 1))

    def forward(self, feats_one: List[torch.Tensor], feats_two: List[torch.Tensor], size) -> List[torch.Tensor]:
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
            flow = decoder(a, b, flow)
            pyramid.append(flow)
        if self.upsample is not None and tuple(size) == tuple(s * self.upsample.factor for s in flow.shape[2:]):
            full = self.upsample(a, flow)  # ``a``: the finest level's features, both ways, from the loop's last pass
            pyramid.append(full)  # supervised at full resolution too, where the boundaries are sharp
        else:
            full = resize_flow(flow, tuple(size))
        if self.refine is not None:
            a, b = _both_ways(feats_one, feats_two, self.finest - 1)
            coarse = _up2(flow, a.shape[2:])
            fine = self.refine(a, b, coarse)
            pyramid.append(fine)
            # the refinement's correction is upsampled on its own: a zero correction leaves the flow
            # exactly as the coarser level gave it
            full = full + resize_flow(fine - coarse, tuple(size))
        return full[:n], full[n:], pyramid


class ConvexUpsampler(nn.Module):
    """Flow upsampled ``factor`` times, each fine pixel a convex combination of the 3x3 coarse pixels around its
    own, weighted by a softmax of logits predicted from the coarse level's features and flow.

    The logits are a learned residual (zero-initialised) on fixed logits that reproduce bilinear upsampling
    (``align_corners=False``, edges replicated) to within 1e-5 of a pixel per pixel of flow difference: a trained
    network grown by this stage starts where it was.
    """

    def __init__(self, width: int, hidden: int, factor: int) -> None:
        super().__init__()
        self.factor = factor
        self.net = nn.Sequential(conv(width + 2, hidden), nn.Conv2d(hidden, 9 * factor * factor, 1))
        zero_last_conv(self.net)
        self.register_buffer("base", _bilinear_logits(factor), persistent=False)

    def forward(self, feats: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
        n, _, h, w = flow.shape
        s = self.factor
        logits = self.net(torch.cat([feats, flow.to(feats.dtype)], 1)).float().view(n, 1, 9, s, s, h, w)
        weights = torch.softmax(logits + self.base, dim=2)
        neighbours = F.unfold(F.pad(flow.float() * s, (1, 1, 1, 1), mode="replicate"), 3).view(n, 2, 9, 1, 1, h, w)
        fine = (weights * neighbours).sum(2)  # n x 2 x s x s x h x w
        return fine.permute(0, 1, 4, 2, 5, 3).reshape(n, 2, h * s, w * s)


def _bilinear_logits(factor: int) -> torch.Tensor:
    """Logits (1 x 1 x 9 x s x s x 1 x 1) whose softmax gives the bilinear weights of the 3x3 neighbours."""
    offsets = (torch.arange(factor, dtype=torch.float64) + 0.5) / factor - 0.5  # sub-pixel position, coarse units
    taps = torch.arange(-1, 2, dtype=torch.float64)
    one_d = (1.0 - (taps.view(3, 1) - offsets.view(1, factor)).abs()).clamp(min=0.0)  # 3 x s
    two_d = one_d.view(3, 1, factor, 1) * one_d.view(1, 3, 1, factor)  # ky x kx x sy x sx
    return two_d.reshape(9, factor, factor).clamp(min=1e-7).log().float().view(1, 1, 9, factor, factor, 1, 1)


def _both_ways(feats_one: List[torch.Tensor], feats_two: List[torch.Tensor], level: int):
    """Both directions in one batch: (one, two) and (two, one) features of ``level``, stacked."""
    return (torch.cat([feats_one[level], feats_two[level]], 0),
            torch.cat([feats_two[level], feats_one[level]], 0))


def _up2(flow: torch.Tensor, size) -> torch.Tensor:
    """A flow at the next finer pyramid level (twice the resolution, so twice the pixels of motion)."""
    return 2.0 * F.interpolate(flow, size=size, mode="bilinear", align_corners=False)

