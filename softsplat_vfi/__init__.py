"""softsplat-vfi: video frame interpolation with softmax splatting (Niklaus & Liu, CVPR 2020).

    from softsplat_vfi import Interpolator, InterpolatorOptions
    interp = Interpolator(InterpolatorOptions())      # the shipped default network, on the GPU where there is one
    frames = interp(one, two, [0.5])                   # H x W x 3 float RGB in [0, 1], in and out

The layers, each depending only on those before it: ``softsplat`` (the operator, self-contained), ``model`` (the
network), ``engine`` (how it runs: ``Interpolator``), ``media`` (images, video files), ``pipeline`` (videos, frame
folders, pipes, batches) and ``cli`` (``python run.py``, ``softsplat-vfi``); ``integrations.comfyui`` is the ComfyUI
node pack. The shipped weights are in ``weights/``. Names load when first used, so that importing the package
imports no torch.
"""

from typing import Any

__all__ = ["Interpolator", "InterpolatorOptions", "resolve_device"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import engine

        return getattr(engine, name)
    raise AttributeError(f"module 'softsplat_vfi' has no attribute {name!r}")
