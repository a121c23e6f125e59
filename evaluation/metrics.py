"""The measures every scorer reports: PSNR, SSIM and the detail an output keeps.

Conventions: tensors N x C x H x W, arrays H x W x 3, values in [0, 1] unless the name says uint8; the uint8
measures round float frames as a written 8-bit frame is rounded (``to_integer``).
"""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np
import torch


def psnr(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample PSNR in dB for images in [0, 1]."""
    mse = ((pred.clamp(0, 1) - target) ** 2).flatten(1).mean(1)
    return -10.0 * torch.log10(mse.clamp_min(1e-10))


def edge_energy(x: torch.Tensor) -> torch.Tensor:
    """Mean absolute 4-neighbour Laplacian per image (N x C x H x W -> N), over the interior pixels: how much fine
    detail a frame holds. ``edge_energy(out) / edge_energy(truth)`` is the detail kept: PSNR rewards blurring a
    pattern it cannot place, this ratio shows it (below 1: washed out; above 1: doubled or noisy edges)."""
    x = x.float()
    lap = (x[:, :, 1:-1, :-2] + x[:, :, 1:-1, 2:] + x[:, :, :-2, 1:-1] + x[:, :, 2:, 1:-1]
           - 4 * x[:, :, 1:-1, 1:-1])
    return lap.abs().flatten(1).mean(1)


def detail_kept(out: torch.Tensor, truth: torch.Tensor) -> float:
    """The detail an output keeps: ``edge_energy`` of the uint8-rounded output over the truth's (frames N x C x H x W
    in [0, 1])."""
    return float(edge_energy((out.clamp(0, 1) * 255).round()) / edge_energy((truth * 255).round()).clamp_min(1e-6))


def nchw(frame: np.ndarray) -> torch.Tensor:
    """An H x W x C array as a 1 x C x H x W float tensor (the same values)."""
    return torch.from_numpy(np.ascontiguousarray(frame)).permute(2, 0, 1).unsqueeze(0).float()


def to_float(frame: np.ndarray) -> np.ndarray:
    """An integer frame as float32 in [0, 1] (by its dtype's largest value)."""
    return frame.astype(np.float32) / float(np.iinfo(frame.dtype).max)


def to_integer(frame: np.ndarray, dtype: np.dtype = np.uint8) -> np.ndarray:
    """A float frame in [0, 1] rounded to the integer ``dtype``, as an image file of that depth holds it."""
    top = float(np.iinfo(dtype).max)
    return np.clip(np.rint(frame * top), 0, top).astype(dtype)


def uint8_psnr(out: np.ndarray, truth: np.ndarray, mask: Optional[np.ndarray] = None) -> float:
    """PSNR in dB of two uint8 frames (scikit-image's ``peak_signal_noise_ratio`` with data_range 255), over ``mask``
    (H x W bool) where given; the squared error's floor, 1e-10, keeps identical frames finite."""
    err = (out.astype(np.float64) - truth.astype(np.float64)) ** 2
    mse = err[mask].mean() if mask is not None else err.mean()
    return float(10 * np.log10(255.0 ** 2 / max(mse, 1e-10)))


def uint8_scores(out: np.ndarray, truth: np.ndarray) -> Tuple[float, float, float]:
    """(PSNR, SSIM, detail kept) of an H x W x 3 float output against its uint8 truth, the output rounded to uint8
    first: the published protocols' measures (scikit-image's SSIM, data_range 255)."""
    from skimage.metrics import structural_similarity

    estimate = to_integer(out)
    ssim = structural_similarity(truth, estimate, data_range=255, channel_axis=2)
    detail = detail_kept(nchw(estimate) / 255, nchw(truth) / 255)
    return uint8_psnr(estimate, truth), float(ssim), detail
