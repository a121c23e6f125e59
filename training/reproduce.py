"""One command that reproduces a shipped weights file from scratch: the whole chain, or one chunk per call.

    python -m training.reproduce default --data FOOTAGE FOOTAGE2 --out runs/default --frame-cache /dev/shm/vfi-cache \\
        --cuda-graph
    python -m training.reproduce fast --data FOOTAGE FOOTAGE2 --out runs/fast --frame-cache /dev/shm/vfi-cache \\
        --cuda-graph

Each weights file is a chain of steps, declared below as data (``CHAINS``): ``train.py`` stages, exports
(``training.export``), averages (``training.average``) and, for the fast weights, the selection of the clips at least
512 px on their short side (``training.stage``). A call skips the finished steps and runs the rest, each stage to its
end, and prints ``done: FILE`` with the chain's last file. On a machine with a time limit, ``--minutes M`` makes each
call train one chunk of at most M minutes (a new stage, or ``train.py --resume`` of a stage trained in part), run the
exports and averages whose inputs are then ready, and stop before the next stage's chunk, saying what comes next: run
the same command again until it prints ``done:``. The steps' own output goes to stderr, so that stdout holds only this
command's lines (``run:``, ``next:``, ``done:``). Every step's output lies under ``--out``, named as in
docs/training.md; a step counts as finished when its output is there (a train stage: when its ``progress.json``
reached the stage's end step) or when a later step's is. ``--dry-run`` prints every step's command line. Options this
command does not know go to every ``train.py`` chunk (``--cuda-graph``, ``--device``). Under torchrun every process
runs the command: the chunks train together, and one process at a time (a lock file in ``--out``) runs each export,
average or selection that is not there yet.

The fast chain's stages 1 and 2 train on the first ``--data`` folder only; give the folders in that order.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from training.config import RECIPES
from training.listing import LISTING, is_footage_folder
from training.state import progress_step

ALL, FIRST = "all", "first"  # Train.data: every --data folder, or the first one alone
REWARM = 500  # steps over which a stage from trained weights eases its fresh optimiser in (train.py --rewarm)
# train.py options the chain sets itself (extra options naming them would change what the chain trains)
CHAIN_OPTIONS = ("--recipe", "--resume", "--init-weights", "--rewarm", "--schedule-start", "--total-steps",
                 "--max-steps", "--width")


@dataclass(frozen=True)
class Train:
    """A train.py stage into the state folder ``out``: ``recipe`` from scratch (``init`` None) or from the weights
    file ``init``, to step ``end``. ``rewarm``, ``schedule_start`` and ``options`` go to its first chunk only (a
    resumed chunk keeps them); ``data``: ``ALL``, ``FIRST`` or a ``Select``'s folder."""

    out: str
    recipe: str
    end: int
    init: Optional[str] = None
    rewarm: int = 0
    schedule_start: Optional[int] = None
    options: Tuple[str, ...] = ()
    data: str = ALL

    @property
    def inputs(self) -> Tuple[str, ...]:
        return tuple(name for name in (self.init, self.data) if name not in (None, ALL, FIRST))

    @property
    def schedule_end(self) -> int:
        """The step where train.py stops by itself (the recipe's schedule end)."""
        recipe = RECIPES[self.recipe]
        start = recipe.schedule_start if self.schedule_start is None else self.schedule_start
        return start + recipe.total_steps


@dataclass(frozen=True)
class Export:
    """``python -m training.export``: a state folder's last step (its moving average) as weights, or a weights file
    copied with ``flow_iterations`` passes of each flow decoder."""

    source: str
    out: str
    flow_iterations: Tuple[int, ...] = ()

    @property
    def inputs(self) -> Tuple[str, ...]:
        return (self.source,)


@dataclass(frozen=True)
class Average:
    """``python -m training.average``: the weighted average of ``sources``, recording ``recipe`` at ``step`` (what
    ``train.py --init-weights`` continues)."""

    out: str
    sources: Tuple[str, ...]
    shares: Tuple[int, ...]
    recipe: str
    step: int

    @property
    def inputs(self) -> Tuple[str, ...]:
        return self.sources


@dataclass(frozen=True)
class Select:
    """``python -m training.stage``: the training clips at least ``min_short_side`` px on their short side and every
    held-out clip, packed into bundles (folder ``bundles``) and unpacked into ``out``/<each --data folder's name>,
    decoded into the frame cache."""

    out: str
    bundles: str
    min_short_side: int

    @property
    def inputs(self) -> Tuple[str, ...]:
        return ()


Step = Union[Train, Export, Average, Select]


def _trained(out: str, recipe: str, end: int, **stage: Any) -> Tuple[Train, Export]:
    """A train stage and the export of its last step to ``out``.safetensors."""
    return Train(out, recipe, end, **stage), Export(out, f"{out}.safetensors")


