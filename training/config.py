"""The training configuration and its named recipes.

``TrainConfig`` is the recipe: frozen, saved as JSON beside every checkpoint and in the weights' metadata. Each
field is declared once, with its help text and its check; ``training.options`` makes the command-line flags from
these declarations. Its defaults are recipe ``fast`` (``RECIPES["fast"]``), the anneal of the fast weights' second
stage; ``RECIPES`` names the others in use: the fast weights' (``weights/fast.safetensors``) ``fast-base``,
``fast`` and ``fast-psnr``, and the thirteen stages of the default weights (``weights/network.safetensors``):
``study`` at width 2, then ``quality-384``, ``quality-512``, ``quality-no-census``, ``quality-no-flow``,
``quality``, ``quality-psnr``, ``quality-psnr-syn20`` twice and ``quality-psnr-stripes`` (averaged with stages
7-9), ``quality-psnr-quadratic`` twice and ``quality-psnr-mixed`` (docs/training.md).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from training.listing import CONFIRMATION_SOURCES, HOLDOUT_SOURCES
from training.losses import RECONSTRUCTION_LOSSES

# The held-out clips of the runs before source-disjoint validation (training.holdout), which share source
# repositories with training clips; the fast weights' first two stages were validated on them, and tools that
# score older weights still use them. Middlebury is for evaluation only and plays no part in training or selection.
VALIDATION_CLIPS: Tuple[str, ...] = (
    "davis2016-val__480p__car-shadow.mp4",
    "tokenflow__woman-running.mp4",
    "pysot__bag.mp4",
    "realbasicvsr__demo_000.mp4",
    "liveportrait__driving__d3.mp4",
    "vid2vid-cityscapes__train_B__seq0005.mp4",
    "rerender__pexels-koolshooters-7322716.mp4",
)
# Validation crops are this size whatever the training crop (smaller only where the training crop is: tests), so
# runs with different --crop compare on the same triplets.
VALIDATION_CROP = 256
# the paths to t that --motion names (softsplat_vfi/model/motion.py)
MOTIONS = ("linear", "quadratic")


class TrainingError(Exception):
    """A run that cannot start as asked: one line for the user (train.py reports it once, without a traceback)."""


class ConfigError(TrainingError, ValueError):
    """A recipe or option value that cannot train; the message names the command-line flag."""


def _option(default: Any, help: str, check: Optional[Callable[[Any], bool]] = None, rule: str = "",
            metavar: Optional[str] = None) -> Any:
    """One option's whole declaration: default, help, and the check its value must pass (``rule`` says it)."""
    return dataclasses.field(default=default, metadata={"help": help, "check": check, "rule": rule,
                                                        "metavar": metavar})


def _share(default: float, help: str) -> Any:
    return _option(default, help, lambda v: 0.0 <= v <= 1.0, "must lie in [0, 1]", "SHARE")


def _non_negative(default: float, help: str, metavar: Optional[str] = None) -> Any:
    return _option(default, help, lambda v: v >= 0, "must be 0 or positive", metavar)


def _at_least_one(default: int, help: str, metavar: Optional[str] = None) -> Any:
    return _option(default, help, lambda v: v >= 1, "must be at least 1", metavar)


def flag(name: str) -> str:
    """The command-line flag of a field: ``synthetic_share`` -> ``--synthetic-share``."""
    return "--" + name.replace("_", "-")


def check_fields(obj: Any) -> None:
    """Raise ConfigError, naming the flag, for the first field of a dataclass whose value breaks its rule."""
    for f in dataclasses.fields(obj):
        check = f.metadata.get("check")
        value = getattr(obj, f.name)
        if check is not None and value is not None and not check(value):
            raise ConfigError(f"{flag(f.name)} {f.metadata['rule']}, got {value}")


