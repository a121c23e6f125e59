"""Batch jobs: many videos, each one job as ``run.py --video`` runs it, on this machine or on a Ray cluster.

    python run.py --batch 'clips/*.mp4' --out-dir out/                     # here, one job after another
    python run.py --batch list.txt --out-dir out/ --ray auto               # on the Ray cluster of this machine
    python run.py --batch film.mkv --out-dir out/ --ray 10.0.0.1:6379      # on a remote cluster

Each input is a job under the same rules as a single one (``pipeline.video``): its output in ``--out-dir`` under the
input's name, its work folder beside it (``pipeline.jobs.work_folder``), the same job key (a rerun resumes, another
setting starts over), the same lock, held by the driver from the job's start to its join. On Ray a job's output
frames are split into segment tasks at exact frame indices, on the boundaries of the segments one run makes
(``segment_frames``), so every segment is the one run's segment, encoded alone from the same frames: the joined
output is one uninterrupted run's. Each task decodes the input from a few frames before its first (from its start with
de-duplication; ``first_frame_to_read``) to the anchor after its last frame, so each pair's neighbours and the
scene test see what one run sees, and interpolates only its own frames (``encode_segments``, the torchrun
route's); the driver joins the segments (``finish_video_job``). Tasks
ask for GPUs where the cluster has them, else for CPUs; a killed worker's task is retried by Ray and keeps the
segments it finished. Inputs, outputs and the weights file must have the same paths on every node (a shared file
system), as torchrun's processes share one. Importing this module does nothing; it imports Ray only for ``--ray``.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..media.files import OutputError
from ..media.progress import Progress
from ..media.video import VideoError

from .jobs import Interrupted
from .video import (Interpolator, VideoJob, VideoOptions, device_type, encode_segments, finish_video_job,
                    finished_frames, finished_segments, lock_output, made_by_a_video_job, plan_video_job, prepare_work,
                    segment_frames)

try:
    import fcntl
except ImportError:  # Windows: no flock; a batch's tasks there are not fenced (pipeline.jobs' locks are not either)
    fcntl = None  # type: ignore[assignment]

# what makes the interpolator, in this process or on a worker (run.py's make_interpolator with the engine's options:
# picklable, so that Ray sends it to the workers); ``job_id``, where the interpolator has one, names the job keys
MakeInterpolator = Callable[[], Interpolator]

# inputs a folder given to --batch holds, and the containers an output keeps (another input's output is .mkv)
VIDEO_SUFFIXES = (".mp4", ".mkv", ".mov", ".webm", ".avi", ".m4v", ".mts", ".m2ts", ".ts", ".mpg", ".mpeg", ".wmv",
                  ".flv", ".y4m", ".dv")
OUTPUT_SUFFIXES = (".mp4", ".mkv", ".mov", ".webm")
# the key of the job that made a finished output, beside media.files' mark of who made it: a rerun of the batch
# keeps an output of the same key, and redoes one of another (file systems without extended attributes: redone)
_KEY_ATTR = "user.softsplat.job_key"
# a segment task tells the driver its frames done at most this often (seconds)
REPORT_EVERY = 0.5
# every segment task holds this file of its job's work folder locked (shared) while it runs, and the operating system
# lets go of it when the task's process ends in any way: the driver takes it (exclusive) before it lets go of the
# job's own lock after cancelling tasks, so that no worker still writes into the folder that a rerun then takes
# (Ray answers for a cancelled task before its process has ended)
TASKS_LOCK = "tasks.lock"
# the longest the driver waits for cancelled tasks' processes to end (seconds)
FENCE_SECONDS = 60.0


def add_batch_flags(parser: argparse.ArgumentParser) -> None:
    """The batch command's flags (run.py adds them beside the video options, which every job of a batch takes)."""
    g = parser.add_argument_group("batch jobs (docs/video.md#batch-jobs)")
    g.add_argument("--batch", nargs="+", default=None, metavar="LIST_OR_GLOB",
                   help="input videos, each a job: files, folders (their videos), glob patterns ('clips/*.mp4') or "
                        "text files (.txt/.list) of paths, one a line; outputs go to --out-dir under the inputs' "
                        "names (.mkv where the input's container is not mp4/mkv/mov/webm)")
    g.add_argument("--out-dir", type=Path, default=None, help="folder of the batch's outputs (must exist)")
    g.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="run the batch's segment tasks on a Ray cluster (pip install .[cluster]): auto (the cluster "
                        "`ray start --head` started on this machine, or RAY_ADDRESS), HOST:PORT or ray://HOST:10001, "
                        "or local (a Ray instance of this command's own, on this machine's CPUs and GPUs). Without "
                        "it, the jobs run here one after another, Ray not imported")
    g.add_argument("--segments-per-task", type=int, default=None,
                   help="segments (--segment-seconds each) per Ray task; default: a job is split into at most as "
                        "many tasks as the cluster runs at once")
    g.add_argument("--task-gpus", type=float, default=1.0,
                   help="GPUs each Ray task asks for where the cluster has GPUs (0.25: four tasks share one)")
    g.add_argument("--task-cpus", type=float, default=1.0,
                   help="CPUs each Ray task asks for where the cluster has no GPU (torch then uses that many threads)")


