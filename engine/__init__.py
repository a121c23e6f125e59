"""The inference engine: ``Interpolator`` owns the network and how it runs (see engine/interpolator.py)."""

from .interpolator import Interpolator, InterpolatorOptions, resolve_device

__all__ = ["Interpolator", "InterpolatorOptions", "resolve_device"]
