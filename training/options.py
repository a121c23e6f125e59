"""Command-line flags made from declarations: ``TrainConfig``'s fields (the recipe) and ``RunOptions``'s (how one
chunk runs). Each option is declared once, as a dataclass field with its help and its check."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from softsplat_vfi.engine.options import DefaultsFormatter, flow_scale_value
from softsplat_vfi.model.network import FlowScale
from training.config import RECIPES, ConfigError, TrainConfig, check_fields, flag


def _run(default: Any, help: str, check: Optional[Callable[[Any], bool]] = None, rule: str = "",
         **argparse_kwargs: Any) -> Any:
    return dataclasses.field(default=default, metadata={"help": help, "check": check, "rule": rule,
                                                        "argparse": argparse_kwargs})


@dataclass(frozen=True)
class RunOptions:
    """How one training chunk runs: where, how long, from what. Not part of the recipe."""

    data: Tuple[Path, ...] = _run((), "footage folders, each with clips.jsonl and its clips (e.g. footage "
                                      "footage2); held-out clips validate, all others train",
                                  type=Path, nargs="+", required=True)
    out: Optional[Path] = _run(None, "folder for checkpoints and logs", type=Path, required=True)
    recipe: Optional[str] = _run(None, "named recipe (training/config.py RECIPES); default: the resumed run's, or "
                                       "'fast'", choices=sorted(RECIPES))
    resume: Optional[Path] = _run(None, "folder of a previous chunk's output to continue (its recipe, optimizer "
                                        "and step)", type=Path)
    init_weights: Optional[Path] = _run(None, "start from a weights file and its step, with a fresh optimizer",
                                        type=Path)
    width: Optional[float] = _run(None, "a fresh network with every width multiplied by FACTOR "
                                        "(NetworkConfig.widened)", lambda v: v > 0, "must be positive",
                                  type=float, metavar="FACTOR")
    flow_level: Optional[int] = _run(None, "a fresh network with its finest flow estimate at this pyramid level (0: "
                                           "1/2 resolution; the default network's is 1, 1/4)",
                                     lambda v: 0 <= v <= 3, "must be 0-3", type=int, metavar="LEVEL")
    flow_iterations: Optional[Tuple[int, ...]] = _run(
        None, "passes of each pyramid level's flow decoder, coarsest level first (one N: every level), the same "
              "weights each pass: a fresh network, or the --init-weights network changed without new weights",
        lambda v: min(v) >= 1, "must be at least 1", type=int, nargs="+", metavar="N")
    minutes: Optional[float] = _run(None, "end this chunk after MINUTES of training (set-up not counted), resumable "
                                          "with --resume, for machines with time limits; default: train to the end "
                                          "of the schedule (or --max-steps)", lambda v: v > 0, "must be positive",
                                    type=float, metavar="MINUTES")
    max_steps: Optional[int] = _run(None, "stop after this many steps in this chunk", lambda v: v >= 0,
                                    "must be 0 or positive", type=int)
    val_every: Optional[int] = _run(None, "validate every N steps (default 1000, or the resumed run's)",
                                    lambda v: v >= 1, "must be at least 1", type=int)
    val_batches: Optional[int] = _run(None, "batches of 16 triplets per validation set (default 4, or the resumed "
                                            "run's); the first 4 are always the same triplets",
                                      lambda v: v >= 1, "must be at least 1", type=int)
    holdout_flow_scale: Optional[FlowScale] = _run(
        None, "score the held-out margin that keeps weights with flow at this scale, or auto (run.py's default for "
              "the default network), so the kept step is the one the product's frames favour (default 1, or the "
              "resumed run's)", type=flow_scale_value, metavar="SCALE")
    validate_first: bool = _run(False, "validate the starting weights first, so they stay kept unless a later "
                                       "step beats them", action="store_true")
    train_folders: Tuple[str, ...] = _run((), "train only on the clips of the --data folders with these names; "
                                              "validation uses every folder's held-out clips", nargs="+",
                                          metavar="NAME")
    frame_cache: Optional[Path] = _run(None, "keep decoded frames as .npy files in DIR, memory-mapped on the CPU "
                                             "(several runs on one machine share one copy)", type=Path,
                                       metavar="DIR")
    nonlinearity: Optional[Path] = _run(None, "with --max-nonlinearity: the triplets' measured non-linearity "
                                              "(python -m training.linearity); default OUT/nonlinearity.pt or the "
                                              "resumed run's, measured when missing", type=Path, metavar="FILE")
    rewarm: int = _run(0, "ramp the learning rate up over the first STEPS steps of this chunk, on the schedule "
                          "where it stands (a fresh optimizer on trained weights)", lambda v: v >= 0,
                       "must be 0 or positive", type=int, metavar="STEPS")
    cuda_graph: Optional[bool] = _run(None, "record the step as CUDA graphs and replay them (one GPU, no "
                                            "torchrun); default: the resumed run's choice where it can",
                                      action=argparse.BooleanOptionalAction)
    compile: bool = _run(False, "compile the step's regions between the custom kernels, and its losses, with "
                                "torch.compile (training.compiled; CUDA and Triton; the first step compiles, in "
                                "--minutes)", action="store_true")
    device: str = _run("auto", "auto, cpu or cuda[:i]")

    def __post_init__(self) -> None:
        check_fields(self)
        for name, value in (("--width", self.width), ("--flow-level", self.flow_level)):
            if value is not None and (self.resume is not None or self.init_weights is not None):
                raise ConfigError(f"{name} builds a fresh network; leave out --resume and --init-weights")
        if self.flow_iterations is not None and self.resume is not None:
            raise ConfigError("--flow-iterations changes the network a run starts from; a resumed run keeps its "
                              "own (leave out --resume, or --flow-iterations)")
        if self.nonlinearity is not None and not self.nonlinearity.is_file():
            raise ConfigError(f"--nonlinearity {self.nonlinearity}: no such file (leave the option out to "
                              f"measure the triplets in this run)")


def _recipe_flag(f: dataclasses.Field) -> Dict[str, Any]:
    fast = getattr(RECIPES["fast"], f.name)
    kwargs: Dict[str, Any] = {"help": f"{f.metadata['help']} (fast: {fast})"}
    if isinstance(fast, bool):
        kwargs["action"] = argparse.BooleanOptionalAction
    elif isinstance(fast, tuple):
        kwargs.update(nargs="*", type=str)
    else:
        kwargs["type"] = type(fast)
    if f.metadata.get("metavar"):
        kwargs["metavar"] = f.metadata["metavar"]
    return kwargs


def build_parser(description: str = "") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description, formatter_class=DefaultsFormatter)
    run = parser.add_argument_group("the run")
    for f in dataclasses.fields(RunOptions):
        run.add_argument(flag(f.name), default=f.default, help=f.metadata["help"], **f.metadata["argparse"])
    recipe = parser.add_argument_group("the recipe: each flag overrides the named recipe's value")
    for f in dataclasses.fields(TrainConfig):
        recipe.add_argument(flag(f.name), default=argparse.SUPPRESS, **_recipe_flag(f))
    return parser


def parse(argv: Optional[Sequence[str]] = None, description: str = "") -> Tuple[RunOptions, Dict[str, Any]]:
    """The run's options and the recipe fields given on the command line. Raises ConfigError."""
    args = vars(build_parser(description).parse_args(argv))
    run_names = {f.name for f in dataclasses.fields(RunOptions)}
    values = {k: v for k, v in args.items() if k in run_names}
    values["data"] = tuple(values["data"])
    values["train_folders"] = tuple(values["train_folders"] or ())
    if values["flow_iterations"] is not None:
        values["flow_iterations"] = tuple(values["flow_iterations"])
    overrides = {k: tuple(v) if isinstance(v, list) else v for k, v in args.items() if k not in run_names}
    return RunOptions(**values), overrides