def batch_mistake(args: argparse.Namespace) -> str:
    """What makes the command line's batch flags wrong ("" where nothing): the flags of a batch without --batch,
    a batch without --out-dir, or with a single job's --video, --frames, --out, --one or --two."""
    if args.batch is None:
        given = [flag for flag, value in (("--out-dir", args.out_dir), ("--ray", args.ray),
                                          ("--segments-per-task", args.segments_per_task)) if value is not None]
        return f"{', '.join(given)}: batch flags, for --batch" if given else ""
    if args.out_dir is None:
        return "--batch needs --out-dir DIR, the folder of its outputs"
    single = [flag for flag, value in (("--video", args.video), ("--frames", args.frames), ("--out", args.out),
                                       ("--one", args.one), ("--two", args.two)) if value is not None]
    if single:
        return f"{', '.join(single)}: a single job's, not a batch's (--batch takes the inputs, --out-dir the outputs)"
    if args.segments_per_task is not None and args.segments_per_task < 1:
        return f"--segments-per-task {args.segments_per_task}: use 1 or more"
    if not (args.task_gpus > 0 and args.task_cpus > 0):
        return "--task-gpus and --task-cpus must be more than 0"
    if args.ray is not None and str(args.device).startswith("cuda:"):
        return f"--device {args.device} with --ray: Ray gives each task its GPU -- use --device auto or cuda"
    return ""


