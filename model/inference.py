"""Interpolating numpy images or tensors with a network: the library's one entry point.

``interpolate(net, one, two, times)`` takes H x W x 3 float RGB arrays in [0, 1]
(or N x 3 x H x W tensors) and returns one array (or tensor) per t.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Union

import numpy as np
import torch

from .network import Network

Image = Union[np.ndarray, torch.Tensor]


def _to_tensor(x: Image, name: str, device: torch.device) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        if x.ndim != 3 or x.shape[2] != 3:
            raise ValueError(f"{name} must be an H x W x 3 array, got shape {x.shape}")
        x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).permute(2, 0, 1).unsqueeze(0)
    elif isinstance(x, torch.Tensor):
        if x.dim() == 3:
            x = x.unsqueeze(0)
    else:
        raise ValueError(f"{name} must be a numpy array or a torch tensor, got {type(x).__name__}")
    if x.numel() == 0:
        raise ValueError(f"{name} is empty: shape {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return x.to(device, torch.float32)


@torch.no_grad()
def interpolate(net: Network, one: Image, two: Image, times: Sequence[float] = (0.5,),
                autocast_dtype: Optional[torch.dtype] = None, flow_scale: float = 1.0) -> List[Image]:
    """Frames at each t of ``times`` between ``one`` (t=0) and ``two`` (t=1), in the input's form."""
    device = next(net.parameters()).device
    a = _to_tensor(one, "one", device)
    b = _to_tensor(two, "two", device)
    if a.shape != b.shape:
        raise ValueError(f"frames differ in size: {tuple(a.shape[-2:])} and {tuple(b.shape[-2:])}")
    with torch.autocast(device.type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
        outs = net(a, b, list(times), flow_scale)
    outs = [o.float().clamp(0.0, 1.0) for o in outs]
    if isinstance(one, np.ndarray):
        return [o[0].permute(1, 2, 0).cpu().numpy() for o in outs]
    if isinstance(one, torch.Tensor) and one.dim() == 3:
        return [o[0] for o in outs]
    return outs