def _annealed(out: str, recipe: str, end: int, init: str, **stage: Any) -> Tuple[Train, Export]:
    """A default-weights stage from the weights ``init``, its fresh optimiser eased in."""
    return _trained(out, recipe, end, init=init, rewarm=REWARM, **stage)


# weights/network.safetensors: thirteen stages; every average records quality-psnr at step 69919 for --init-weights
DEFAULT_CHAIN: Tuple[Step, ...] = (
    *_trained("q1", "study", 40000, options=("--width", "2")),
    *_annealed("q2", "quality-384", 45000, "q1.safetensors"),
    *_annealed("q3", "quality-512", 50000, "q2.safetensors"),
    *_annealed("q4", "quality-no-census", 55000, "q3.safetensors"),
    *_annealed("q5", "quality-no-flow", 60000, "q4.safetensors"),
    *_annealed("q6", "quality", 65000, "q5.safetensors"),
    # the same tensors with two flow passes at every level but the coarsest (no training)
    Export("q6.safetensors", "q6p.safetensors", flow_iterations=(1, 2, 2, 2)),
    *_annealed("q7", "quality-psnr", 70000, "q6p.safetensors"),
    *_annealed("q8", "quality-psnr-syn20", 74919, "q7.safetensors"),
    Average("qa.safetensors", ("q8.safetensors", "q7.safetensors"), (5, 3), "quality-psnr", 69919),
    *_annealed("q9", "quality-psnr-syn20", 74919, "qa.safetensors"),
    Average("qb.safetensors", ("q9.safetensors", "qa.safetensors"), (5, 3), "quality-psnr", 69919),
    *_annealed("q10", "quality-psnr-stripes", 74919, "qb.safetensors"),
    Average("qc.safetensors", ("q10.safetensors", "qb.safetensors"), (1, 1), "quality-psnr", 69919),
    *_annealed("q11", "quality-psnr-quadratic", 74919, "qc.safetensors"),
    *_annealed("q12", "quality-psnr-quadratic", 79919, "q11.safetensors", schedule_start=74919),
    *_annealed("q13", "quality-psnr-mixed", 84919, "q12.safetensors"),
)

# weights/fast.safetensors: four stages; stage 1 stops at step 25000 of its 100000-step schedule
FAST_CHAIN: Tuple[Step, ...] = (
    *_trained("base", "fast-base", 25000, options=("--val-batches", "16"), data=FIRST),
    *_trained("anneal", "fast", 32000, init="base.safetensors", options=("--val-batches", "16", "--validate-first"),
              data=FIRST),
    Select("q512data", bundles="q512", min_short_side=512),
    *_trained("f3", "fast-psnr", 37000, init="anneal.safetensors", schedule_start=32000, data="q512data"),
    *_trained("f4", "fast-psnr", 42000, init="f3.safetensors", schedule_start=37000, data="q512data"),
)

CHAINS: Dict[str, Tuple[Step, ...]] = {"default": DEFAULT_CHAIN, "fast": FAST_CHAIN}
SHIPPED = {"default": "weights/network.safetensors", "fast": "weights/fast.safetensors"}


def reached_steps(chain: Sequence[Step]) -> Dict[str, int]:
    """The training step each weights file or state folder of the chain stands at, as planned."""
    steps: Dict[str, int] = {}
    for step in chain:
        if isinstance(step, Train):
            steps[step.out] = step.end
        elif isinstance(step, Export):
            steps[step.out] = steps[step.source]
        elif isinstance(step, Average):
            steps[step.out] = step.step
    return steps


@dataclass(frozen=True)
class Job:
    """Where a chain runs: the footage folders, the output folder, the frame cache and the train.py chunks' options."""

    data: Tuple[Path, ...]
    out: Path
    frame_cache: Optional[Path] = None
    minutes: Optional[float] = None  # each train.py call's limit (None: each stage to its end)
    extra: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.minutes is not None and self.minutes <= 0:
            raise ValueError(f"--minutes must be positive, got {self.minutes}")
        for folder in self.data:
            if not is_footage_folder(folder):
                raise ValueError(f"--data {folder}: no {LISTING} there; pass the footage folders (footage footage2)")
        names = [folder.name for folder in self.data]
        if len(set(names)) != len(names):
            raise ValueError(f"--data folders need distinct names (the selected clips keep them), got "
                             f"{' '.join(names)}")
        taken = [arg for arg in self.extra if arg.split("=")[0] in CHAIN_OPTIONS]
        if taken:
            raise ValueError(f"{taken[0]}: the chain sets it for each stage; leave it out of the train.py options")

    def path(self, name: str) -> Path:
        return self.out / name

    def cache(self, for_selection: bool) -> Optional[Path]:
        """The frame cache: --frame-cache, or for the selected clips (decoded when unpacked) OUT/frame-cache."""
        if self.frame_cache is None and for_selection:
            return self.out / "frame-cache"
        return self.frame_cache

    def folders(self, data: str) -> Tuple[Path, ...]:
        if data == ALL:
            return self.data
        if data == FIRST:
            return self.data[:1]
        return tuple(self.path(data) / folder.name for folder in self.data)


