"""Splatting the frames and their features to time t, and decoding the result.

The importance metric comes from the brightness-constancy error (how well the
other frame, backward-warped by the flow, explains each pixel), refined by a
small network; softmax splatting then lets the more reliable pixel win where
several land on one target.
"""

from __future__ import annotations

from typing import List, Sequence, Union

import torch
import torch.nn.functional as F
from torch import nn

from .. import softsplat

from .layers import conv, run_padded
from .warp import backwarp


class Metric(nn.Module):
    """Importance metric Z (N x 1 x H x W) for softmax splatting.

    On a GPU its two convolutions run with their channels padded to multiples of 8 (``layers.run_padded``: the same
    values): at full resolution, 4 -> 12 -> 1 fell to a cuDNN kernel without tensor cores, 2.5 of the fast network's
    16.3 ms a 1080p pair on an H100 (F81). ``pads_own_channels`` tells ``runtime.pad_channels`` to leave it so."""

    pads_own_channels = True

    def __init__(self, hidden: int = 12) -> None:
        super().__init__()
        self.net = nn.Sequential(conv(4, hidden), conv(hidden, 1, act=False))
        self.scale = nn.Parameter(torch.tensor(-20.0))

    def forward(self, image: torch.Tensor, other: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
        error = (image - backwarp(other, flow)).abs().mean(1, keepdim=True)
        features = torch.cat([image - 0.5, error], 1)
        refined = run_padded(self.net, features) if features.is_cuda else self.net(features)
        return (self.scale * error + refined).clamp(-50.0, 50.0)


def splat_pyramid(image: torch.Tensor, feats: Sequence[torch.Tensor], flow: torch.Tensor,
                   metric: torch.Tensor) -> List[torch.Tensor]:
    """Softmax-splat the image (plus a coverage channel) and each feature level by ``flow``."""
    flow = flow.float()
    metric = metric.float()
    ones = torch.ones_like(image[:, :1])
    out = [softsplat.splat(torch.cat([image, ones], 1), flow, metric, "soft")]
    for feat in feats:
        h, w = feat.shape[2:]
        scale = h / flow.shape[2]
        f = F.interpolate(flow, size=(h, w), mode="bilinear", align_corners=False) * scale
        factor = metric.shape[2] // h
        if metric.shape[2] == h * factor and metric.shape[3] == w * factor:
            m = F.avg_pool2d(metric, factor)  # much faster than the adaptive kernel on CUDA
        else:
            m = F.adaptive_avg_pool2d(metric, (h, w))
        out.append(softsplat.splat(feat, f, m, "soft"))
    return out


class Decoder(nn.Module):
    """U-Net over the splatted pyramids of both frames, coarse to fine."""

    def __init__(self, feat_widths: Sequence[int], widths: Sequence[int], full: int) -> None:
        super().__init__()
        # widths[i] is the decoder width at pyramid level i (1/2^(i+1)); ``full`` at full resolution
        levels = len(feat_widths)
        self.levels = levels
        blocks = []
        c_up = 0
        for level in range(levels - 1, -1, -1):
            c_in = 2 * feat_widths[level] + c_up + (1 if level == levels - 1 else 0)
            width = widths[level]
            blocks.append(nn.Sequential(conv(c_in, width), conv(width, width)))
            c_up = width
        self.blocks = nn.ModuleList(blocks)
        self.full = nn.Sequential(conv(2 * 4 + c_up, full), conv(full, full), conv(full, 4, act=False))

    def forward(self, warped_one: List[torch.Tensor], warped_two: List[torch.Tensor],
                t: Union[float, torch.Tensor]) -> torch.Tensor:
        """``t``: a float, or an N x 1 x 1 x 1 tensor of per-sample times."""
        x = None
        for i, level in enumerate(range(self.levels - 1, -1, -1)):
            a, b = warped_one[level + 1], warped_two[level + 1]
            if x is None:
                time = torch.zeros_like(a[:, :1]) + t
                x = torch.cat([a, b, time], 1)
            else:
                x = F.interpolate(x, size=a.shape[2:], mode="bilinear", align_corners=False)
                x = torch.cat([a, b, x], 1)
            x = self.blocks[i](x)
        img_one, img_two = warped_one[0], warped_two[0]
        x = F.interpolate(x, size=img_one.shape[2:], mode="bilinear", align_corners=False)
        inputs = torch.cat([img_one.to(x.dtype), img_two.to(x.dtype), x], 1)
        out = self.full(inputs).float()
        mask = torch.sigmoid(out[:, 3:4])
        blend = mask * img_one[:, :3].float() + (1.0 - mask) * img_two[:, :3].float()
        return blend + out[:, :3]
