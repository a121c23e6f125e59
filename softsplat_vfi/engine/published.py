"""The published softmax-splatting API, with its meanings, for code written against it (run.py re-exports these).

Conventions of the published code, kept here and only here: colour frames are BGR (OpenCV's order), tensors
float in [0, 1]; flow is in pixels, x then y.

    tenFlow = torch.FloatTensor(numpy.ascontiguousarray(run.read_flo('flow.flo').transpose(2, 0, 1)[None]))
    tenMetric = torch.nn.functional.l1_loss(input=tenOne, target=run.backwarp(tenIn=tenTwo, tenFlow=tenFlow),
                                            reduction='none').mean([1], True)
    tenOut = softsplat.softsplat(tenIn=tenOne, tenFlow=tenFlow * t, tenMetric=-20.0 * tenMetric, strMode='soft')
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, List, Sequence, Union

import numpy as np
import torch

if TYPE_CHECKING:
    from .interpolator import Interpolator

FLO_TAG = 202021.25  # Middlebury .flo files start with this float32 ("PIEH" in ASCII)


def read_flo(strFile: Union[str, Path]) -> np.ndarray:  # the published argument names, here and below
    """A Middlebury .flo file as an H x W x 2 float32 array (x then y, in pixels).

    The file holds the float32 tag 202021.25, the width and the height as int32, then H x W x 2 float32,
    little-endian. A file that is not one raises ValueError naming it.
    """
    path = Path(strFile)
    data = path.read_bytes()
    if len(data) < 12 or np.frombuffer(data, "<f4", 1, 0)[0] != np.float32(FLO_TAG):
        raise ValueError(f"{path}: not a .flo file (it does not start with the tag {FLO_TAG})")
    width, height = (int(v) for v in np.frombuffer(data, "<i4", 2, 4))
    if width < 1 or height < 1 or len(data) != 12 + 8 * width * height:
        raise ValueError(f"{path}: a {width}x{height} .flo file needs {12 + 8 * max(width * height, 0)} bytes, "
                         f"it has {len(data)}")
    return np.frombuffer(data, "<f4", 2 * width * height, 12).astype(np.float32).reshape(height, width, 2)


def backwarp(tenIn: torch.Tensor, tenFlow: torch.Tensor) -> torch.Tensor:
    """``tenIn`` (N x C x H x W) warped backward by ``tenFlow`` (N x 2 x H x W, pixels, x then y): the output at p
    is ``tenIn`` sampled bilinearly at p + flow(p), zeros outside the frame (the published grid_sample call)."""
    from ..model.warp import backwarp as warp

    return warp(tenIn, tenFlow)


@functools.lru_cache(maxsize=1)
def _interpolator() -> "Interpolator":
    """The engine ``estimate`` runs, made on its first call and kept: published code calls ``estimate`` once per
    pair, and each frame size is planned once (``engine.interpolator.FramePlan``), not once per call."""
    from .interpolator import Interpolator, InterpolatorOptions

    return Interpolator(InterpolatorOptions(tile=0))


def estimate(tenOne: torch.Tensor, tenTwo: torch.Tensor,
             fltTimes: Sequence[float] = (0.5,)) -> List[torch.Tensor]:
    """Frames at each t of ``fltTimes``: 3 x H x W float tensors in [0, 1], BGR, in; 3 x H x W CPU tensors, BGR,
    out. The committed weights on the first GPU, or the CPU; whole frames."""
    for name, ten in (("tenOne", tenOne), ("tenTwo", tenTwo)):
        if not isinstance(ten, torch.Tensor) or ten.dim() != 3 or ten.shape[0] != 3:
            raise ValueError(f"{name} must be a 3 x H x W tensor (BGR, values in [0, 1])")
    outs = _interpolator()(tenOne.flip(0), tenTwo.flip(0), list(fltTimes))
    return [o.flip(0).cpu() for o in outs]