@dataclass(frozen=True)
class TrainConfig:
    """The recipe. Defaults: recipe ``fast``, the fast weights' second stage (session 17's chunk 60,
    ``git show 3def0eb:docs/journal/raw/train_config_chunk60.json``): a 7000-step anneal with the non-linearity
    filter from the step-25000 weights of a run from scratch."""

    seed: int = _option(61, "random seed (batches, augmentation, synthetic scenes)")
    batch: int = _at_least_one(32, "triplets per step and process (on N processes a step takes N x batch)")
    crop: int = _option(256, "training crop size in pixels", lambda v: v >= 32, "must be at least 32", "PX")
    lr: float = _option(2e-4, "peak learning rate (AdamW) of one process; N processes peak at lr x sqrt(N)",
                       lambda v: v > 0, "must be positive")
    weight_decay: float = _non_negative(1e-3, "AdamW weight decay (not on biases and norms)")
    warmup: int = _non_negative(1000, "linear warm-up steps of the schedule", "STEPS")
    total_steps: int = _at_least_one(7000, "length of the cosine schedule from --schedule-start; the run stops at "
                                           "its end", "STEPS")
    schedule_start: int = _non_negative(25000, "the step the warm-up and the cosine count from (a schedule "
                                               "restarted on trained weights: their step)", "STEP")
    synthetic_share: float = _option(0.5, "fraction of each batch from synthetic layered motion (exact ground truth; "
                                          "footage fills the rest)", lambda v: 0.0 <= v < 1.0, "must lie in [0, 1)",
                                     "SHARE")
    synthetic_small_share: float = _share(0.3, "fraction of synthetic samples with motion scaled down 2-16x")
    synthetic_edge_px: float = _non_negative(1.0, "width of a synthetic layer's edge in pixels (0: the original "
                                                  "soft edge, 9-33 px wide)", "PX")
    synthetic_edge_share: float = _share(0.3, "with --synthetic-edge-px > 0: fraction of synthetic samples with "
                                              "those edges")
    synthetic_layers: int = _at_least_one(4, "moving layers over the background in a synthetic sample", "N")
    synthetic_motion: float = _option(2.0, "factor on the synthetic layers' largest shifts (1: 12 px background, "
                                           "32 px layers)", lambda v: v > 0, "must be positive", "SCALE")
    synthetic_noise: float = _non_negative(0.0, "largest standard deviation of the sensor noise on the synthetic "
                                                "samples' frames, drawn per sample (0: none; training.data."
                                                "sensor_noise)")
    synthetic_stripe_share: float = _share(0.0, "fraction of the synthetic layers (the background included) "
                                                "textured with straight stripes of 4-16 px period, such as blinds")
    flow_loss_weight: float = _non_negative(0.05, "weight of the flow's end-point error against the synthetic "
                                                  "samples' ground truth (per pyramid level, in its own pixels)")
    census_weight: float = _non_negative(1.0, "weight of the census loss beside the reconstruction loss")
    frequency_weight: float = _non_negative(0.0, "weight of the L1 distance of the frames' Fourier amplitudes "
                                                 "beside the reconstruction loss (training.losses.frequency_loss)")
    reconstruction: str = _option("laplacian", "reconstruction loss: laplacian (Charbonnier distance of Laplacian "
                                               "pyramid bands) or psnr (the batch's mean -PSNR in dB, the measure "
                                               "validation averages: each sample weighted by 1 / its squared "
                                               "error)", lambda v: v in RECONSTRUCTION_LOSSES,
                                  f"must be one of {', '.join(RECONSTRUCTION_LOSSES)}", "LOSS")
    max_gap: int = _at_least_one(4, "largest frame gap k of a footage triplet (slow clips get wider gaps)")
    native_share: float = _share(0.25, "fraction of footage triplets at the stored rate (k = 1)")
    downscale_share: float = _share(1.0, "fraction of footage crops taken up to 2x larger and shrunk")
    paste_share: float = _share(0.3, "fraction of footage triplets with a synthetic moving layer pasted over them")
    max_nonlinearity: float = _non_negative(2.0, "leave out footage triplets whose middle frame strays more than "
                                                 "PX from constant velocity (training/linearity.py; 0: off)", "PX")
    ema_decay: float = _option(0.999, "validate and save a moving average of the weights with this decay (0: off)",
                               lambda v: 0.0 <= v < 1.0, "must lie in [0, 1) (0 turns the average off)", "DECAY")
    motion: str = _option("linear", "paths to t: linear (constant velocity from the pair) or quadratic (footage "
                                    "triplets also take the frames as far before and after the pair as its "
                                    "frames are apart, where the shot has them, and pixels move along quadratic "
                                    "paths through them, model/motion.py; the held-out margin is scored the "
                                    "same way)", lambda v: v in MOTIONS, f"must be one of {', '.join(MOTIONS)}",
                          "MOTION")
    quadratic_share: float = _share(1.0, "with --motion quadratic: fraction of footage triplets trained along "
                                         "quadratic paths where the shot has the outer frames (the others at "
                                         "constant velocity, as image pairs and clip ends run)")
    bf16: bool = _option(True, "bfloat16 autocast on CUDA")
    # held-out clips: empty holds out whole source repositories (training.holdout: footage2's val split and the
    # repositories of HOLDOUT_SOURCES); clip names hold out those clips instead (the fast weights' runs, tests)
    validation_clips: Tuple[str, ...] = _option(VALIDATION_CLIPS, "held-out clip files (none: whole held-out "
                                                                  "source repositories, training/holdout.py)", None,
                                                "", "FILE")
    holdout_sources: Tuple[str, ...] = _option(HOLDOUT_SOURCES, "source repositories held out whole when "
                                                                "--validation-clips is empty", None, "", "REPO")
    exclude_sources: Tuple[str, ...] = _option((), "source repositories neither trained nor validated on (the "
                                                   "campaign's confirmation set, training.listing)", None, "",
                                               "REPO")

    def __post_init__(self) -> None:
        check_fields(self)
        if self.motion != "quadratic" and self.quadratic_share != 1.0:
            raise ConfigError(f"--quadratic-share {self.quadratic_share} picks triplets for quadratic paths: add "
                              f"--motion quadratic, or leave it at 1 with --motion {self.motion}")

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(dataclasses.asdict(self), indent=2) + "\n")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict, source: str = "the saved config") -> "TrainConfig":
        """A config saved by ``save`` (or stored in a weights file). Fields it lacks take the values the code had
        when it was written (``LEGACY``); an option removed since then is an error unless it holds its old
        default (docs/findings.md, "Training options tried and removed", says what each one found)."""
        names = {f.name for f in dataclasses.fields(cls)}
        for key, value in data.items():
            if key not in names and key in REMOVED and value != REMOVED[key]:
                raise ConfigError(f"{source} sets {flag(key)} {value}, an option removed from train.py "
                                  f"(docs/findings.md, \"Training options tried and removed\"); train it with "
                                  f"an older commit")
        values = {**LEGACY, **{k: v for k, v in data.items() if k in names}}
        for key in ("validation_clips", "holdout_sources", "exclude_sources"):
            if key in values:
                values[key] = tuple(values[key])
        return cls(**values)


