"""The trainer: one resumable chunk of training, from a recipe (``TrainConfig``) and a run's options.

``start_point`` decides what the chunk starts from (a resumed state, a weights file, or a fresh network) and with
which recipe; ``Trainer`` loads the data, builds the network and optimizer, and runs steps, validation and saving.
User errors raise ``training.config.TrainingError`` once; train.py reports them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ContextManager, Dict, Iterator, Optional, Tuple

import torch

from evaluation.metrics import psnr
from softsplat_vfi.model import Network, NetworkConfig
from softsplat_vfi.model.weights import WeightsError, config_from_metadata, load_weights, read_metadata, save_weights
from training.config import RECIPES, VALIDATION_CROP, TrainConfig, TrainingError
from training.data import (BOUNDARY_SETS, FootageSampler, boundary_masks, frame_blend, gap_limits, load_clips,
                           missing_clips, paste_layers, shard, shard_ranks, synthetic_batch, synthetic_set,
                           sensor_noise, source_repository, validation_sets)
from training.holdout import baseline_scores, describe, holdout_triplets, is_holdout, network_scores, summary
from training.listing import LISTING, is_footage_folder
from training.linearity import NEAR_LINEAR_PX, measured, near_linear_subsets, nonlinearity_tables
from training.options import RunOptions
from training import schedule, state, validation
from training.step import StepLoss, TrainStep, WeightAverage, compact

# under torchrun, how often (in steps) the main process's clock is read for --minutes and its answer posted
TIME_CHECK_STEPS = 20


def say(text: str, main_process: bool = True, err: bool = False) -> None:
    if main_process:
        print(text, file=sys.stderr if err else sys.stdout, flush=True)


def peak_learning_rate(lr: float, world: int) -> float:
    """The schedule's peak rate on ``world`` processes: ``lr`` x sqrt(world). Each optimizer step averages the
    gradients of world x batch triplets, and for Adam-type optimizers the square-root rule keeps the training
    dynamics when the batch grows (Malladi et al. 2022, "On the SDEs and Scaling Rules for Adaptive Gradient
    Algorithms"); warm-up and schedule length stay in optimizer steps. One process: exactly ``lr``."""
    return lr * math.sqrt(world)


@dataclass
class Start:
    """Where a chunk starts: the recipe, the network's config, the step, and the resumed run's progress."""

    config: TrainConfig
    net_config: NetworkConfig
    step: int = 0
    progress: dict = field(default_factory=dict)


def _resumed(options: RunOptions, overrides: dict) -> Start:
    folder = options.resume
    progress = state.read_progress(folder)
    if progress is None:
        raise TrainingError(f"nothing to resume in {folder} (no {state.MODEL} and {state.PROGRESS}: train.py "
                            "writes them to its --out folder at each chunk's end)")
    if options.recipe is not None:
        raise TrainingError("--recipe with --resume: a resumed run continues its own recipe (recipe flags still "
                            "override single fields)")
    config = TrainConfig.from_dict(json.loads((folder / state.RECIPE).read_text()), f"{folder}'s recipe")
    net_config = NetworkConfig.from_dict(json.loads((folder / state.NETWORK_CONFIG).read_text()))
    return Start(dataclasses.replace(config, **overrides), net_config, progress["step"], progress)


def start_point(options: RunOptions, overrides: dict, main_process: bool = True) -> Start:
    """The recipe and starting point of a chunk: a resumed state continues its recipe; weights continue the recipe
    they record unless --recipe names one; a fresh network takes --recipe (default: fast). Recipe flags
    (``overrides``) apply on top."""
    if options.resume is not None:
        return _resumed(options, overrides)
    config, net_config, step = RECIPES[options.recipe or "fast"], NetworkConfig(), 0
    if options.init_weights is not None:
        try:
            metadata = read_metadata(options.init_weights)
            net_config = config_from_metadata(metadata, options.init_weights)
        except WeightsError as exc:
            raise TrainingError(f"--init-weights: {exc}") from None
        step = int(metadata.get("step", "0"))
        if options.recipe is None and "train_config" in metadata:
            config = TrainConfig.from_dict(json.loads(metadata["train_config"]), f"{options.init_weights}'s recipe")
        elif options.recipe is None:
            say(f"note: {options.init_weights} does not record its training recipe; the fast recipe applies "
                f"(--recipe names another)", main_process, err=True)
    else:
        net_config = net_config.sized(options.width)
        if options.flow_level is not None:
            net_config = dataclasses.replace(net_config, flow_finest_level=options.flow_level)
    if options.flow_iterations is not None:
        net_config = dataclasses.replace(net_config, flow_iterations=options.flow_iterations)
    config = dataclasses.replace(config, **overrides)
    start, end = config.schedule_start, config.schedule_start + config.total_steps
    if step < start:
        raise TrainingError(f"the recipe's schedule starts at step {start} and this run at step {step}: the recipe "
                            f"anneals trained weights of that step (--init-weights), or pass --schedule-start {step} "
                            f"(or --recipe study / fast-base for a run from scratch)")
    if step >= end:
        raise TrainingError(f"step {step} is at or past the end of the learning-rate schedule (steps {start}-{end}): "
                            f"nothing to train; for a new warm-up and cosine from here pass --schedule-start {step} "
                            f"--total-steps N")
    return Start(config, net_config, step, {})


def check_data(options: RunOptions) -> None:
    for folder in options.data:
        if not is_footage_folder(folder):
            raise TrainingError(f"{folder} has no {LISTING}: pass --data pointing at the footage folders")
    absent = missing_clips(list(options.data))
    if absent:
        raise TrainingError(f"{len(absent)} clips listed in {LISTING} are missing (first: {absent[0]}): stage "
                            f"every shard of the footage before training")
    names = [folder.name for folder in options.data]
    if options.train_folders and not set(options.train_folders) <= set(names):
        raise TrainingError(f"--train-folders {' '.join(options.train_folders)}: the --data folders are named "
                            f"{', '.join(names)}")


@dataclass
class Process:
    """This process's place in a (possibly distributed) run."""

    device: torch.device
    world: int = 1
    rank: int = 0
    local_rank: int = 0
    # under torchrun, a client of its rendezvous store (a TCP key-value store): where the main process posts whether
    # a chunk's --minutes are spent
    store: Optional["torch.distributed.Store"] = None

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_process(options: RunOptions) -> Process:
    """The device, and the process group under torchrun (NCCL on GPUs, gloo on CPUs)."""
    import torch.distributed as dist

    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if world > 1 and torch.cuda.is_available() and options.device != "cpu":
        dist.init_process_group("nccl")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    elif world > 1:  # several CPU processes (tests, or machines without a GPU)
        dist.init_process_group("gloo")
        device = torch.device("cpu")
    elif options.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(options.device)
    store = None
    if world > 1:
        # the store that torchrun's MASTER_ADDR and MASTER_PORT name (its agent's, or the main process's)
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                              timeout=datetime.timedelta(minutes=30))
    return Process(device, world, rank, local_rank, store)