def start_step(stage: Train, chain: Sequence[Step]) -> int:
    """The step the stage's first chunk starts at, as planned: its weights file's (scratch: 0)."""
    return 0 if stage.init is None else reached_steps(chain)[stage.init]


def train_argv(stage: Train, job: Job, at: Optional[int], resume: bool) -> List[str]:
    """train.py's arguments for the stage's first chunk (from step ``at``) or for a chunk resuming at ``at``
    (None: not known yet, for the plan; a --max-steps then reads LEFT)."""
    folder = job.path(stage.out)
    if resume:
        argv = ["--resume", str(folder)]
    else:
        argv = ["--recipe", stage.recipe]
        if stage.init is not None:
            argv += ["--init-weights", str(job.path(stage.init))]
        if stage.rewarm:
            argv += ["--rewarm", str(stage.rewarm)]
        if stage.schedule_start is not None:
            argv += ["--schedule-start", str(stage.schedule_start)]
        argv += stage.options
    argv += ["--data", *map(str, job.folders(stage.data))]
    cache = job.cache(stage.data not in (ALL, FIRST))
    if cache is not None:
        argv += ["--frame-cache", str(cache)]
    argv += ["--out", str(folder)]
    if job.minutes is not None:
        argv += ["--minutes", f"{job.minutes:g}"]
    if stage.end < stage.schedule_end:  # stopped before its schedule's end, where train.py would go on
        argv += ["--max-steps", "LEFT" if at is None else str(stage.end - at)]
    return argv + list(job.extra)


def export_argv(step: Export, job: Job) -> List[str]:
    argv = [str(job.path(step.source)), "--out", str(job.path(step.out))]
    if step.flow_iterations:
        argv += ["--flow-iterations", *map(str, step.flow_iterations)]
    return argv


def average_argv(step: Average, job: Job) -> List[str]:
    return ["--out", str(job.path(step.out)), *(str(job.path(name)) for name in step.sources),
            "--shares", *map(str, step.shares), "--recipe", step.recipe, "--step", str(step.step)]


def pack_argv(step: Select, job: Job) -> List[str]:
    return ["pack", "--data", *map(str, job.data), "--out", str(job.path(step.bundles)),
            "--min-short-side", str(step.min_short_side)]


def unpack_argv(step: Select, job: Job, bundle: Union[Path, str]) -> List[str]:
    return ["unpack", str(bundle), "--dest", str(job.path(step.out)), "--cache", str(job.cache(True))]


def command(module: str, argv: Sequence[str]) -> str:
    """The shell command line of a module's ``main(argv)``."""
    program = "python train.py" if module == "train" else f"python -m {module}"
    return f"{program} {shlex.join(argv)}"


def is_done(step: Step, job: Job) -> bool:
    """Whether the step's own output is there (a train stage: trained to its end step)."""
    if isinstance(step, Train):
        at = progress_step(job.path(step.out))
        return at is not None and at >= step.end
    if isinstance(step, Select):
        from training.data import missing_clips

        folders = job.folders(step.out)
        return all(is_footage_folder(f) for f in folders) and not missing_clips(list(folders))
    return job.path(step.out).is_file()


def finished(chain: Sequence[Step], job: Job) -> List[bool]:
    """Per step: done, or followed by a done step (whose inputs it made; they may have been deleted since)."""
    flags = [False] * len(chain)
    later = False
    for i in reversed(range(len(chain))):
        later = later or is_done(chain[i], job)
        flags[i] = later
    return flags


def call(module: str, argv: List[str]) -> int:
    """Run ``module.main(argv)`` in this process, its printing on stderr (stdout says only what this command did and
    does next: train.py's own last line also starts with "done: "); its exit code, argparse's exit included."""
    print(f"run: {command(module, argv)}", flush=True)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            code = importlib.import_module(module).main(argv)
    except SystemExit as exc:  # argparse rejected an option: it said why
        code = exc.code
    return code if isinstance(code, int) else (0 if code is None else 1)


def next_chunk(stage: Train, job: Job, chain: Sequence[Step]) -> List[str]:
    """train.py's arguments for the stage's next chunk: resuming its state folder, or its first."""
    at = progress_step(job.path(stage.out))
    return train_argv(stage, job, start_step(stage, chain) if at is None else at, resume=at is not None)