# Removed options and the value every recipe kept them at; saved configs holding those values still load.
REMOVED: Dict[str, Any] = {"synthetic_shapes": 0.0, "synthetic_warp": 0.0, "synthetic_texture_zoom": 1.0,
                           "flow_loss_full_res": 1.0, "flow_loss_units": "level", "photometric_share": 0.0,
                           "paste_layers": 1, "laplacian_levels": 5,
                           "max_upscale": 1.0, "target_motion": 6.0, "paste_stripe_share": 0.0}

# What a saved config without a field meant: the defaults of the code before the fast recipe became the
# default (every config saved so far holds every other field).
LEGACY: Dict[str, Any] = {"seed": 0, "lr": 3e-4, "total_steps": 60000, "schedule_start": 0, "synthetic_share": 0.3,
                          "synthetic_small_share": 0.0, "synthetic_edge_px": 0.0,
                          "synthetic_edge_share": 1.0, "synthetic_layers": 2, "synthetic_motion": 1.0,
                          "native_share": 0.0, "downscale_share": 0.0, "paste_share": 0.0, "max_nonlinearity": 0.0,
                          "ema_decay": 0.0, "validation_clips": (), "motion": "linear"}

_QUALITY_384 = TrainConfig(seed=80, batch=14, crop=384, lr=1e-4, warmup=300, total_steps=5000, schedule_start=40000,
                           synthetic_motion=3.0, downscale_share=0.5, max_nonlinearity=0.0, validation_clips=())

_QUALITY_512 = dataclasses.replace(_QUALITY_384, batch=8, crop=512, schedule_start=45000)
_NO_CENSUS = dataclasses.replace(_QUALITY_512, census_weight=0.0, schedule_start=50000)
_NO_FLOW = dataclasses.replace(_NO_CENSUS, flow_loss_weight=0.0, schedule_start=55000)
_PSNR = dataclasses.replace(_NO_FLOW, schedule_start=65000, lr=3e-5, reconstruction="psnr")
_PSNR_SYN20 = dataclasses.replace(_PSNR, schedule_start=69919, synthetic_share=0.2)
_STRIPES = dataclasses.replace(_PSNR_SYN20, synthetic_stripe_share=0.1)
_QUADRATIC = dataclasses.replace(_STRIPES, motion="quadratic")

