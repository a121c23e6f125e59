"""Backward warping and reversible padding."""

from __future__ import annotations

from typing import List, Tuple

import torch
import torch.nn.functional as F


def backwarp(x: torch.Tensor, flow: torch.Tensor, padding: str = "zeros") -> torch.Tensor:
    """Sample ``x`` at (p + flow(p)) with bilinear interpolation; zeros outside (``padding="border"``: the nearest
    edge pixel).

    Grids are built per call from ``flow``'s shape, device and dtype (cheap next to
    the sampling itself), so there is no cache to bound.
    """
    n, _, h, w = flow.shape
    ys = torch.arange(h, device=flow.device, dtype=flow.dtype)
    xs = torch.arange(w, device=flow.device, dtype=flow.dtype)
    gx = (xs.view(1, 1, w) + flow[:, 0]) * (2.0 / max(w - 1, 1)) - 1.0
    gy = (ys.view(1, h, 1) + flow[:, 1]) * (2.0 / max(h - 1, 1)) - 1.0
    grid = torch.stack([gx, gy], dim=3).to(x.dtype)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode=padding, align_corners=True)


def warp_error(one: torch.Tensor, two: torch.Tensor, flow_fwd: torch.Tensor, flow_bwd: torch.Tensor) -> torch.Tensor:
    """How badly a pair's flows explain it, per sample (N): the mean absolute difference between each frame and the
    other frame backward-warped to it by its flow (edge pixels repeated), averaged over both directions, in float32."""
    one, two, flow_fwd, flow_bwd = (x.float() for x in (one, two, flow_fwd, flow_bwd))
    forward = (one - backwarp(two, flow_fwd, "border")).abs().mean(dim=(1, 2, 3))
    backward = (two - backwarp(one, flow_bwd, "border")).abs().mean(dim=(1, 2, 3))
    return (forward + backward) / 2


def resize_flow(flow: torch.Tensor, size: Tuple[int, int]) -> torch.Tensor:
    """Resize a flow field to ``size`` (H, W), rescaling the vectors to the new pixel units."""
    h, w = flow.shape[-2:]
    if (h, w) == tuple(size):
        return flow
    out = F.interpolate(flow, size=size, mode="bilinear", align_corners=False)
    # scale by Python floats: no host-to-device copy, so this can run inside a CUDA graph
    return torch.cat([out[:, :1] * (size[1] / w), out[:, 1:] * (size[0] / h)], 1)


class InputPadder:
    """Pads images so that H and W are multiples of ``multiple``; ``unpad`` undoes it exactly."""

    def __init__(self, shape: torch.Size, multiple: int = 32) -> None:
        h, w = shape[-2:]
        self.height, self.width = h, w
        pad_h = (multiple - h % multiple) % multiple
        pad_w = (multiple - w % multiple) % multiple
        # left, right, top, bottom: split the padding so content stays centred
        self.padding = (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2)

    def pad(self, *xs: torch.Tensor) -> List[torch.Tensor]:
        if not any(self.padding):
            return list(xs)
        return [F.pad(x, self.padding, mode="replicate") for x in xs]

    def unpad(self, x: torch.Tensor) -> torch.Tensor:
        left, _, top, _ = self.padding
        return x[..., top:top + self.height, left:left + self.width]


def still_weight(one: torch.Tensor, two: torch.Tensor, window: int = 7, shift: float = 0.2,
                 texture_floor: float = 0.02, flat_window: int = 21) -> torch.Tensor:
    """Per pixel, N x 1 x H x W in [0, 1]: how surely the pixel's neighbourhood did not move between the frames.

    A regular pattern (a grid, a fence) matches itself one period away, so a flow estimate that starts wrong at a
    coarse level can lock onto a whole number of periods where nothing moved, and the middle frame then shows the
    pattern half a period off: bent and doubled lines. Where zero motion explains a textured neighbourhood to
    within ``shift`` px (the mean absolute frame difference below ``shift`` times the mean absolute gradient, both
    over ``window`` x ``window``), the weight is 1; it falls to 0 at twice that difference. A flat neighbourhood
    (mean absolute gradient under ``texture_floor``, values in [0, 1]) is judged the same way over ``flat_window``
    x ``flat_window`` (0: not at all): the flat cells of a still grid then keep zero flow too, where a moving
    object beside the grid spread its motion into them (rule X, docs/quality.md). Flat at that size too, it gets
    0: zero difference says nothing there.
    """
    one, two = one.float(), two.float()

    def box(x: torch.Tensor, size: int) -> torch.Tensor:
        if size == window:
            return F.avg_pool2d(x, size, stride=1, padding=size // 2, count_include_pad=False)
        # the wide window as two 1-D means (2 size reads a pixel, not size**2): the same mean over the pixels inside;
        # the 7 px window keeps its 2-D mean, so that the textured neighbourhoods' weights stay bitwise as they were
        x = F.avg_pool2d(x, (size, 1), stride=1, padding=(size // 2, 0), count_include_pad=False)
        return F.avg_pool2d(x, (1, size), stride=1, padding=(0, size // 2), count_include_pad=False)

    def gradient(x: torch.Tensor) -> torch.Tensor:
        dx = F.pad((x[..., :, 1:] - x[..., :, :-1]).abs(), (0, 1, 0, 0))
        dy = F.pad((x[..., 1:, :] - x[..., :-1, :]).abs(), (0, 0, 0, 1))
        return (dx + dy).mean(1, keepdim=True)

    differences = (one - two).abs().mean(1, keepdim=True)
    gradients = torch.minimum(gradient(one), gradient(two))

    def judged(size: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """(the weight, whether the neighbourhood is textured) over size x size."""
        difference, texture = box(differences, size), box(gradients, size)
        bound = shift * texture
        textured = texture > texture_floor
        return ((2 * bound - difference) / bound.clamp_min(1e-6)).clamp(0, 1) * textured, textured

    weight, textured = judged(window)
    return torch.where(textured, weight, judged(flat_window)[0]) if flat_window else weight
