"""The training configuration: frozen, saved as JSON beside every checkpoint."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Tuple

from training.holdout import HOLDOUT_SOURCES

# The held-out clips of the runs before source-disjoint validation (training.holdout), which share source
# repositories with training clips; tools that score the older weights still use them. Middlebury is for
# evaluation only and plays no part in training or selection.
# Validation crops are this size whatever the training crop (smaller only where the training crop is: tests), so
# runs with different --crop compare on the same triplets (all runs so far trained and validated at 256).
VALIDATION_CROP = 256
VALIDATION_CLIPS: Tuple[str, ...] = (
    "davis2016-val__480p__car-shadow.mp4",
    "tokenflow__woman-running.mp4",
    "pysot__bag.mp4",
    "realbasicvsr__demo_000.mp4",
    "liveportrait__driving__d3.mp4",
    "vid2vid-cityscapes__train_B__seq0005.mp4",
    "rerender__pexels-koolshooters-7322716.mp4",
)


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 0
    batch: int = 32  # per GPU
    crop: int = 256
    lr: float = 3e-4
    weight_decay: float = 1e-3
    warmup: int = 1000
    total_steps: int = 60000  # the cosine schedule spans this many steps (from schedule_start), across chunks
    schedule_start: int = 0  # the step the warm-up and the cosine count from (train.py --restart-schedule)
    synthetic_share: float = 0.3  # fraction of each batch from synthetic layered motion
    synthetic_small_share: float = 0.0  # fraction of synthetic samples with motion scaled down 2-16x
    synthetic_edge_px: float = 0.0  # width of a synthetic layer's edge in pixels; 0: the original soft edge
    synthetic_edge_share: float = 1.0  # with synthetic_edge_px > 0: fraction of synthetic samples with those edges
    synthetic_layers: int = 2  # moving layers over the background in a synthetic sample
    synthetic_motion: float = 1.0  # multiplies the synthetic layers' largest shifts (12 px background, 32 px layers)
    synthetic_shapes: float = 0.0  # amplitude of the synthetic layers' boundary harmonics (0: ellipses)
    synthetic_warp: float = 0.0  # largest non-rigid deformation of a synthetic layer at t = 1, px (0: rigid)
    synthetic_texture_zoom: float = 1.0  # synthetic textures cut up to this much larger than the crop and shrunk
    flow_loss_weight: float = 0.05
    flow_loss_full_res: float = 1.0  # weight of a full-resolution flow level (convex upsampling) in the flow loss
    # each level's flow error in its own pixels ("level") or in 1/4-level ones ("quarter")
    flow_loss_units: str = "level"
    census_weight: float = 1.0
    max_gap: int = 4
    native_share: float = 0.0  # fraction of footage triplets at the stored rate (k = 1), not motion-weighted
    downscale_share: float = 0.0  # fraction of footage crops taken 1-2x larger and shrunk to the crop size
    photometric_share: float = 0.0  # fraction of footage triplets given one random colour change
    paste_share: float = 0.0  # fraction of footage triplets with synthetic moving layers pasted over them
    paste_layers: int = 1  # layers pasted over each of those triplets
    max_nonlinearity: float = 0.0  # > 0: footage triplets straying more than this (px) from constant velocity left out
    ema_decay: float = 0.0  # > 0: validate and save an exponential moving average of the weights
    bf16: bool = True
    # held-out clips: empty (the default) holds out whole source repositories (training.holdout: footage2's val
    # split and the repositories below), and weights are chosen by the margin over the classical baseline there;
    # clip names (runs before the held-out sources, and tests) hold out those clips of the same sources instead
    validation_clips: Tuple[str, ...] = ()
    holdout_sources: Tuple[str, ...] = HOLDOUT_SOURCES

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(dataclasses.asdict(self), indent=2) + "\n")

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        """A config saved by ``save`` (or stored in a weights file): fields added since then take their
        defaults, unknown ones are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        for key in ("validation_clips", "holdout_sources"):
            if key in values:
                values[key] = tuple(values[key])
        return cls(**values)
