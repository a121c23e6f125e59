"""The inference engine: ``Interpolator`` owns the network and how it runs (see engine/interpolator.py).

The names are loaded when first used, so that importing ``engine.options`` or ``engine.files`` (which check a
command's options and files first) does not import torch.
"""

from typing import Any

__all__ = ["Interpolator", "InterpolatorOptions", "resolve_device"]


def __getattr__(name: str) -> Any:
    if name == "InterpolatorOptions":
        from .options import InterpolatorOptions

        return InterpolatorOptions
    if name in ("Interpolator", "resolve_device"):
        from . import interpolator

        return getattr(interpolator, name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
