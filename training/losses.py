"""Reconstruction losses: Laplacian-pyramid Charbonnier, PSNR and census (ternary). (The measures that score a
frame, PSNR and the detail kept, are evaluation/metrics.py's.)"""

from __future__ import annotations

import functools
from typing import Callable, Dict

import torch
import torch.nn.functional as F

# re-exported for training/trainer.py, which imports it from here


def charbonnier(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return torch.sqrt(x * x + eps).mean()


def _binomial_kernel(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """The 5x5 binomial kernel."""
    taps = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0], dtype=dtype)
    return ((taps[:, None] * taps[None, :]) / 256.0).to(device)


# made once per device and dtype when eager: a host-to-device copy on every call would also break CUDA graph capture
# (train.py --cuda-graph)
_gauss_kernel = functools.lru_cache(maxsize=8)(_binomial_kernel)


def _gauss_down(x: torch.Tensor) -> torch.Tensor:
    # (compiling, the kernel is a constant of the graph: torch.compile traces past a cache, and warns that it does)
    made = _binomial_kernel if torch.compiler.is_compiling() else _gauss_kernel
    kernel = made(x.device, x.dtype)
    c = x.shape[1]
    x = F.pad(x, (2, 2, 2, 2), mode="reflect")
    return F.conv2d(x, kernel.expand(c, 1, 5, 5), groups=c)[:, :, ::2, ::2]


def laplacian_loss(pred: torch.Tensor, target: torch.Tensor, levels: int = 5) -> torch.Tensor:
    """Sum over pyramid levels of the Charbonnier distance of the Laplacian bands."""
    loss = pred.new_zeros(())
    a, b = pred, target
    for _ in range(levels - 1):
        da, db = _gauss_down(a), _gauss_down(b)
        ua = F.interpolate(da, size=a.shape[2:], mode="bilinear", align_corners=False)
        ub = F.interpolate(db, size=b.shape[2:], mode="bilinear", align_corners=False)
        loss = loss + charbonnier((a - ua) - (b - ub))
        a, b = da, db
    return loss + charbonnier(a - b)


def psnr_loss(pred: torch.Tensor, target: torch.Tensor, floor: float = 1e-5) -> torch.Tensor:
    """The batch's mean -PSNR in dB (images in [0, 1]): the per-sample measure the held-out margin averages, so
    each sample's gradient is weighted by 1 / its squared error. ``floor``, added to each squared error, caps a
    near-perfect sample's weight (at 50 dB)."""
    mse = (pred - target).square().flatten(1).mean(1)
    return (10.0 * torch.log10(mse + floor)).mean()


# the reconstruction losses a recipe chooses between by name (train.py --reconstruction)
RECONSTRUCTION_LOSSES: Dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "laplacian": laplacian_loss,
    "psnr": psnr_loss,
}


def _census_transform(x: torch.Tensor, patch: int = 7) -> torch.Tensor:
    gray = (0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]) * 255.0
    n = patch * patch
    eye = torch.eye(n, device=x.device, dtype=x.dtype).view(n, 1, patch, patch)
    neighbours = F.conv2d(gray, eye, padding=patch // 2)
    diff = neighbours - gray
    return diff / torch.sqrt(0.81 + diff * diff)


def census_loss(pred: torch.Tensor, target: torch.Tensor, patch: int = 7) -> torch.Tensor:
    """Soft Hamming distance of census signatures: robust to brightness changes."""
    a, b = _census_transform(pred, patch), _census_transform(target, patch)
    dist = (a - b) ** 2
    dist = (dist / (0.1 + dist)).mean(1, keepdim=True)
    # ignore the border where the patch leaves the image
    r = patch // 2
    return dist[:, :, r:-r, r:-r].mean()


def frequency_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The mean L1 distance of the frames' Fourier amplitudes (per channel, orthonormal 2-D transform): a blur lowers
    the high frequencies' amplitudes and added noise raises them, so both cost. Phase is left to the reconstruction
    loss, which already aligns the frames."""
    return (torch.fft.rfft2(pred.float(), norm="ortho").abs()
            - torch.fft.rfft2(target.float(), norm="ortho").abs()).abs().mean()
