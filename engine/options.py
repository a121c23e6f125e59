"""The engine's settings and the checks that need no network: importing this module does not import torch, so a
command that stops at a mistake in its options, times or files says so at once (run.py's pair mode)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Union

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WEIGHTS = ROOT / "weights" / "network.safetensors"

# the precision names; "fp32" runs without autocast, "auto" is bf16 or fp32 by device and network
# (engine.interpolator.autocast_dtype gives the torch dtype)
PRECISION_NAMES = ("auto", "fp32", "fp16", "bf16")
ALPHA_MODES = ("flow", "linear")


def flow_scale_value(text: str) -> Union[float, str]:
    """A ``--flow-scale`` argument: auto, or a factor above 0 (argparse.ArgumentTypeError otherwise; the engine
    then asks for at most 1)."""
    import argparse

    try:
        value: Union[float, str] = text if text == "auto" else float(text)
    except ValueError:
        value = -1.0
    if value != "auto" and not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: use auto or a factor above 0, such as 0.5 (half the frames' "
                                         f"size)")
    return value


@dataclass(frozen=True)
class InterpolatorOptions:
    """How to run the network. Every field is checked when the options are made (ValueError naming it).

    ``precision``: "auto" runs this project's networks under bfloat16 autocast on CUDA GPUs with bfloat16
    tensor cores (compute capability 8.0 and up: A100, H100, RTX 30 series and later), where the default network
    runs a video about a fifth faster at the same measured quality, and in float32 elsewhere (the CPU, older GPUs,
    the published architecture); "fp32", "fp16", "bf16" choose one.
    ``flow_scale``: estimate flow at this fraction of the resolution; "auto": at full resolution, and for a pair
    whose motion is large (over 32 px) also at half, kept where warping the frames by it matches them better
    (``model.network.AUTO``; CUDA graphs replay it too).
    ``tile``: "auto" processes whole frames when they fit in the device's free memory, else the largest tiles
    that do; 0 always whole frames; N > 0 frames larger than N x N in overlapping N-pixel tiles.
    ``tile_overlap``: pixels shared by neighbouring tiles, cross-faded; None: 128, or a quarter of a smaller tile
    (``overlap_for``).
    ``ensemble``: average 1, 2 (the frames and their mirror image) or 4 passes (also time-reversed).
    ``alpha``: "flow" moves transparency with the network's flow (objects with their own alpha); "linear" mixes
    the two frames' alpha in time (a still matte), which is also what tiles, ensembles and the published
    network do.
    ``compile``: ``torch.compile`` the network's convolution stacks first (CUDA; ``model.runtime.compile_network``):
    each frame size compiles on its first pair, later pairs run faster; quadratic paths and CUDA graphs stay.
    ``cuda_graphs``: replay the network as CUDA graphs for integer (video) frames on CUDA, whole frames only,
    without an ensemble; the frames differ from an eager run by float rounding only.
    """

    weights: Path = DEFAULT_WEIGHTS
    device: str = "auto"
    precision: str = "auto"
    flow_scale: Union[float, str] = 1.0
    tile: Union[int, str] = "auto"
    tile_overlap: Optional[int] = None
    ensemble: int = 1
    alpha: str = "flow"
    compile: bool = False
    cuda_graphs: bool = True

    def __post_init__(self) -> None:
        if self.precision not in PRECISION_NAMES:
            raise ValueError(f"precision {self.precision!r}: use one of {', '.join(PRECISION_NAMES)}")
        scale = self.flow_scale
        if scale != "auto" and (isinstance(scale, (str, bool)) or not 0.0 < scale <= 1.0):
            raise ValueError(f"--flow-scale {self.flow_scale}: use auto or a value in (0, 1]")
        if self.tile != "auto" and (isinstance(self.tile, bool) or not isinstance(self.tile, int) or self.tile < 0):
            raise ValueError(f"--tile {self.tile!r}: use auto, 0 (whole frames) or a tile size in pixels")
        if self.tile_overlap is not None and self.tile_overlap < 1:
            raise ValueError(f"--tile-overlap {self.tile_overlap}: use at least 1 pixel")
        if self.ensemble not in (1, 2, 4):
            raise ValueError(f"--ensemble {self.ensemble}: use 1, 2 or 4 passes")
        if self.alpha not in ALPHA_MODES:
            raise ValueError(f"--alpha {self.alpha!r}: use flow or linear")

    def overlap_for(self, tile: int) -> int:
        """The overlap of tiles of ``tile`` pixels: ``tile_overlap``, or by default 128 px (a quarter of tiles under
        512 px, so that any tile size works without naming an overlap)."""
        if self.tile_overlap is not None:
            return self.tile_overlap
        return max(1, min(128, tile // 4))


def check_times(times: Sequence[float]) -> List[float]:
    """``times`` as floats, each strictly between 0 and 1 (ValueError otherwise)."""
    times = [float(t) for t in times]
    if not times:
        raise ValueError("--time: give at least one time")
    for t in times:
        if not 0.0 < t < 1.0:
            raise ValueError(f"--time {t}: times must lie strictly between 0 and 1")
    return times
