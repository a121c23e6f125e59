"""Local correlation (cost volume) between two feature maps.

``correlation(one, two, radius)`` returns N x (2r+1)^2 x H x W: for each pixel of
``one`` the mean over channels of one(p) * two(p + d), for displacements d with
|dx|, |dy| <= r, in row-major order of (dy, dx). Runs in PyTorch on any device and
dtype (fp32, fp16, bf16): one batched reduction per vertical offset, over a strided
view of the horizontal offsets, so temporaries are (2r+1) times a feature map.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def correlation(one: torch.Tensor, two: torch.Tensor, radius: int = 3) -> torch.Tensor:
    if one.shape != two.shape:
        raise ValueError(f"correlation needs equal shapes, got {tuple(one.shape)} and {tuple(two.shape)}")
    _, c, h, w = one.shape
    padded = F.pad(two, (radius, radius, radius, radius))
    size = 2 * radius + 1
    rows = []
    for dy in range(size):
        band = padded[:, :, dy:dy + h]  # N x C x H x (W + 2r)
        windows = band.unfold(3, w, 1)  # N x C x H x size x W, a view
        rows.append(torch.einsum("nchw,nchjw->njhw", one, windows))
    return torch.cat(rows, 1) / c