def use_cuda_graph(options: RunOptions, start: Start, process: Process) -> bool:
    """--cuda-graph as asked, or on a resume as the resumed run had it where this run can (one CUDA device)."""
    capable = process.world == 1 and process.device.type == "cuda"
    if options.cuda_graph and not capable:
        raise TrainingError("--cuda-graph records one GPU's step: run it on a CUDA device without torchrun")
    if options.cuda_graph is None and start.progress.get("cuda_graph"):
        # an execution option, not part of the recipe, but a resume that drops it runs a third slower
        if not capable:
            say("note: the resumed run used --cuda-graph, which needs one CUDA device without torchrun; this chunk "
                "runs the eager step", process.main, err=True)
        return capable
    return bool(options.cuda_graph)


@contextlib.contextmanager
def _cudnn_heuristics() -> Iterator[None]:
    """cuDNN picks convolution algorithms by its heuristics instead of timing them (``benchmark``): the held-out
    frames come in one size per clip, and the timed search would run again for each size in every process."""
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = False
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = before


class Trainer:
    """One chunk: ``Trainer(options, start, process).run()``."""

    def __init__(self, options: RunOptions, start: Start, process: Process) -> None:
        self.options, self.config, self.process = options, start.config, process
        self.device, self.main = process.device, process.main
        self.step = self.start_step = start.step
        self.progress = start.progress
        self.net_config = start.net_config
        self.cuda_graph = use_cuda_graph(options, start, process)
        # a resumed run's scores, and so its best, are on its own validation triplets (states saved before
        # session 14 do not say: they used the default, 4)
        self.resumed_val_batches = start.progress.get("val_batches", 4)
        self.val_batches = options.val_batches or self.resumed_val_batches
        # an execution option like --cuda-graph, kept on a resume: each validation costs the GPU about 17 s
        # (states saved before session 70 do not say: 1000)
        self.val_every = options.val_every or start.progress.get("val_every", 1000)
        # likewise the flow scale the held-out margin was scored at (states saved before session 44: 1)
        self.resumed_flow_scale = start.progress.get("holdout_flow_scale", 1.0)
        self.holdout_flow_scale = (options.holdout_flow_scale if options.holdout_flow_scale is not None
                                   else self.resumed_flow_scale)
        self.bf16 = self.config.bf16 and self.device.type == "cuda"
        seed = self.config.seed + 1000 * process.rank + self.step
        torch.manual_seed(seed)
        self.gen = torch.Generator().manual_seed(seed)
        self.t0 = time.time()

    # -- data ------------------------------------------------------------------------------------------------

    def held_out(self, entry: dict) -> bool:
        """Validation clips: the named ones, or those of the held-out source repositories."""
        if self.config.validation_clips:
            return entry["file"] in self.config.validation_clips
        return is_holdout(entry, self.config.holdout_sources)

    def excluded(self, entry: dict) -> bool:
        """Clips of the recipe's ``exclude_sources`` (the campaign's confirmation set): neither trained nor
        validated on."""
        return source_repository(entry) in self.config.exclude_sources

    def load_data(self) -> None:
        options, config, device = self.options, self.config, self.device

        def trains(folder: Path, entry: dict) -> bool:
            return (not self.held_out(entry) and not self.excluded(entry)
                    and (not options.train_folders or folder.name in options.train_folders))

        data = list(options.data)
        self.train_clips = load_clips(data, None, device, config.crop, cache=options.frame_cache, keep=trains)
        if not self.train_clips:
            raise TrainingError(f"no training clip in {', '.join(map(str, data))} is at least {config.crop} px on "
                                f"its short side (--crop {config.crop}): check --data, or lower --crop")
        # validation crops are 256 px whatever the training crop (or the training crop where smaller: tests)
        self.val_crop = min(config.crop, VALIDATION_CROP)
        # only the main process validates: the others decode no held-out clip
        self.val_clips = load_clips(data, None, device, self.val_crop, cache=options.frame_cache,
                                    keep=lambda folder, entry: self.held_out(entry) and not self.excluded(entry)
                                    ) if self.main else []
        shards = sorted({c.name.split("/")[0] for c in self.train_clips if "/" in c.name})
        say(f"training on {', '.join(sorted({c.group for c in self.train_clips}))}"
            f"{' (shards ' + ', '.join(shards) + ')' if shards else ''}; validating on {len(self.val_clips)} "
            f"held-out clips from {len({c.source for c in self.val_clips})} source repositories", self.main)
        self.sampler = FootageSampler(self.own_shard(), config.crop, config.max_gap, generator=self.gen,
                                      native_share=config.native_share, downscale_share=config.downscale_share,
                                      device=device, neighbours=config.motion == "quadratic",
                                      quadratic_share=config.quadratic_share)
        if config.max_nonlinearity > 0:
            self.limit_nonlinearity()

    def own_shard(self) -> list:
        """This process's shard of the training clips (training.data.shard_ranks; with one process all of them, in
        their order), and on the main process one line with every rank's clips and frames."""
        world = self.process.world
        try:
            ranks = shard_ranks(self.train_clips, world)
        except ValueError as exc:
            raise TrainingError(str(exc)) from None
        if world > 1:
            counts = [(ranks.count(r), sum(c.frames.shape[0] for c, q in zip(self.train_clips, ranks) if q == r))
                      for r in range(world)]
            say(f"footage shards over {world} processes: "
                + ", ".join(f"rank {r} {n} clips ({f} frames)" for r, (n, f) in enumerate(counts)), self.main)
        return shard(self.train_clips, world, self.process.rank)

    def limit_nonlinearity(self) -> None:
        """Leave out the footage triplets straying from constant velocity, measured once and kept beside the
        state (OUT/nonlinearity.pt), so that a resumed run finds it."""
        options, limit, sampler = self.options, self.config.max_nonlinearity, self.sampler
        tables_file = options.out / state.NONLINEARITY
        source = options.nonlinearity or (options.resume / state.NONLINEARITY if options.resume else None)
        if self.main:
            options.out.mkdir(parents=True, exist_ok=True)
            if source is not None and source.is_file() and source.resolve() != tables_file.resolve():
                shutil.copyfile(source, tables_file)
            # every training clip's table, whatever this process's shard: a run resumed on another number of
            # processes finds its shard's tables in the file
            every = nonlinearity_tables(self.train_clips, gap_limits(self.train_clips, self.config.max_gap),
                                        tables_file, log=say)
            by_clip = {id(clip): table for clip, table in zip(self.train_clips, every)}
            tables = [by_clip[id(clip)] for clip in sampler.clips]
        if self.process.world > 1:
            import torch.distributed as dist

            # the other processes wait for the main one's table and read it (on another host, where the file is
            # not there, each measures its own without saving)
            dist.barrier()
        if not self.main:
            tables = nonlinearity_tables(sampler.clips, sampler.max_k, tables_file, write=False, log=lambda text: None)
        sampler.limit_nonlinearity(tables, limit)
        if self.main:
            share = float((measured(every) > limit).float().mean())
            say(f"non-linearity: {share:.0%} of the footage triplets above {limit} px left out")

    def load_validation(self) -> None:
        """The crop sets (logged), the boundary masks and near-linear subsets (logged), and the held-out triplets
        whose margin over the classical baseline chooses the kept weights (training.holdout)."""
        if not self.main:  # only the main process validates
            self.val_sets, self.holdout, self.holdout_base, self.boundaries, self.near_linear = {}, [], None, {}, None
            return
        clips, crop, batches, device = self.val_clips, self.val_crop, self.val_batches, self.device
        self.val_sets = validation_sets(clips, crop, self.config.max_gap, batches, device=device)
        # synthetic motion with 1-px layer edges over the validation textures, where crisp boundaries show
        self.val_sets["synthetic edges"] = synthetic_set(clips, crop, batches, edge_px=1.0, device=device)
        # the masks and the baseline are computed on the CPU
        # with quadratic motion, the held-out triplets keep their outer neighbours and are scored along quadratic
        # paths where they have them (the baseline stays the two-frame one)
        self.holdout = holdout_triplets(clips, neighbours=self.config.motion == "quadratic")
        self.holdout_base = baseline_scores(self.holdout) if self.holdout else None
        self.boundaries = boundary_masks(self.val_sets)
        self.near_linear = near_linear_subsets(self.val_sets, BOUNDARY_SETS)
        for name, sets in self.val_sets.items():
            blend = float(torch.cat([psnr(frame_blend(b["one"], b["two"], b["t"]), b["mid"]) for b in sets]).mean())
            say(f"validation baseline ({name}): frame blend {blend:.2f} dB")
        count = sum(int(m.sum()) for masks in self.near_linear.values() for m in masks)
        say(f"validation: {count} triplets of the score sets are near-linear (at most {NEAR_LINEAR_PX} px)")
        if self.holdout:
            say(f"validation: {len(self.holdout)} held-out triplets, classical baseline "
                f"{float(self.holdout_base.mean()):.3f} dB")
        frames = sum(c.frames.shape[0] for c in self.train_clips)
        say(f"data: {len(self.train_clips)} training clips ({frames} frames), {len(self.val_clips)} validation "
            f"clips, decoded in {time.time() - self.t0:.1f}s")

    # -- model -----------------------------------------------------------------------------------------------

    def build(self) -> None:
        """The network (resumed, from weights, or fresh), the optimizer, the moving average and the best scores."""
        from safetensors.torch import load_file

        options, config, device = self.options, self.config, self.device
        if options.resume is None and options.init_weights is not None:
            # the file's weights in the network start_point described (the file's config, with --flow-iterations
            # applied, which adds no weights), strict
            net = load_weights(options.init_weights, device, self.net_config)
        else:
            net = Network(self.net_config).to(device)
            if options.resume is not None:
                net.load_state_dict(load_file(str(options.resume / state.MODEL)), strict=True)
        self.net = net.to(memory_format=torch.channels_last)
        self.model = TrainStep(self.net)
        if self.process.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            ids = [self.process.local_rank] if device.type == "cuda" else None
            self.model = DistributedDataParallel(self.model, device_ids=ids)
        decay = [p for p in net.parameters() if p.dim() > 1]
        no_decay = [p for p in net.parameters() if p.dim() <= 1]
        # fused: one kernel for the whole update instead of a few per parameter tensor
        self.optim = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                        {"params": no_decay, "weight_decay": 0.0}], lr=config.lr,
                                       fused=device.type == "cuda")
        if options.resume is not None and (options.resume / state.OPTIMIZER).is_file():
            self.optim.load_state_dict(torch.load(options.resume / state.OPTIMIZER, map_location=device,
                                                  weights_only=True))
        self.ema = WeightAverage(net, config.ema_decay) if config.ema_decay > 0 else None
        if self.ema is not None and options.resume is not None and (options.resume / state.AVERAGE).is_file():
            self.ema.load(load_file(str(options.resume / state.AVERAGE), device=str(device)))
        # scores are margins (negative while the network trails the baseline) or PSNRs
        self.best, self.kept_score, self.kept_boundary = -1e9, -1e9, None
        same_batches = self.resumed_val_batches == self.val_batches
        same_scale = self.resumed_flow_scale == self.holdout_flow_scale
        if options.resume is not None and same_batches and same_scale:
            self.best = self.progress.get("best_score", -1e9)
            self.kept_score = self.progress.get("kept_score", self.best)
            self.kept_boundary = self.progress.get("kept_boundary")
        elif options.resume is not None:  # other scores: the resumed run's best is no bar for these
            other = (f"validated on {self.resumed_val_batches} batches per set, this chunk on {self.val_batches}"
                     if not same_batches else f"scored the held-out margin at flow scale {self.resumed_flow_scale}, "
                                              f"this chunk at {self.holdout_flow_scale}")
            say(f"note: the resumed run {other}; its best score is not carried over (this chunk keeps its own best)",
                self.main, err=True)
        n_syn = int(round(config.batch * config.synthetic_share))
        self.n_syn, self.n_real = n_syn, config.batch - n_syn
        regions = None
        if options.compile:
            from softsplat_vfi.model.runtime import check_compilable
            from training.compiled import CompiledRegions

            try:
                check_compilable(device)
            except ValueError as exc:
                raise TrainingError(str(exc)) from None
            regions = CompiledRegions(self.net)
        self.step_loss = StepLoss(self.model, self.n_real, config.batch, config.census_weight,
                                  config.flow_loss_weight, self.bf16, config.reconstruction,
                                  synthetic=n_syn > 0, quadratic=config.motion == "quadratic", regions=regions,
                                  frequency_weight=config.frequency_weight)
        self.graphed = None
        self.say_scaling()

    def say_scaling(self) -> None:
        """One line on several processes: the step's triplets and the peak rate (``peak_learning_rate``); and a
        note where a resumed run trained on another number of processes (its state resumes on any number)."""
        config, world = self.config, self.process.world
        if world > 1:
            say(f"{world} processes: each step takes {world} x {config.batch} = {world * config.batch} triplets; peak "
                f"learning rate {config.lr:g} x sqrt({world}) = {peak_learning_rate(config.lr, world):.4g} (warm-up "
                f"and schedule in steps as the recipe says)", self.main)
        before = self.progress.get("processes")  # (states saved before sharding do not say)
        if self.options.resume is not None and before is not None and before != world:
            say(f"note: the resumed run trained on {before} process{'es' if before > 1 else ''}, this chunk on "
                f"{world}: {world * config.batch} triplets per step instead of {before * config.batch}, peak "
                f"learning rate {peak_learning_rate(config.lr, world):.4g} instead of "
                f"{peak_learning_rate(config.lr, before):.4g}", self.main, err=True)

    def averaged(self) -> ContextManager[None]:
        """The moving average swapped into the network, where there is one."""
        return self.ema.swapped() if self.ema is not None else contextlib.nullcontext()

    # -- validation and saving -------------------------------------------------------------------------------

    def validate(self) -> Tuple[Dict[str, object], Optional[float]]:
        """Mean PSNR on each validation set and near motion boundaries, and the held-out margins, of the moving
        average where there is one."""
        self.net.eval()
        autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.bf16)
        with torch.no_grad(), autocast, self.averaged():
            means, boundary = validation.validation_psnr(self.net, self.val_sets, self.boundaries, self.near_linear)
            if self.holdout:
                with _cudnn_heuristics():
                    scores = network_scores(self.net, self.holdout, self.device,
                                            torch.bfloat16 if self.bf16 else None, self.holdout_flow_scale)
                means["holdout"] = summary(scores, self.holdout_base, self.holdout)
        self.net.train()
        return means, boundary

    def check(self, final: bool = False) -> None:
        """Validate, log, and save the state (and the weights, when they replace the kept ones)."""
        means, boundary = self.validate()
        val, native, clean, edges, near = (means[n] for n in ("motion-weighted", "consecutive", "clean",
                                                              "synthetic edges", "near-linear"))
        margins = means.get("holdout")
        # weights are chosen by the margin over the classical baseline on held-out footage where there is some
        score = margins["margin"] if margins is not None else (val + native) / 2
        self.best = max(self.best, score)
        improved = validation.replaces_kept(score, boundary, self.best, self.kept_score, self.kept_boundary)
        if improved:
            self.kept_score, self.kept_boundary = score, boundary
        entry = {"step": self.step, "val_psnr": round(val, 3), "val_consecutive_psnr": round(native, 3),
                 "val_clean_psnr": round(clean, 3), "val_synthetic_edges_psnr": round(edges, 3),
                 "val_boundary_psnr": None if boundary is None else round(boundary, 3),
                 "val_near_linear_psnr": None if math.isnan(near) else round(near, 3), "score": round(score, 3)}
        if margins is not None:
            entry.update({k: round(v, 3) if isinstance(v, float) else v for k, v in margins.items()})
            entry["holdout_flow_scale"] = self.holdout_flow_scale
        if final:
            entry.update(chunk_end=True, chunk_minutes=round((time.time() - self.t0) / 60, 2))
        self.write_log(entry)
        say(f"{'done: ' if final else ''}step {self.step}: validation PSNR {val:.2f} / consecutive {native:.2f} / "
            f"clean {clean:.2f} / synthetic edges {edges:.2f} / boundaries "
            f"{'-' if boundary is None else f'{boundary:.2f}'} / near-linear {near:.2f} dB, score {score:.2f} "
            f"(best {self.best:.2f})")
        if margins is not None:
            say(f"step {self.step}: {describe(margins)}")
        self.save_state()
        if improved:
            self.save_kept(val, native, boundary, margins)

    def write_log(self, entry: dict) -> None:
        with open(self.options.out / state.LOG, "a") as log:
            log.write(json.dumps(entry) + "\n")

    def save_state(self) -> None:
        from safetensors.torch import save_file

        out = self.options.out
        save_file({k: v.detach().float().cpu().contiguous() for k, v in self.net.state_dict().items()},
                  str(out / state.MODEL))
        torch.save(compact(self.optim.state_dict()), out / state.OPTIMIZER)
        if self.ema is not None:
            save_file(self.ema.state_dict(), str(out / state.AVERAGE))
        (out / state.NETWORK_CONFIG).write_text(json.dumps(self.net.config.to_dict()) + "\n")
        self.config.save(out / state.RECIPE)
        state.write_progress(out, {"step": self.step, "best_score": self.best, "kept_score": self.kept_score,
                                   "kept_boundary": self.kept_boundary, "val_batches": self.val_batches,
                                   "holdout_flow_scale": self.holdout_flow_scale, "cuda_graph": self.cuda_graph,
                                   "val_every": self.val_every,
                                   "processes": self.process.world})

    def save_kept(self, val: float, native: float, boundary: Optional[float], margins: Optional[dict]) -> None:
        extra = {"step": str(self.step), "val_psnr": f"{val:.3f}", "val_consecutive_psnr": f"{native:.3f}",
                 "val_boundary_psnr": "" if boundary is None else f"{boundary:.3f}",
                 "train_config": self.config.to_json()}
        if margins:
            extra.update({f"holdout_{k}": f"{margins[k]:.3f}" for k in ("margin", "margin_t1", "margin_t2")})
            extra["holdout_flow_scale"] = str(self.holdout_flow_scale)
        with self.averaged():
            save_weights(self.net, self.options.out / state.KEPT_WEIGHTS, extra=extra)

    # -- training --------------------------------------------------------------------------------------------

    def next_inputs(self) -> Tuple[torch.Tensor, ...]:
        """The step's inputs: footage (some with synthetic layers pasted over), then synthetic samples and their
        ground-truth flows (forward, then backward)."""
        config, gen = self.config, self.gen
        layer_options = dict(edge_px=config.synthetic_edge_px, edge_share=config.synthetic_edge_share,
                             motion_scale=config.synthetic_motion)
        real = self.sampler.batch(self.n_real)
        if config.paste_share > 0:  # (no draw unless enabled: the random stream of earlier recipes stays the same)
            real = paste_layers(real, self.sampler, config.paste_share, config.crop, gen=gen, **layer_options)
        parts = [real]
        if self.n_syn:
            parts.append(synthetic_batch(self.sampler, self.n_syn, config.crop, gen=gen,
                                         layers=config.synthetic_layers, small_share=config.synthetic_small_share,
                                         stripe_share=config.synthetic_stripe_share, **layer_options))
            if config.synthetic_noise > 0:  # (no draw unless enabled, as above)
                parts[-1] = sensor_noise(parts[-1], config.synthetic_noise, gen)
        keys = ("one", "mid", "two", "t")
        if config.motion == "quadratic":  # synthetic samples have no neighbours: constant velocity
            keys += ("before", "after", "quad")
            for part in parts[1:]:
                part.update(before=part["one"], after=part["two"], quad=torch.zeros_like(part["t"]))
        batch = {k: torch.cat([p[k] for p in parts], 0) for k in keys}
        batch = {k: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v for k, v in batch.items()}
        inputs = (batch["one"], batch["two"], batch["t"], batch["mid"])
        if self.n_syn:
            inputs += (torch.cat([parts[1]["flow_fwd"], parts[1]["flow_bwd"]], 0),)
        if config.motion == "quadratic":
            inputs += (*self.outer_flows(batch), batch["quad"])
        return inputs

    @torch.no_grad()
    def outer_flows(self, batch: Dict[str, torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        """The flows one -> before and two -> after of a quadratic batch from the network as it stands, without
        gradients (the step trains the pair's flows; inference estimates the neighbours' flows with the same
        network)."""
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.bf16):
            return self.net.outer_flows(batch["one"], batch["two"], batch["before"], batch["after"])

    def learning_rate(self) -> float:
        """The rate of this step: the schedule from the peak for this many processes (``peak_learning_rate``)."""
        config = self.config
        lr = schedule.learning_rate(self.step, peak_learning_rate(config.lr, self.process.world), config.warmup,
                                    config.total_steps, start=config.schedule_start)
        return schedule.rewarmed(lr, self.step, self.start_step, self.options.rewarm)

    def train_step(self, inputs: Tuple[torch.Tensor, ...], lr: float) -> Tuple[torch.Tensor, ...]:
        for group in self.optim.param_groups:
            group["lr"] = lr
        if self.cuda_graph and self.graphed is None:
            # recorded on the first batch (after three warm-up passes), replayed on every later one
            self.graphed = torch.cuda.make_graphed_callables(self.step_loss, inputs)
        losses = (self.graphed or self.step_loss)(*inputs)
        self.optim.zero_grad(set_to_none=True)
        losses[0].backward()
        torch.nn.utils.clip_grad_norm_(self.net.parameters(), 1.0)
        self.optim.step()
        if self.ema is not None:
            self.ema.update()
        self.step += 1
        return losses

    def done(self, chunk_start: float) -> bool:
        """Whether the chunk ends at this step: its schedule's or --max-steps' last step, or its --minutes spent.
        Every process calls it after every step and gets the same answer (``out_of_time``)."""
        options, config = self.options, self.config
        return (self.step >= config.schedule_start + config.total_steps
                or (options.max_steps is not None and self.step - self.start_step >= options.max_steps)
                or self.out_of_time(chunk_start))

    def out_of_time(self, chunk_start: float) -> bool:
        """Whether --minutes have passed. Under torchrun the processes must leave the loop at the same step (one
        that goes on waits in the next step's gradient all-reduce for the others until NCCL's timeout, as four-GPU
        chunks did at their ends in sessions 49 and 50): the main process's clock decides, read every
        ``TIME_CHECK_STEPS`` steps and posted to torchrun's store, where the others read it. Not a broadcast: the
        communication thread that frees a finished broadcast's tensor needs the GIL for it, and a process leaving the
        loop straight after the last one could join that thread with the GIL held (a deadlock, sessions 51 and 53)."""
        minutes = self.options.minutes
        late = minutes is not None and time.time() - chunk_start > minutes * 60.0
        if self.process.world == 1:
            return late
        if (self.step - self.start_step) % TIME_CHECK_STEPS or self.step == self.start_step:
            return False
        key = f"stop/{self.start_step}/{self.step}"
        if self.main:
            self.process.store.set(key, "1" if late else "0")
            return late
        return self.process.store.get(key) == b"1"  # waits for the main process to reach this step

    def run(self) -> None:
        from tqdm import tqdm

        options = self.options
        self.net.train()
        if options.validate_first and self.main:
            self.check()  # the starting weights, on this run's sets: what every later step must beat to be kept
        chunk_start = time.time()
        running: Dict[str, torch.Tensor] = {}
        count = 0
        bar = tqdm(total=options.max_steps, disable=not self.main, mininterval=10, desc="train")
        stop = self.done(chunk_start)
        while not stop:
            lr = self.learning_rate()
            losses = self.train_step(self.next_inputs(), lr)
            bar.update(1)
            # summed on the device: reading a loss every step would make the host wait for the GPU
            for k, v in zip(("loss", "rec", "census", "flow"), losses):
                running[k] = running.get(k, 0.0) + v.detach()
            count += 1
            if self.step % 100 == 0 and self.main:
                entry = {k: round(float(v) / count, 5) for k, v in running.items()}
                entry.update(step=self.step, lr=lr, minutes=round((time.time() - chunk_start) / 60, 2))
                self.write_log(entry)
                bar.set_postfix(loss=entry["loss"], lr=f"{lr:.2e}")
                running, count = {}, 0
            stop = self.done(chunk_start)  # every process, so that they agree
            # (not at the chunk's last step: the final check below validates that one)
            if self.step % self.val_every == 0 and self.main and not stop:
                self.check()
        bar.close()
        if self.main:
            self.check(final=True)
            say(f"{(self.step - self.start_step) / (time.time() - chunk_start):.2f} steps/s")


def train(options: RunOptions, overrides: dict) -> None:
    """One chunk of training as the options say. Raises TrainingError for what cannot run."""
    check_data(options)
    process = init_process(options)
    try:
        start = start_point(options, overrides, process.main)
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        trainer = Trainer(options, start, process)
        options.out.mkdir(parents=True, exist_ok=True)
        trainer.load_data()
        trainer.load_validation()
        trainer.build()
        trainer.run()
    finally:
        if process.world > 1:
            import torch.distributed as dist

            dist.destroy_process_group()