_FAST = TrainConfig()

RECIPES: Dict[str, TrainConfig] = {
    # the second stage of the fast weights (weights/fast.safetensors): an anneal of the step-25000 weights of
    # session 14's run (docs/training.md)
    "fast": _FAST,
    # the third and fourth stages of the fast weights: the step-32000 weights of "fast", then that stage's weights,
    # each trained 5000 steps on the PSNR loss at 3e-5 on both footage folders (no non-linearity filter, whole
    # source repositories held out)
    "fast-psnr": dataclasses.replace(_FAST, schedule_start=32000, total_steps=5000, lr=3e-5, reconstruction="psnr",
                                     max_nonlinearity=0.0, validation_clips=()),
    # the scaling study (docs/findings.md, F1): the fast recipe without the non-linearity filter, from
    # scratch on one 40000-step cosine, validated on the held-out source repositories
    "study": TrainConfig(seed=80, lr=3e-4, total_steps=40000, schedule_start=0, max_nonlinearity=0.0,
                         validation_clips=()),
    # the from-scratch campaign's screen (issue 84, rule AC in docs/quality.md): "study" on one 12000-step cosine,
    # the confirmation set's repositories left out; the control and every arm train it from the same seed
    "screen": TrainConfig(seed=80, lr=3e-4, total_steps=12000, schedule_start=0, max_nonlinearity=0.0,
                          validation_clips=(), exclude_sources=CONFIRMATION_SOURCES),
    # the first stage of the fast weights (session 14's run 40a, from scratch, kept at step 25000)
    "fast-base": TrainConfig(seed=40, lr=3e-4, total_steps=100000, schedule_start=0, max_nonlinearity=0.0),
    # the second stage of the default weights (weights/network.safetensors): the step-40000 weights of "study" at
    # width 2, trained 5000 more steps on larger crops (the same pixels per step) and larger motion
    "quality-384": _QUALITY_384,
    # the third stage of the default weights: the step-45000 weights of "quality-384", the same again on
    # 512-px crops (the same pixels per step again)
    "quality-512": _QUALITY_512,
    # the fourth stage: the step-50000 weights of "quality-512", the same again without the census term (the
    # reconstruction loss alone, closer to what PSNR measures)
    "quality-no-census": _NO_CENSUS,
    # the fifth stage: the step-55000 weights of "quality-no-census", the same again without the flow's end-point
    # error on the synthetic samples (the reconstruction loss alone supervises the flow too)
    "quality-no-flow": _NO_FLOW,
    # the sixth stage: the step-60000 weights of "quality-no-flow", the same 5000 steps once more
    "quality": dataclasses.replace(_NO_FLOW, schedule_start=60000),
    # the seventh and last stage: the step-65000 weights of "quality", exported with two flow passes below the
    # coarsest level (training.export --flow-iterations 1 2 2 2), trained 5000 steps on the PSNR loss at a third
    # of the rate
    "quality-psnr": _PSNR,
    # the eighth and ninth stages: "quality-psnr" again with a new warm-up and cosine from stage 7's step (69919)
    # and a fifth of each batch synthetic instead of half; stage 8 from stage 7's weights, stage 9 from soup A
    # (training.average of stages 8 and 7); soup B is the average of stage 9 and soup A
    "quality-psnr-syn20": _PSNR_SYN20,
    # the tenth stage, from soup B: "quality-psnr-syn20" with a tenth of the synthetic layers textured with fine
    # stripes (blinds); soup C is the average of stage 10 and soup B
    "quality-psnr-stripes": _STRIPES,
    # the eleventh and twelfth stages, from soup C (step 69919), then from stage 11's end (--schedule-start 74919):
    # "quality-psnr-stripes" with four-frame footage samples, along quadratic paths (--motion quadratic)
    "quality-psnr-quadratic": _QUADRATIC,
    # the thirteenth and last stage, from stage 12's end (step 79919): half the footage triplets along quadratic
    # paths, the other half at constant velocity
    "quality-psnr-mixed": dataclasses.replace(_QUADRATIC, schedule_start=79919, quadratic_share=0.5),
}