def run_step(step: Union[Export, Average, Select], job: Job) -> int:
    """Run one step that is not a train stage; its exit code."""
    if isinstance(step, Export):
        return call("training.export", export_argv(step, job))
    if isinstance(step, Average):
        return call("training.average", average_argv(step, job))
    code = call("training.stage", pack_argv(step, job))
    if code != 0:
        return code
    bundles = sorted((p for p in job.path(step.bundles).iterdir() if p.is_dir()), key=lambda p: int(p.name))
    for bundle in bundles:
        code = call("training.stage", unpack_argv(step, job, bundle))
        if code != 0:
            return code
    return 0


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Hold the folder's lock file: one process at a time writes an export, an average or the selection."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".reproduce.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def advance(chain: Sequence[Step], job: Job) -> int:
    """Skip the finished steps, train one chunk, run the steps that are then ready, and say what comes next."""
    flags = finished(chain, job)
    print(f"{sum(flags)} of {len(chain)} steps finished in {job.out}", flush=True)
    trained = False
    for i, step in enumerate(chain):
        if flags[i]:
            continue
        if isinstance(step, Train) and trained and job.minutes is not None:
            print(f"next: {command('train', next_chunk(step, job, chain))}")
            return 0
        if isinstance(step, Train):
            code = call("train", next_chunk(step, job, chain))
            trained = True
        else:
            with locked(job.out):
                # another process on this --out (each of torchrun's, a second call) may have made it meanwhile
                code = 0 if is_done(step, job) else run_step(step, job)
        if code != 0:
            print(f"error: step {i + 1} ({step.out}) failed with exit code {code}", file=sys.stderr)
            return code
        if isinstance(step, Train) and not is_done(step, job):
            print(f"{step.out}: at step {progress_step(job.path(step.out))} of {step.end}")
            print(f"next: {command('train', next_chunk(step, job, chain))}")
            return 0
    print(f"done: {job.path(chain[-1].out)}")
    return 0


def describe(name: str, chain: Sequence[Step], job: Job) -> List[str]:
    """The plan: every step, its state in ``job.out`` and its command lines."""
    flags = finished(chain, job)
    limit = "each stage to its end" if job.minutes is None else f"each train.py chunk at most {job.minutes:g} minutes"
    lines = [f"the {name} weights ({SHIPPED[name]}) in {len(chain)} steps under {job.out}, {limit}; the chain's "
             f"file: {job.path(chain[-1].out)}"]
    first_open = next((i for i, flag in enumerate(flags) if not flag), None)
    for i, step in enumerate(chain):
        head = f"{i + 1:2d}. [{'done' if flags[i] else 'next' if i == first_open else 'to do'}]"
        if isinstance(step, Train):
            at = progress_step(job.path(step.out))
            lines += [f"{head} train {step.out}: {step.recipe} to step {step.end}"
                      + ("" if at is None or flags[i] else f" (at step {at})"),
                      f"      {command('train', train_argv(step, job, start_step(step, chain), False))}",
                      f"      then, until step {step.end}: {command('train', train_argv(step, job, None, True))}"]
            if step.end < step.schedule_end:
                lines.append(f"      (LEFT: {step.end} less the step reached)")
        elif isinstance(step, Export):
            lines += [f"{head} export {step.out}", f"      {command('training.export', export_argv(step, job))}"]
        elif isinstance(step, Average):
            lines += [f"{head} average {step.out}", f"      {command('training.average', average_argv(step, job))}"]
        else:
            bundle = job.path(step.bundles) / "N"
            lines += [f"{head} select {step.out}: the training clips at least {step.min_short_side} px on their "
                      f"short side and every held-out clip",
                      f"      {command('training.stage', pack_argv(step, job))}",
                      f"      then for each bundle N: {command('training.stage', unpack_argv(step, job, bundle))}"]
    return lines


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                allow_abbrev=False)
    p.add_argument("weights", choices=sorted(CHAINS), help="which shipped weights file to reproduce")
    p.add_argument("--data", type=Path, nargs="+", required=True, metavar="FOLDER",
                   help="the footage folders (footage footage2, in that order)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder for every step's output")
    p.add_argument("--frame-cache", type=Path, metavar="DIR",
                   help="train.py's frame cache, best in RAM (default: none; the fast chain's selected clips: "
                        "DIR/frame-cache)")
    p.add_argument("--minutes", type=float,
                   help="end the call after one train.py chunk of this many minutes, for machines with time limits "
                        "(the same command again continues); default: the whole chain in one call")
    p.add_argument("--dry-run", action="store_true", help="print every step's command line, run nothing")
    args, extra = p.parse_known_args(argv)
    try:
        job = Job(tuple(args.data), args.out, args.frame_cache, args.minutes, tuple(extra))
        chain = CHAINS[args.weights]
        if args.dry_run:
            print("\n".join(describe(args.weights, chain, job)))
            return 0
        return advance(chain, job)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