def batch_inputs(items: Sequence[str]) -> List[Path]:
    """The inputs named by ``items`` (``add_batch_flags``' --batch), in order; ValueError for an item that names
    nothing. A missing file stays in the list: its job fails alone."""
    found: List[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            found += sorted(p for p in path.iterdir() if p.suffix.lower() in VIDEO_SUFFIXES and p.is_file())
        elif path.is_file() and path.suffix.lower() in (".txt", ".list"):
            lines = [line.strip() for line in path.read_text().splitlines()]
            base = path.parent
            found += [Path(line) if Path(line).is_absolute() else base / line
                      for line in lines if line and not line.startswith("#")]
        elif glob.has_magic(item):
            matched = sorted(glob.glob(item, recursive=True))
            if not matched:
                raise ValueError(f"--batch {item}: the pattern matches no file")
            found += [Path(p) for p in matched if Path(p).is_file()]
        else:
            found.append(path)
    if not found:
        raise ValueError(f"--batch {' '.join(items)}: no input videos")
    return found


def output_for(source: Path, out_dir: Path) -> Path:
    """The output of ``source``: its name in ``out_dir``, in .mkv where its container is none a video job
    writes."""
    suffix = source.suffix if source.suffix.lower() in OUTPUT_SUFFIXES else ".mkv"
    return Path(out_dir) / (source.stem + suffix)


@dataclass
class Job:
    """One input of a batch and what became of it."""

    number: int
    source: Path
    out: Path
    video: Optional[VideoJob] = None
    result: str = ""  # "done", "kept", "failed", "interrupted"; "" while queued or running
    message: str = ""
    seconds: float = 0.0
    tasks: List[range] = field(default_factory=list)  # its segment tasks' output frames (Ray)
    before: List[int] = field(default_factory=list)  # and each one's frames finished before this run
    stats: Dict[str, Any] = field(default_factory=dict)


def _finished_before(job: VideoJob) -> bool:
    """Whether ``job.out`` is the finished output of this very job (made by it, unchanged since: a rerun keeps
    it)."""
    if not made_by_a_video_job(job.out) or job.work.exists():
        return False
    try:
        return json.loads(os.getxattr(job.out, _KEY_ATTR)) == {"key": job.key}
    except (AttributeError, OSError, ValueError):
        return False


def _mark_key(job: VideoJob) -> None:
    try:
        os.setxattr(job.out, _KEY_ATTR, json.dumps({"key": job.key}).encode())
    except (AttributeError, OSError):
        pass  # (no extended attributes here: a rerun redoes the output)


def plan_jobs(inputs: Sequence[Path], out_dir: Path, options_for: Callable[[Path], VideoOptions],
              weights_id: str, say: Callable[[BaseException], str] = str) -> List[Job]:
    """Every input's job, planned (probed and checked, as ``run.py --video`` does before any work); an input that
    cannot be is a failed job with its one line. Two inputs of one output name: the later ones fail (never two
    jobs in one work folder)."""
    jobs: List[Job] = []
    taken: Dict[Path, int] = {}
    for number, source in enumerate(inputs, 1):
        job = Job(number, source, output_for(source, out_dir))
        jobs.append(job)
        key = Path(os.path.abspath(job.out))
        if key in taken:
            job.result = "failed"
            same = "the same input as" if os.path.abspath(source) == os.path.abspath(jobs[taken[key] - 1].source) \
                else "the same output name as"
            job.message = f"{source}: {same} job {taken[key]} ({jobs[taken[key] - 1].source}): its output " \
                          f"{job.out} is that job's -- rename one of them"
            continue
        taken[key] = number
        try:
            job.video = plan_video_job(source, job.out, options_for(job.out), weights_id)
        except ValueError as exc:  # VideoError, OutputError: the input or the output is wrong
            job.result, job.message = "failed", failure_line(exc, say)
            continue
        if _finished_before(job.video):
            job.result, job.message = "kept", "finished before (same job key)"
    return jobs


def _one_line(exc: BaseException, say: Callable[[BaseException], str] = str) -> str:
    """The first line of ``exc``'s message as ``say`` words it (its type's name where it has none)."""
    text = say(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def split_frames(count: int, most_frames: int, per_task: int) -> List[range]:
    """A job's ``count`` output frames in tasks of ``per_task`` segments of ``most_frames`` frames each (the last
    task shorter): the boundaries are those of the segments one run makes."""
    size = most_frames * per_task
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


# -- this machine, without Ray --------------------------------------------------------------------------------------

class _Local:
    """Jobs one after another in this process, with one interpolator for all of them."""

    def __init__(self, make_interpolator: MakeInterpolator) -> None:
        self.interpolator = make_interpolator()
        self.weights_id = str(getattr(self.interpolator, "job_id", ""))


def _run_here(jobs: List[Job], runner: _Local, bar: Progress, say: Callable[[BaseException], str]) -> None:
    for job in jobs:
        if job.result or job.video is None:
            continue
        started = time.monotonic()
        lock = None
        try:
            lock = lock_output(job.out)
            _fence(job.video.work)  # (tasks of a batch whose driver was killed: Ray ends them, not at once)
            prepare_work(job.video)
            count = job.video.plan.count
            before, = finished_frames(job.video, [range(count)])
            bar.skip(before)
            shown = [before]

            def report(done: int, shown: List[int] = shown) -> None:
                if done > shown[0]:
                    bar.update(done - shown[0])
                    shown[0] = done

            job.stats = encode_segments(job.video, runner.interpolator, range(count), progress=False, report=report)
            _finish(job)
        except Interrupted as exc:
            job.result, job.message = "interrupted", str(exc)
            raise
        except Exception as exc:  # the job's own mistake (ValueError: VideoError, OutputError) or any failure in it
            job.result, job.message = "failed", failure_line(exc, say)
        finally:
            if lock is not None:
                lock.release()
            job.seconds = time.monotonic() - started
            if job.result:
                _say(job)


def _finish(job: Job) -> None:
    assert job.video is not None
    stats = finish_video_job(job.video, job.stats)
    _mark_key(job.video)
    job.stats = stats
    job.result = "done"
    job.message = f"{stats['frames_out']} frames, {stats['interpolated']} interpolated, " \
                  f"{stats.get('resumed_segments', 0)} segments resumed, audio {stats['audio']}"


def _say(job: Job) -> None:
    """The per-job line, as each job ends."""
    stream = sys.stderr if job.result in ("failed", "interrupted") else sys.stdout
    word = {"done": "wrote", "kept": "kept", "failed": "error:", "interrupted": "interrupted:"}[job.result]
    where = job.out if job.result in ("done", "kept") else job.source
    said = job.message if job.result in ("failed", "interrupted") and str(where) in job.message \
        else f"{where}: {job.message}"
    print(f"[{job.number}] {word} {said}", file=stream, flush=True)


# -- a Ray cluster --------------------------------------------------------------------------------------------------

class _Tally:
    """A Ray actor: each running task's count of its frames done, for the driver's progress bar."""

    def __init__(self) -> None:
        self.done: Dict[Tuple[int, int], int] = {}

    def set(self, task: Tuple[int, int], done: int) -> None:
        self.done[task] = done

    def counts(self) -> Dict[Tuple[int, int], int]:
        return dict(self.done)


def _identity_task(make_interpolator: MakeInterpolator) -> Tuple[str, str]:
    """On a worker: the interpolator's job id (what the job keys hold) and its device type."""
    interpolator = make_interpolator()
    return str(getattr(interpolator, "job_id", "")), device_type(interpolator)


def _segment_task(job: VideoJob, make_interpolator: MakeInterpolator, weights_id: str, frames: range,
                  most_frames: int, tally: Any, task: Tuple[int, int]) -> dict:
    """On a worker: the output frames ``frames`` of ``job`` into its work folder (those not in a finished segment
    already), in segments of ``most_frames``."""
    interpolator = make_interpolator()
    here = str(getattr(interpolator, "job_id", ""))
    if here != weights_id:
        raise VideoError(f"this worker's interpolator differs from the batch's first ({here} against {weights_id}): "
                         f"a cluster of mixed devices would mix two settings in one output -- run the batch on "
                         f"workers of one kind")
    last = [0.0]

    def report(done: int) -> None:
        if time.monotonic() - last[0] >= REPORT_EVERY or done == len(frames):
            last[0] = time.monotonic()
            tally.set.remote(task, done)

    fd = os.open(job.work / TASKS_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_SH)
        return encode_segments(job, interpolator, frames, progress=False, most_frames=most_frames, report=report)
    finally:
        os.close(fd)


def _fence(work: Path) -> None:
    """Wait until no process of a segment task holds ``work``'s TASKS_LOCK (each ended: cancelled, killed or
    done), for FENCE_SECONDS at most."""
    if fcntl is None or not (work / TASKS_LOCK).is_file():
        return
    try:
        fd = os.open(work / TASKS_LOCK, os.O_RDWR)
    except OSError:
        return
    try:
        end = time.monotonic() + FENCE_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError:
                if time.monotonic() > end:
                    print(f"warning: {work}: a cancelled task still runs after {FENCE_SECONDS:.0f} s",
                          file=sys.stderr)
                    return
                time.sleep(0.05)
    finally:
        os.close(fd)


def _connect(address: str) -> Any:
    """Ray, connected: ``address`` "local" starts an instance of this command's own; anything else is ray.init's
    address ("auto": the cluster started on this machine). A process connected already keeps its connection."""
    try:
        import ray
    except ImportError:
        raise ValueError("--ray needs Ray: pip install '.[cluster]' (or pip install 'ray[default]'), or leave --ray "
                         "out to run the batch on this machine") from None
    if not ray.is_initialized():
        root = str(Path(__file__).resolve().parent.parent)
        # the workers import this project from where the driver does, where it is not installed on them
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
        env = {"env_vars": {"PYTHONPATH": path}}
        try:
            if address == "local":
                ray.init(runtime_env=env, include_dashboard=False, logging_level="ERROR")
            else:
                ray.init(address=address, runtime_env=env, logging_level="ERROR")
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ValueError(f"--ray {address}: could not connect ({_one_line(exc)}) -- start a cluster with "
                             f"`ray start --head`, or use --ray local") from None
    return ray


class _Cluster:
    """The Ray side of a batch: what each task asks for, the interpolator's identity, how many tasks run at once."""

    def __init__(self, ray: Any, make_interpolator: MakeInterpolator, args: argparse.Namespace) -> None:
        self.ray = ray
        resources = ray.cluster_resources()
        gpus = resources.get("GPU", 0)
        use_gpus = gpus > 0 and args.device != "cpu"
        if str(args.device).startswith("cuda") and not gpus:
            raise ValueError(f"--device {args.device}: the Ray cluster has no GPU")
        if use_gpus:
            self.resources = {"num_gpus": args.task_gpus, "num_cpus": 1}
            self.slots = max(1, int(gpus // args.task_gpus))
        else:
            self.resources = {"num_gpus": 0, "num_cpus": args.task_cpus}
            self.slots = max(1, int(resources.get("CPU", 1) // args.task_cpus))
        self.where = (f"{self.slots} tasks at once on {gpus:g} GPUs" if use_gpus
                      else f"{self.slots} tasks at once on {resources.get('CPU', 0):g} CPUs")
        self.make_interpolator = make_interpolator
        identity = ray.remote(_identity_task).options(**self.resources)
        self.weights_id, self.device = ray.get(identity.remote(make_interpolator))
        self.segment = ray.remote(_segment_task).options(**self.resources, max_retries=3, retry_exceptions=False)
        self.tally = ray.remote(_Tally).options(num_cpus=0).remote()


@dataclass
class _Open:
    """A job whose tasks the driver handed to Ray: its lock, held until the last of them has ended."""

    lock: Any
    started: float
    resumed: int  # finished segments its work folder held
    left: int = 0  # its tasks still running
    stats: List[dict] = field(default_factory=list)


def _run_on_ray(jobs: List[Job], cluster: _Cluster, per_task: Optional[int], bar: Progress,
                say: Callable[[BaseException], str]) -> None:
    """Every planned job's segment tasks on the cluster, a window of jobs at a time (each holding its lock from
    its first task to its join, or until its last task ended); a failed task fails its job alone, the others of
    that job are cancelled."""
    ray = cluster.ray
    queue = [job for job in jobs if not job.result and job.video is not None]
    window = max(4, 2 * cluster.slots)
    running: Dict[Any, Tuple[Job, int]] = {}  # task ref -> (job, task index)
    opened: Dict[int, _Open] = {}  # job number -> its state, while its tasks run
    ended: Dict[Tuple[int, int], int] = {}  # (job number, task index) -> its frames, once it returned
    shown = 0

    def start(job: Job) -> None:
        video = job.video
        assert video is not None
        try:
            lock = lock_output(job.out)
        except ValueError as exc:
            job.result, job.message = "failed", failure_line(exc, say)
            _say(job)
            return
        try:
            _fence(video.work)  # (tasks of a batch whose driver was killed: Ray ends them, not at once)
            prepare_work(video)
            count = video.plan.count
            most = segment_frames(video.plan.rate_out, video.info.width, video.info.height, video.options,
                                  cluster.device)
            job.tasks = split_frames(count, most, per_task or math.ceil(math.ceil(count / most) / cluster.slots))
            job.before = finished_frames(video, job.tasks)
            resumed = len(finished_segments(video))
        except ValueError as exc:
            lock.release()
            job.result, job.message = "failed", failure_line(exc, say)
            _say(job)
            return
        bar.skip(sum(job.before))
        state = opened[job.number] = _Open(lock, time.monotonic(), resumed)
        for index, frames in enumerate(job.tasks):
            if job.before[index] < len(frames):  # (a task whose segments are all finished is not run again)
                ref = cluster.segment.remote(video, cluster.make_interpolator, cluster.weights_id, frames, most,
                                             cluster.tally, (job.number, index))
                running[ref] = (job, index)
                state.left += 1
        if not state.left:
            end(job)

    def end(job: Job) -> None:
        """The job's last task ended: joined, unless one failed; its line; its lock released."""
        state = opened.pop(job.number)
        try:
            if not job.result:
                job.stats = {"cuts": sum(s["cuts"] for s in state.stats),  # (each task counts its own part's)
                             "interpolated": sum(s["interpolated"] for s in state.stats),
                             "resumed_segments": state.resumed}
                _finish(job)
        except ValueError as exc:
            job.result, job.message = "failed", failure_line(exc, say)
        finally:
            if job.result == "failed" and job.video is not None:
                _fence(job.video.work)  # (its other tasks were cancelled)
            state.lock.release()
        job.seconds = time.monotonic() - state.started
        _say(job)

    def made_now() -> int:
        """Frames the tasks of this run made (what they reported, beyond what was finished before)."""
        counts = ray.get(cluster.tally.counts.remote())
        made = 0
        for job in jobs:
            for index, frames in enumerate(job.tasks):
                task = (job.number, index)
                done = max(counts.get(task, 0), ended.get(task, 0))
                made += max(0, min(done, len(frames)) - job.before[index])
        return made

    try:
        while queue or running:
            while queue and len(opened) < window:
                job = queue.pop(0)
                start(job)
            if not running:
                continue
            ready, _ = ray.wait(list(running), num_returns=1, timeout=REPORT_EVERY)
            for ref in ready:
                job, index = running.pop(ref)
                state = opened[job.number]
                state.left -= 1
                try:
                    state.stats.append(ray.get(ref))
                    ended[(job.number, index)] = len(job.tasks[index])
                except Exception as exc:  # the task's own error (a RayTaskError), or Ray's (a worker lost 4 times)
                    if not job.result:
                        job.result, job.message = "failed", failure_line(exc, say)
                        for other, (other_job, _) in running.items():
                            if other_job is job:
                                ray.cancel(other, force=True)
                if not state.left:
                    end(job)
            made = made_now()
            if made > shown:
                bar.update(made - shown)
                shown = made
    except KeyboardInterrupt:
        # every task stopped and waited for, so that no worker writes into a work folder after its lock is released
        # (a rerun takes it)
        for ref in running:
            ray.cancel(ref, force=True)
        for ref in running:
            try:
                ray.get(ref)
            except Exception:  # (cancelled: the segments it finished are kept)
                pass
        for number, state in opened.items():
            job = jobs[number - 1]
            if job.video is not None:
                _fence(job.video.work)
            state.lock.release()
            job.result, job.message = "interrupted", "its finished segments are kept: run the same batch again"
        raise Interrupted("the finished segments are kept: run the same batch again to resume") from None


def failure_line(exc: BaseException, say: Callable[[BaseException], str] = str) -> str:
    """A failed job's one line: its error's message (a task's own, which Ray wraps in a RayTaskError, or Ray's) as
    ``say`` words it, named by its type where it is not one of the user's mistakes (ValueError)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    line = _one_line(exc, say)
    return line if isinstance(exc, ValueError) else f"{type(exc).__name__}: {line}"


# -- the command ----------------------------------------------------------------------------------------------------

def run_batch(args: argparse.Namespace, options_for: Callable[[Path], VideoOptions],
              make_interpolator: MakeInterpolator, loading: str = "",
              say: Callable[[BaseException], str] = str) -> int:
    """``run.py --batch``: every input's job, then a table of the jobs and what became of them; 0 where every job
    is done or kept, 1 where any failed (each said in one line as it ended), 130 after an interrupt. ``args``: the
    batch's flags (``add_batch_flags``) and --device; ``options_for``: the video options of an output;
    ``loading``: said before the interpolator loads here (without --ray); ``say``: an error's words (run.py's say
    the library's fields as its flags)."""
    out_dir = Path(args.out_dir)
    if not out_dir.is_dir():
        raise OutputError(f"--out-dir {out_dir}: no such folder (create it first)")
    inputs = batch_inputs(args.batch)
    options_for(output_for(inputs[0], out_dir))  # the options' mistakes, once and before the network loads
    cluster = runner = None
    if args.ray is not None:
        cluster = _Cluster(_connect(args.ray), make_interpolator, args)
        weights_id = cluster.weights_id
        print(f"Ray: {cluster.where}", file=sys.stderr, flush=True)
    else:
        if loading:
            print(loading, file=sys.stderr, flush=True)
        runner = _Local(make_interpolator)
        weights_id = runner.weights_id
    jobs = plan_jobs(inputs, out_dir, options_for, weights_id, say)
    for job in jobs:
        if job.result:
            _say(job)
    total = sum(job.video.plan.count for job in jobs if job.video is not None and job.result != "failed")
    interrupted = ""
    with Progress(total, "batch") as bar:
        bar.skip(sum(job.video.plan.count for job in jobs if job.result == "kept" and job.video is not None))
        try:
            if cluster is not None:
                _run_on_ray(jobs, cluster, args.segments_per_task, bar, say)
            else:
                assert runner is not None
                _run_here(jobs, runner, bar, say)
        except KeyboardInterrupt as exc:
            interrupted = str(exc) or "nothing had started"
    print(table(jobs))
    if interrupted:
        print(f"interrupted: {interrupted}", file=sys.stderr)
        return 130
    return 1 if any(job.result == "failed" for job in jobs) else 0


def table(jobs: Sequence[Job]) -> str:
    """The batch's jobs and their results, one row each."""
    rows = [("job", "input", "output", "result", "seconds", "")]
    for job in jobs:
        rows.append((str(job.number), str(job.source), str(job.out), job.result or "not started",
                     f"{job.seconds:.1f}" if job.seconds else "", job.message))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row[:5], widths)) + "  " + row[5] for row in rows]
    failed = sum(job.result == "failed" for job in jobs)
    lines.append(f"{len(jobs)} jobs: {sum(job.result == 'done' for job in jobs)} done, "
                 f"{sum(job.result == 'kept' for job in jobs)} kept from before, {failed} failed")
    return "\n".join(line.rstrip() for line in lines)
