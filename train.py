"""Train the interpolation network on footage plus synthetic motion, in resumable chunks.

One chunk on one GPU (what a 9-minute device command runs):

    python train.py --data .data/footage --out $OUT --resume runs/state --minutes 8

Several GPUs: ``torchrun --nproc_per_node 2 train.py ...`` (DistributedDataParallel).
The output folder gets ``state_model.safetensors`` (fp32) and ``state_optim.pt`` (AdamW, moments in bf16) to
resume from, ``weights.safetensors`` (fp16, the kept weights: best validation score so far, the mean PSNR of
the motion-weighted and the consecutive-frame validation triplets; scores within 0.005 dB are a tie, which
goes to the higher PSNR near motion boundaries: ``training.validation.replaces_kept``),
``config.json``, ``train_config.json`` and ``log.jsonl``. With ``--ema DECAY`` a moving average of the weights
is kept beside them (``state_ema.safetensors``): validation scores it, and ``weights.safetensors`` holds it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch


class _TrainStep(torch.nn.Module):
    """One forward pass as a module, so DistributedDataParallel's hooks see it."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, one: torch.Tensor, two: torch.Tensor, t: torch.Tensor):
        state = self.net.estimate_flow(one, two)
        return self.net.synthesize(state, t), state.flow_pyramid


def _step_losses(pred: torch.Tensor, pyramid, mid: torch.Tensor, gt: Optional[torch.Tensor], n_real: int,
                 batch: int, census_weight: float, flow_weight: float, full_res_weight: float = 1.0,
                 flow_units: str = "level"):
    """The step's loss and its parts (reconstruction, census, flow end-point error against the synthetic
    samples' ground truth ``gt``: their forward flows, then their backward flows; None without synthetic ones).
    The flow error is a weighted mean over the pyramid's levels: 1 each, ``full_res_weight`` for a level at
    the frames' own resolution (a network with convex upsampling has one; its error in full-resolution pixels is
    about 4x a 1/4 level's). ``flow_units``: each level's error in its own pixels ("level"), which counts a miss
    8x less at 1/32 than at 1/4, or in 1/4-resolution pixels ("quarter"), which counts it the same at every level."""
    from model.warp import resize_flow
    from training.losses import census_loss, laplacian_loss

    loss_rec = laplacian_loss(pred, mid)
    loss_census = census_loss(pred, mid)
    loss = loss_rec + census_weight * loss_census
    loss_flow = torch.zeros((), device=pred.device)
    if gt is not None:
        total_weight = 0.0
        for level_flow in pyramid:
            est = torch.cat([level_flow[n_real:batch], level_flow[batch + n_real:]], 0).float()
            target = resize_flow(gt, est.shape[2:])
            weight = full_res_weight if est.shape[2:] == pred.shape[2:] else 1.0
            # the end-point error in the level's own pixels, or converted to 1/4-resolution ones
            units = pred.shape[-1] / (4 * est.shape[-1]) if flow_units == "quarter" else 1.0
            loss_flow = loss_flow + weight * units * (est - target).norm(dim=1).mean()
            total_weight += weight
        loss_flow = loss_flow / total_weight
        loss = loss + flow_weight * loss_flow
    return loss, loss_rec, loss_census, loss_flow


class _StepLoss(torch.nn.Module):
    """Forward pass and losses of one step as a module. train.py calls it as it is, or, with ``--cuda-graph``,
    through torch.cuda.make_graphed_callables, which records its forward and backward (the parameters' gradients
    included) once, and every step replays them."""

    def __init__(self, step: torch.nn.Module, n_real: int, batch: int, census_weight: float, flow_weight: float,
                 bf16: bool, full_res_weight: float = 1.0, flow_units: str = "level") -> None:
        super().__init__()
        self.step = step
        self.n_real, self.batch, self.bf16 = n_real, batch, bf16
        self.census_weight, self.flow_weight, self.full_res_weight = census_weight, flow_weight, full_res_weight
        self.flow_units = flow_units

    def forward(self, one: torch.Tensor, two: torch.Tensor, t: torch.Tensor, mid: torch.Tensor,
                gt: Optional[torch.Tensor] = None):
        # a graph being recorded cannot hold autocast's cast cache; eager steps keep it
        cache = self.bf16 and not torch.cuda.is_current_stream_capturing()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.bf16, cache_enabled=cache):
            pred, pyramid = self.step(one, two, t)
        return _step_losses(pred.float(), pyramid, mid, gt, self.n_real, self.batch, self.census_weight,
                            self.flow_weight, self.full_res_weight, self.flow_units)


