"""Softmax splatting, as published: ``softsplat.softsplat(tenIn=..., tenFlow=..., tenMetric=..., strMode=...)``.

A shim, so that published user code keeps working: the operator is ``softsplat_vfi/softsplat.py``, which stays
self-contained (torch, and CuPy on CUDA where it is installed), so that it can still be copied alone.
"""

from softsplat_vfi.softsplat import cuda_available, softsplat, splat

__all__ = ["cuda_available", "softsplat", "splat"]