class _WeightAverage:
    """An exponential moving average of a network's parameters (float32, on its device). The decay ramps up
    from 0.9 over the first steps, (1 + k) / (10 + k), so an average started from trained weights follows
    them at once. ``swapped()`` puts the average into the network for validation and saving."""

    def __init__(self, net: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        self.names = [name for name, _ in net.named_parameters()]
        self.params = [p for _, p in net.named_parameters()]
        self.average = [p.detach().float().clone() for p in self.params]

    @torch.no_grad()
    def update(self) -> None:
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        torch._foreach_lerp_(self.average, [p.detach().float() for p in self.params], 1.0 - decay)
        self.updates += 1

    def state_dict(self) -> dict:
        """The average in float16, the precision of the weights it is saved as: half the bytes, so a resumed run's
        state (model and optimizer in full precision, and this) fits a device call's carry beside the footage; a
        resume rounds it once (relative 5e-4, far below what one training step moves it)."""
        out = {name: a.detach().half().cpu().contiguous() for name, a in zip(self.names, self.average)}
        out["_updates"] = torch.tensor([self.updates])
        return out

    def load(self, state: dict) -> None:
        for name, a in zip(self.names, self.average):
            a.copy_(state[name])
        self.updates = int(state["_updates"][0])

    @contextlib.contextmanager
    def swapped(self):
        saved = [p.detach().clone() for p in self.params]
        with torch.no_grad():
            for p, a in zip(self.params, self.average):
                p.copy_(a)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, s in zip(self.params, saved):
                    p.copy_(s)


def _compact(optim_state: dict) -> dict:
    """AdamW's moments in bfloat16 on the CPU: half the bytes (a state then fits one device call's carry
    beside the footage) and loadable anywhere; loading casts them back to the parameters' float32 and
    device. Three significant digits of a running average are plenty."""
    def pack(v):
        if not torch.is_tensor(v):
            return v
        return v.to("cpu", torch.bfloat16) if v.is_floating_point() and v.dim() > 0 else v.cpu()

    state = {k: {name: pack(v) for name, v in per_param.items()} for k, per_param in optim_state["state"].items()}
    return {"state": state, "param_groups": optim_state["param_groups"]}


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", type=Path, nargs="+", required=True,
                   help="footage folders, each with clips.jsonl and its clips (e.g. footage footage2); the clips of "
                        "held-out source repositories (training/holdout.py) validate, all others train")
    p.add_argument("--train-folders", nargs="+", default=None, metavar="NAME",
                   help="train only on the clips of the --data folders with these names (e.g. footage); validation "
                        "still uses the held-out clips of every folder")
    p.add_argument("--frame-cache", type=Path, default=None, metavar="DIR",
                   help="keep decoded frames as .npy files in DIR (written on first use) and memory-map them on the "
                        "CPU instead of holding them on the GPU: several runs on one machine share one copy")
    p.add_argument("--out", type=Path, required=True, help="folder for checkpoints and logs")
    p.add_argument("--resume", type=Path, default=None, help="folder of a previous chunk's output")
    p.add_argument("--init-weights", type=Path, default=None,
                   help="start from a weights file (e.g. weights/network.safetensors) and its step, fresh optimizer")
    p.add_argument("--minutes", type=float, default=8.0, help="wall-clock budget for this chunk")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in this chunk")
    p.add_argument("--val-every", type=int, default=1000, help="validate every N steps")
    p.add_argument("--val-batches", type=int, default=None,
                   help="batches of 16 triplets per validation set (default 4, or on --resume what the resumed run "
                        "used); more give steadier scores (the first 4 are always the same triplets, so scores of 4 "
                        "batches stay comparable across runs)")
    p.add_argument("--validate-first", action="store_true",
                   help="validate the starting weights before training, so the chunk keeps them unless a later step "
                        "beats them on the same validation sets (the rule that picks between A/B arms)")
    p.add_argument("--batch", type=int, default=None, help="override the config's per-GPU batch")
    p.add_argument("--crop", type=int, default=None, help="override the config's crop size")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--lr", type=float, default=None, help="override the config's peak learning rate")
    p.add_argument("--census-weight", type=float, default=None, help="override the census loss weight")
    p.add_argument("--flow-loss-weight", type=float, default=None,
                   help="override the weight of the flow's end-point error against the synthetic ground truth "
                        "(recipe default 0.05)")
    p.add_argument("--flow-loss-units", choices=["level", "quarter"], default=None,
                   help="each pyramid level's flow error in its own pixels (level: the recipe so far, a miss counts "
                        "8x less at 1/32 than at 1/4) or in 1/4-resolution pixels (quarter: the same at every level)")
    p.add_argument("--flow-loss-full-res", type=float, default=None,
                   help="weight of the full-resolution flow level in the flow loss, against 1 for each coarser "
                        "level (networks with flow_upsample_hidden; default 1; its error in full-resolution "
                        "pixels is about 4x a 1/4 level's, so 0.25 weighs it in 1/4-level units, 0 leaves the "
                        "upsampling to the frame losses)")
    p.add_argument("--total-steps", type=int, default=None, help="override the cosine schedule's length")
    p.add_argument("--native-share", type=float, default=None,
                   help="override the share of footage triplets taken at the stored rate (k = 1)")
    p.add_argument("--synthetic-share", type=float, default=None,
                   help="override the share of each batch drawn from synthetic layered motion (exact ground truth)")
    p.add_argument("--synthetic-edge", type=float, default=None, metavar="PX",
                   help="override the width in pixels of synthetic layers' edges (0: the original edge, 9-33 px "
                        "wide; real objects' edges are 1-2 px)")
    p.add_argument("--synthetic-edge-share", type=float, default=None, metavar="SHARE",
                   help="with --synthetic-edge PX > 0: the fraction of synthetic samples given those edges, the rest "
                        "keep the original soft edge (recipe default 1: all)")
    p.add_argument("--synthetic-layers", type=int, default=None, metavar="N",
                   help="override the number of moving layers over the background in a synthetic sample (recipe "
                        "default 2); more layers, more occlusion boundaries per sample")
    p.add_argument("--synthetic-motion", type=float, default=None, metavar="SCALE",
                   help="override the factor on the synthetic layers' largest shifts (recipe default 1: 12 px for "
                        "the background, 32 px for the layers)")
    p.add_argument("--synthetic-shapes", type=float, default=None, metavar="AMP",
                   help="override the amplitude of the synthetic layers' boundary harmonics (recipe default 0: "
                        "ellipses; 0.3: lobed and concave outlines, radius about 0.4-1.6x the ellipse's)")
    p.add_argument("--synthetic-warp", type=float, default=None, metavar="PX",
                   help="override the largest non-rigid deformation of a synthetic layer at t = 1, in pixels "
                        "(recipe default 0: every layer moves by one affine map)")
    p.add_argument("--synthetic-texture-zoom", type=float, default=None, metavar="Z",
                   help="override how much larger than the crop the synthetic layers' textures may be cut before "
                        "they are shrunk to it (recipe default 1: not at all; 2: finer, sharper, cleaner detail)")
    p.add_argument("--small-motion-share", type=float, default=None,
                   help="override the share of synthetic samples with motion scaled down 2-16x")
    p.add_argument("--photometric-share", type=float, default=None,
                   help="fraction of footage triplets given one random colour change (gamma, saturation, contrast, "
                        "channel gains, brightness; the same for their three frames); recipe default 0")
    p.add_argument("--weight-decay", type=float, default=None, help="AdamW weight decay (recipe default 1e-3)")
    p.add_argument("--paste-share", type=float, default=None,
                   help="fraction of footage triplets with synthetic moving layers pasted over them (new occlusions "
                        "over real motion; the synthetic options shape them); recipe default 0")
    p.add_argument("--paste-layers", type=int, default=None, help="layers pasted per triplet (default 1)")
    p.add_argument("--max-nonlinearity", type=float, default=None, metavar="PX",
                   help="leave out footage triplets whose middle frame strays more than PX pixels (mean over the "
                        "frame, OpenCV DIS flow) from where constant velocity puts it: motion two frames cannot "
                        "predict teaches the network to blur (training/linearity.py; recipe default 0: off)")
    p.add_argument("--nonlinearity", type=Path, default=None, metavar="FILE",
                   help="with --max-nonlinearity: the triplets' measured non-linearity (python -m "
                        "training.linearity); default OUT/nonlinearity.pt, or the resumed run's, measured and "
                        "saved there when missing (about a CPU minute per 1000 frames)")
    p.add_argument("--downscale-share", type=float, default=None,
                   help="override the share of footage crops taken up to 2x larger and shrunk (sharper, less motion)")
    p.add_argument("--ema", type=float, default=None, metavar="DECAY",
                   help="validate and save a moving average of the weights (e.g. 0.999; 0 turns it off)")
    p.add_argument("--width", type=float, default=None, metavar="FACTOR",
                   help="a fresh network with every width multiplied by FACTOR (about FACTOR^2 the parameters; "
                        "NetworkConfig.widened), before --network's changes")
    p.add_argument("--network", nargs="+", default=None, metavar="KEY=VALUE",
                   help="NetworkConfig fields to change for a fresh start or --init-weights, e.g. "
                        "refine_width=24 flow_refine_hidden=48,32: stages the weights file lacks start at zero")
    p.add_argument("--max-clips", type=int, default=None, help="use only the first N training clips (smoke tests)")
    p.add_argument("--val-clips", nargs="+", default=None, help="held-out clip files (default: training/config.py)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--restart-schedule", action="store_true",
                   help="start a new warm-up and cosine at the step of --init-weights (or --resume), lasting "
                        "--total-steps from there; without it the schedule counts from step 0, so weights of a late "
                        "step with a fresh optimizer get no warm-up and the tail of the old cosine")
    p.add_argument("--rewarm", type=int, default=0, metavar="STEPS",
                   help="ramp the learning rate up over the first STEPS steps of this chunk, on the schedule where it "
                        "stands: for --init-weights without --restart-schedule (a fresh optimizer's first updates at "
                        "the full rate jolt trained weights), e.g. to continue a run across sessions")
    p.add_argument("--cuda-graph", action=argparse.BooleanOptionalAction, default=None,
                   help="record the step's forward and backward as CUDA graphs and replay them (one GPU): the "
                        "eager step spends more host time launching kernels than the GPU spends running them "
                        "(about 18 against 13 steps/s on an H200). Default: off, or on --resume what the resumed "
                        "run used where this run can (one CUDA device)")
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    # imports here keep `import train` free of side effects and cheap
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from model import Network, NetworkConfig
    from model.weights import save_weights
    from training.config import VALIDATION_CROP, TrainConfig
    from training.data import (BOUNDARY_SETS, FootageSampler, boundary_masks, frame_blend, load_clips, paste_layers,
                               synthetic_batch, synthetic_set, validation_sets)
    from training.losses import psnr
    from training.linearity import NEAR_LINEAR_PX, measured, near_linear_subsets, nonlinearity_tables
    from training.schedule import learning_rate, rewarmed
    from training.validation import replaces_kept, validation_psnr
    from training.holdout import baseline_scores, describe, holdout_triplets, is_holdout, network_scores, summary

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if world > 1 and torch.cuda.is_available() and args.device != "cpu":
        dist.init_process_group("nccl")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    elif world > 1:  # several CPU processes (tests, or machines without a GPU)
        dist.init_process_group("gloo")
        device = torch.device("cpu")
    elif args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
    main_process = rank == 0

    if args.ema is not None and not 0.0 <= args.ema < 1.0:
        print(f"error: --ema {args.ema}: use a decay in [0, 1), e.g. 0.999 (0 turns the average off)",
              file=sys.stderr)
        return 2
    if args.val_batches is not None and args.val_batches < 1:
        print(f"error: --val-batches {args.val_batches}: use 1 or more", file=sys.stderr)
        return 2
    graph_capable = world == 1 and device.type == "cuda"
    if args.cuda_graph and not graph_capable:
        print("error: --cuda-graph records one GPU's step: run it on a CUDA device without torchrun",
              file=sys.stderr)
        return 2
    for folder in args.data:
        if not (folder / "clips.jsonl").is_file():
            print(f"error: {folder} has no clips.jsonl: pass --data pointing at the footage folders", file=sys.stderr)
            return 2
    from training.data import missing_clips

    absent = missing_clips(args.data)
    if absent:
        print(f"error: {len(absent)} clips listed in clips.jsonl are missing (first: {absent[0]}): stage every "
              f"shard of the footage before training", file=sys.stderr)
        return 2
    folder_names = [folder.name for folder in args.data]
    if args.train_folders and not set(args.train_folders) <= set(folder_names):
        print(f"error: --train-folders {' '.join(args.train_folders)}: the --data folders are named "
              f"{', '.join(folder_names)}", file=sys.stderr)
        return 2
    # config: from the resumed run if any, with command-line overrides
    config = TrainConfig()
    net_config = NetworkConfig()
    step = 0
    progress = {}  # the resumed run's step, best and kept scores, and its validation size
    if args.resume is not None:
        if not (args.resume / "state_model.safetensors").is_file():
            print(f"error: nothing to resume in {args.resume} (no state_model.safetensors)", file=sys.stderr)
            return 2
        config = TrainConfig.from_dict(json.loads((args.resume / "train_config.json").read_text()))
        net_config = NetworkConfig.from_dict(json.loads((args.resume / "config.json").read_text()))
        progress = json.loads((args.resume / "progress.json").read_text())
        step = progress["step"]
        if args.cuda_graph is None and progress.get("cuda_graph"):
            # an execution option, not part of the recipe, but a resume that drops it runs a third slower
            args.cuda_graph = graph_capable
            if not graph_capable and main_process:
                print("note: the resumed run used --cuda-graph, which needs one CUDA device without torchrun; "
                      "this chunk runs the eager step", file=sys.stderr)
    elif args.init_weights is not None:
        # continue from committed weights (fp16, config and step in the metadata), with a fresh optimizer
        from model.weights import WeightsError, read_config, read_metadata

        try:
            net_config = read_config(args.init_weights)
            metadata = read_metadata(args.init_weights)
        except (WeightsError, OSError) as exc:
            print(f"error: --init-weights: {exc}", file=sys.stderr)
            return 2
        step = int(metadata.get("step", "0"))
        # the recipe the weights were trained with (data mix, schedule) carries on unless options override it
        if "train_config" in metadata:
            config = TrainConfig.from_dict(json.loads(metadata["train_config"]))
        elif main_process:
            print(f"note: {args.init_weights} does not record its training recipe; train.py's defaults apply "
                  f"where no option is given (e.g. --native-share, --small-motion-share, --total-steps)",
                  file=sys.stderr)
    overrides = {k: v for k, v in (("batch", args.batch), ("crop", args.crop), ("seed", args.seed),
                                   ("lr", args.lr), ("census_weight", args.census_weight),
                                   ("flow_loss_weight", args.flow_loss_weight),
                                   ("flow_loss_full_res", args.flow_loss_full_res),
                                   ("flow_loss_units", args.flow_loss_units),
                                   ("total_steps", args.total_steps),
                                   ("native_share", args.native_share),
                                   ("synthetic_share", args.synthetic_share),
                                   ("synthetic_edge_px", args.synthetic_edge),
                                   ("synthetic_edge_share", args.synthetic_edge_share),
                                   ("synthetic_layers", args.synthetic_layers),
                                   ("synthetic_motion", args.synthetic_motion),
                                   ("synthetic_shapes", args.synthetic_shapes),
                                   ("synthetic_warp", args.synthetic_warp),
                                   ("synthetic_texture_zoom", args.synthetic_texture_zoom),
                                   ("synthetic_small_share", args.small_motion_share),
                                   ("downscale_share", args.downscale_share), ("ema_decay", args.ema),
                                   ("photometric_share", args.photometric_share),
                                   ("weight_decay", args.weight_decay), ("paste_share", args.paste_share),
                                   ("paste_layers", args.paste_layers),
                                   ("max_nonlinearity", args.max_nonlinearity),
                                   ("validation_clips", tuple(args.val_clips) if args.val_clips else None))
                 if v is not None}
    config = dataclasses.replace(config, **overrides)
    if not 0.0 <= config.synthetic_share < 1.0:
        print(f"error: --synthetic-share must lie in [0, 1) (footage fills the rest of each batch), "
              f"got {config.synthetic_share}", file=sys.stderr)
        return 2
    if config.census_weight < 0 or config.flow_loss_weight < 0 or config.flow_loss_full_res < 0:
        print(f"error: --census-weight, --flow-loss-weight and --flow-loss-full-res must be 0 or positive, got "
              f"{config.census_weight}, {config.flow_loss_weight} and {config.flow_loss_full_res}", file=sys.stderr)
        return 2
    if not 0.0 <= config.synthetic_edge_share <= 1.0:
        print(f"error: --synthetic-edge-share must lie in [0, 1], got {config.synthetic_edge_share}", file=sys.stderr)
        return 2
    if not 0.0 <= config.photometric_share <= 1.0 or config.weight_decay < 0:
        print(f"error: --photometric-share must lie in [0, 1] and --weight-decay be 0 or positive, got "
              f"{config.photometric_share} and {config.weight_decay}", file=sys.stderr)
        return 2
    if not 0.0 <= config.paste_share <= 1.0 or config.paste_layers < 1:
        print(f"error: --paste-share must lie in [0, 1] and --paste-layers be at least 1, got {config.paste_share} "
              f"and {config.paste_layers}", file=sys.stderr)
        return 2
    if (config.synthetic_layers < 1 or not config.synthetic_motion > 0 or config.synthetic_shapes < 0
            or config.synthetic_warp < 0 or not config.synthetic_texture_zoom >= 1):
        print(f"error: --synthetic-layers must be at least 1, --synthetic-motion positive, --synthetic-shapes "
              f"and --synthetic-warp 0 or positive, --synthetic-texture-zoom at least 1; got "
              f"{config.synthetic_layers}, {config.synthetic_motion}, {config.synthetic_shapes}, "
              f"{config.synthetic_warp} and {config.synthetic_texture_zoom}", file=sys.stderr)
        return 2
    if config.max_nonlinearity < 0:
        print(f"error: --max-nonlinearity must be 0 (off) or positive, got {config.max_nonlinearity}", file=sys.stderr)
        return 2
    if args.nonlinearity is not None and not args.nonlinearity.is_file():
        print(f"error: --nonlinearity {args.nonlinearity}: no such file (leave the option out to measure the "
              f"triplets in this run)", file=sys.stderr)
        return 2
    if args.rewarm < 0:
        print(f"error: --rewarm must be 0 or positive, got {args.rewarm}", file=sys.stderr)
        return 2
    if args.restart_schedule:
        config = dataclasses.replace(config, schedule_start=step)
    schedule_end = config.schedule_start + config.total_steps
    if step >= schedule_end and main_process:
        floor = learning_rate(step, config.lr, config.warmup, config.total_steps, start=config.schedule_start)
        print(f"note: step {step} is past the end of the learning-rate schedule (steps {config.schedule_start}-"
              f"{schedule_end}), so the rate stays at its floor, {floor:.1e}; for a new warm-up and cosine from "
              f"here pass --restart-schedule --total-steps N", file=sys.stderr)
    if args.width is not None:
        if args.resume is not None or args.init_weights is not None:
            print("error: --width builds a fresh network; leave out --resume and --init-weights", file=sys.stderr)
            return 2
        try:
            net_config = net_config.widened(args.width)
        except ValueError as exc:
            print(f"error: --width: {exc}", file=sys.stderr)
            return 2
    if args.network:
        if args.resume is not None:
            print("error: --network changes the architecture; it works with --init-weights or a fresh start, "
                  "not with --resume", file=sys.stderr)
            return 2
        try:
            net_config = net_config.with_overrides(args.network)
        except ValueError as exc:
            print(f"error: --network: {exc}", file=sys.stderr)
            return 2

    torch.manual_seed(config.seed + 1000 * rank + step)
    gen = torch.Generator().manual_seed(config.seed + 1000 * rank + step)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    t0 = time.time()
    def held_out(entry: dict) -> bool:  # validation clips: named ones, or by source repository
        if config.validation_clips:
            return entry["file"] in config.validation_clips
        return is_holdout(entry, config.holdout_sources)

    def trains(folder: Path, entry: dict) -> bool:
        return not held_out(entry) and (not args.train_folders or folder.name in args.train_folders)

    train_clips = load_clips(args.data, None, device, config.crop, limit=args.max_clips, cache=args.frame_cache,
                             keep=trains)
    # a resumed run's scores, and so its best, are on its own validation triplets: by default the same ones (states
    # saved before session 14 do not say: they used the default, 4)
    resumed_val_batches = progress.get("val_batches", 4)  # (4 too without a resumed run: the default)
    if args.val_batches is None:
        args.val_batches = resumed_val_batches
    # validation crops are 256 px whatever the training crop (or the training crop where smaller: tests), so runs
    # with different --crop are scored on the same triplets
    val_crop = min(config.crop, VALIDATION_CROP)
    val_clips = load_clips(args.data, None, device, val_crop, cache=args.frame_cache,
                           keep=lambda folder, entry: held_out(entry))
    if main_process:
        shards = sorted({c.name.split("/")[0] for c in train_clips if "/" in c.name})
        print(f"training on {', '.join(sorted({c.group for c in train_clips}))}"
              f"{' (shards ' + ', '.join(shards) + ')' if shards else ''}; validating on "
              f"{len(val_clips)} held-out clips from {len({c.source for c in val_clips})} source repositories",
              flush=True)
    sampler = FootageSampler(train_clips, config.crop, config.max_gap, generator=gen,
                             native_share=config.native_share, downscale_share=config.downscale_share,
                             photometric_share=config.photometric_share, device=device)
    if config.max_nonlinearity > 0:
        tables_file = args.out / "nonlinearity.pt"  # kept beside the state, so that a resumed run finds it
        source = args.nonlinearity or (args.resume / "nonlinearity.pt" if args.resume is not None else None)
        if main_process:
            args.out.mkdir(parents=True, exist_ok=True)
            if source is not None and source.is_file() and source.resolve() != tables_file.resolve():
                shutil.copyfile(source, tables_file)
            tables = nonlinearity_tables(train_clips, sampler.max_k, tables_file,
                                         log=lambda text: print(text, flush=True))
        if world > 1:
            # the other processes of a multi-GPU run wait for the main one's table and read it (on another host,
            # where the file is not there, each measures its own without saving)
            dist.barrier()
        if not main_process:
            tables = nonlinearity_tables(train_clips, sampler.max_k, tables_file, write=False, log=lambda text: None)
        sampler.limit_nonlinearity(tables, config.max_nonlinearity)
        if main_process:
            values = measured(sampler.nonlinearity)
            print(f"non-linearity: {float((values > config.max_nonlinearity).float().mean()):.0%} of the footage "
                  f"triplets above {config.max_nonlinearity} px left out", flush=True)
    val_sets = validation_sets(val_clips, val_crop, config.max_gap, args.val_batches, device=device)
    # logged beside the score, not part of it: synthetic motion with 1-px layer edges over the validation textures
    # (exact ground truth), where crisp occlusion boundaries show
    val_sets["synthetic edges"] = synthetic_set(val_clips, val_crop, args.val_batches, edge_px=1.0, device=device)
    # the score that chooses weights: the margin over the classical baseline on whole held-out frames
    # (training.holdout); the crop sets above are logged beside it
    holdout = holdout_triplets(val_clips) if main_process else []
    holdout_base = baseline_scores(holdout) if holdout else None
    # logged beside the score, not part of it: PSNR over the pixels near motion boundaries (OpenCV DIS flow edges) of
    # the two score sets, pooled, where occlusions and object edges are and interpolation errs most; only the main
    # process validates, so only it computes the masks (DIS on the CPU)
    boundaries = boundary_masks(val_sets) if main_process else {}
    # logged beside the score, not part of it: PSNR on the triplets of the two score sets whose motion is nearly
    # constant velocity (training.linearity, at most NEAR_LINEAR_PX), where a two-frame method can be exact
    near_linear = near_linear_subsets(val_sets, BOUNDARY_SETS) if main_process else None
    if main_process:
        for name, batches in val_sets.items():
            blend = float(torch.cat([psnr(frame_blend(b["one"], b["two"], b["t"]), b["mid"]) for b in batches]).mean())
            print(f"validation baseline ({name}): frame blend {blend:.2f} dB", flush=True)
        count = sum(int(m.sum()) for masks in near_linear.values() for m in masks)
        print(f"validation: {count} triplets of the score sets are near-linear (at most {NEAR_LINEAR_PX} px)",
              flush=True)
        if holdout:
            print(f"validation: {len(holdout)} held-out triplets, classical baseline "
                  f"{float(holdout_base.mean()):.3f} dB", flush=True)
        frames = sum(c.frames.shape[0] for c in train_clips)
        print(f"data: {len(train_clips)} training clips ({frames} frames), {len(val_clips)} validation clips, "
              f"decoded in {time.time() - t0:.1f}s", flush=True)

    net = Network(net_config).to(device)
    if args.resume is not None:
        from safetensors.torch import load_file

        net.load_state_dict(load_file(str(args.resume / "state_model.safetensors")), strict=True)
    elif args.init_weights is not None:
        from safetensors.torch import load_file

        try:
            result = net.load_state_dict({k: v.float() for k, v in load_file(str(args.init_weights)).items()},
                                         strict=not args.network)
        except RuntimeError as exc:  # tensors of another shape: --network changed a width the weights fix
            print(f"error: --init-weights does not fit the network: {str(exc).splitlines()[1].strip().rstrip('.')}: "
                  f"--network can add stages (refine_width, flow_refine_hidden, flow_upsample_hidden), "
                  f"not resize trained ones", file=sys.stderr)
            return 2
        if result.unexpected_keys:
            print(f"error: --init-weights has tensors the network lacks: {result.unexpected_keys[:4]}: "
                  f"--network can add stages, not remove them", file=sys.stderr)
            return 2
        if result.missing_keys and main_process:
            print(f"grown network: {len(result.missing_keys)} new tensors start from their initialisation "
                  f"({', '.join(sorted({'.'.join(k.split('.')[:2]) for k in result.missing_keys}))})", flush=True)
    net = net.to(memory_format=torch.channels_last)
    step_module = _TrainStep(net)
    if world > 1:
        model = DistributedDataParallel(step_module, device_ids=[local_rank] if device.type == "cuda" else None)
    else:
        model = step_module
    decay, no_decay = [], []
    for name, p in net.named_parameters():
        (no_decay if p.dim() <= 1 else decay).append(p)
    # fused: one kernel for the whole update instead of a few per parameter tensor
    optim = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                               {"params": no_decay, "weight_decay": 0.0}], lr=config.lr,
                              fused=device.type == "cuda")
    if args.resume is not None and (args.resume / "state_optim.pt").is_file():
        optim.load_state_dict(torch.load(args.resume / "state_optim.pt", map_location=device, weights_only=True))
    ema = _WeightAverage(net, config.ema_decay) if config.ema_decay > 0 else None
    if ema is not None and args.resume is not None and (args.resume / "state_ema.safetensors").is_file():
        from safetensors.torch import load_file

        ema.load(load_file(str(args.resume / "state_ema.safetensors"), device=str(device)))
    # checkpoints are chosen by the mean PSNR of the two validation sets ("best_score"); states saved
    # before there were two sets hold only "best_val_psnr", which is not comparable and is not carried over
    best = -1e9  # scores are margins (negative while the network trails the baseline) or PSNRs
    kept_score, kept_boundary = -1e9, None  # the kept weights' figures (session 8 on; before, kept = best)
    if args.resume is not None:
        if resumed_val_batches == args.val_batches:
            best = progress.get("best_score", -1e9)
            kept_score, kept_boundary = progress.get("kept_score", best), progress.get("kept_boundary")
        elif main_process:  # other triplets: the resumed run's best is no bar for these scores
            print(f"note: the resumed run validated on {resumed_val_batches} batches per set, this chunk "
                  f"on {args.val_batches}; its best score is not carried over (this chunk keeps its own best)",
                  file=sys.stderr)

    args.out.mkdir(parents=True, exist_ok=True)
    log = open(args.out / "log.jsonl", "a") if main_process else None
    n_syn = int(round(config.batch * config.synthetic_share))
    n_real = config.batch - n_syn
    bf16 = config.bf16 and device.type == "cuda"
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16)


    def validate() -> Tuple[Dict[str, float], Optional[float]]:
        """Mean PSNR on each validation set (motion-weighted, consecutive, clean: training.data.VALIDATION_SETS;
        synthetic edges; near-linear), then the pooled PSNR near motion boundaries (None without such pixels),
        of the averaged weights when --ema is on."""
        net.eval()
        with torch.no_grad(), autocast, (ema.swapped() if ema is not None else contextlib.nullcontext()):
            means, boundary = validation_psnr(net, val_sets, boundaries, near_linear)
            if holdout:
                scores = network_scores(net, holdout, device, torch.bfloat16 if bf16 else None)
                means["holdout"] = summary(scores, holdout_base, holdout)
        net.train()
        return means, boundary

    def check(final: bool = False) -> None:
        """Validate, log, and save the state (and the weights, when they replace the kept ones)."""
        nonlocal best, kept_score, kept_boundary
        means, boundary = validate()
        val, native, clean, edges = (means[n] for n in ("motion-weighted", "consecutive", "clean", "synthetic edges"))
        near = means["near-linear"]
        score = (val + native) / 2
        margins = means.get("holdout")
        if margins is not None:  # weights are chosen by the margin over the classical baseline on held-out footage
            score = margins["margin"]
        best = max(best, score)
        improved = replaces_kept(score, boundary, best, kept_score, kept_boundary)
        if improved:
            kept_score, kept_boundary = score, boundary
        entry = {"step": step, "val_psnr": round(val, 3), "val_consecutive_psnr": round(native, 3),
                 "val_clean_psnr": round(clean, 3), "val_synthetic_edges_psnr": round(edges, 3),
                 "val_boundary_psnr": None if boundary is None else round(boundary, 3),
                 "val_near_linear_psnr": None if math.isnan(near) else round(near, 3), "score": round(score, 3)}
        if margins is not None:
            entry.update({k: round(v, 3) if isinstance(v, float) else v for k, v in margins.items()})
        if final:
            entry.update(chunk_end=True, chunk_minutes=round((time.time() - t0) / 60, 2))
        log.write(json.dumps(entry) + "\n")
        log.flush()
        print(f"{'done: ' if final else ''}step {step}: validation PSNR {val:.2f} / consecutive {native:.2f} "
              f"/ clean {clean:.2f} / synthetic edges {edges:.2f} / boundaries "
              f"{'-' if boundary is None else f'{boundary:.2f}'} / near-linear {near:.2f} dB, score {score:.2f} "
              f"(best {best:.2f})", flush=True)
        if margins is not None:
            print(f"step {step}: {describe(margins)}", flush=True)
        save(improved, val, native, boundary, margins)

    def save(tag_best: bool, val: float, native: float, boundary: Optional[float],
             margins: Optional[Dict[str, float]] = None) -> None:
        from safetensors.torch import save_file

        save_file({k: v.detach().float().cpu().contiguous() for k, v in net.state_dict().items()},
                  str(args.out / "state_model.safetensors"))
        torch.save(_compact(optim.state_dict()), args.out / "state_optim.pt")
        if ema is not None:
            save_file(ema.state_dict(), str(args.out / "state_ema.safetensors"))
        (args.out / "config.json").write_text(json.dumps(net.config.to_dict()) + "\n")
        config.save(args.out / "train_config.json")
        (args.out / "progress.json").write_text(json.dumps({"step": step, "best_score": best, "kept_score": kept_score,
                                                            "kept_boundary": kept_boundary,
                                                            "val_batches": args.val_batches,
                                                            "cuda_graph": bool(args.cuda_graph)}) + "\n")
        if tag_best:
            with ema.swapped() if ema is not None else contextlib.nullcontext():
                save_weights(net, args.out / "weights.safetensors",
                             extra={"step": str(step), "val_psnr": f"{val:.3f}",
                                    "val_consecutive_psnr": f"{native:.3f}",
                                    "val_boundary_psnr": "" if boundary is None else f"{boundary:.3f}",
                                    **({f"holdout_{k}": f"{margins[k]:.3f}" for k in ("margin", "margin_t1",
                                                                                      "margin_t2")}
                                       if margins else {}),
                                    "train_config": json.dumps(dataclasses.asdict(config))})

    budget = args.minutes * 60.0
    start_step = step
    chunk_start = time.time()
    running = {}
    net.train()
    from tqdm import tqdm

    bar = tqdm(total=args.max_steps, disable=not main_process, mininterval=10, desc="train")
    step_loss = _StepLoss(model, n_real, config.batch, config.census_weight, config.flow_loss_weight, bf16,
                          config.flow_loss_full_res, config.flow_loss_units)
    graphed = None
    # how the recipe shapes synthetic layers, both in synthetic samples and pasted over footage
    layer_options = dict(edge_px=config.synthetic_edge_px, edge_share=config.synthetic_edge_share,
                         motion_scale=config.synthetic_motion, shape_amp=config.synthetic_shapes,
                         warp_px=config.synthetic_warp, texture_zoom=config.synthetic_texture_zoom)
    if args.validate_first and main_process:
        check()  # the starting weights, on this run's sets: what every later step must beat to be kept
    while True:
        elapsed = time.time() - chunk_start
        if elapsed > budget or (args.max_steps is not None and step - start_step >= args.max_steps):
            break
        lr = learning_rate(step, config.lr, config.warmup, config.total_steps, start=config.schedule_start)
        lr = rewarmed(lr, step, start_step, args.rewarm)
        for group in optim.param_groups:
            group["lr"] = lr
        real = sampler.batch(n_real)
        if config.paste_share > 0:  # (no draw unless enabled: the random stream of earlier recipes stays the same)
            real = paste_layers(real, sampler, config.paste_share, config.crop, gen=gen, layers=config.paste_layers,
                                **layer_options)
        parts = [real]
        if n_syn:
            parts.append(synthetic_batch(sampler, n_syn, config.crop, gen=gen, layers=config.synthetic_layers,
                                         small_share=config.synthetic_small_share, **layer_options))
        batch = {k: torch.cat([p[k] for p in parts if k in p], 0) for k in ("one", "mid", "two", "t")}
        batch = {k: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v
                 for k, v in batch.items()}
        inputs = (batch["one"], batch["two"], batch["t"], batch["mid"])
        if n_syn:
            inputs += (torch.cat([parts[1]["flow_fwd"], parts[1]["flow_bwd"]], 0),)
        if args.cuda_graph and graphed is None:
            # recorded on the first batch (after three warm-up passes), replayed on every later one
            graphed = torch.cuda.make_graphed_callables(step_loss, inputs)
        loss, loss_rec, loss_census, loss_flow = (graphed if graphed is not None else step_loss)(*inputs)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optim.step()
        if ema is not None:
            ema.update()
        step += 1
        bar.update(1)
        # summed on the device: reading a loss every step would make the host wait for the GPU
        for k, v in (("loss", loss), ("rec", loss_rec), ("census", loss_census), ("flow", loss_flow)):
            running[k] = running.get(k, 0.0) + v.detach()
        running["n"] = running.get("n", 0) + 1
        if step % 100 == 0 and main_process:
            entry = {k: round(float(v) / running["n"], 5) for k, v in running.items() if k != "n"}
            entry.update(step=step, lr=lr, minutes=round((time.time() - chunk_start) / 60, 2))
            log.write(json.dumps(entry) + "\n")
            log.flush()
            bar.set_postfix(loss=entry["loss"], lr=f"{lr:.2e}")
            running = {}
        if step % args.val_every == 0 and main_process:
            check()
    bar.close()
    if main_process:
        check(final=True)
        log.close()
        print(f"{(step - start_step) / (time.time() - chunk_start):.2f} steps/s", flush=True)
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
