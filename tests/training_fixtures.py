"""Helpers of the training tests: generated footage (made here, so the suite needs no ../shared; conftest's
``footage`` fixture) and the arguments of a tiny CPU run."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path


from softsplat_vfi.media.video import ffmpeg_exe

ROOT = Path(__file__).resolve().parent.parent


def make_footage(folder: Path, clips=(("a.mp4", "testsrc2"), ("b.mp4", "mandelbrot"), ("val.mp4", "life")),
                 frames: int = 12, size: str = "96x80") -> Path:
    """A footage folder as train.py reads it: short H.264 clips of ffmpeg's test sources and their clips.jsonl."""
    folder.mkdir(parents=True, exist_ok=True)
    width, height = map(int, size.split("x"))
    entries = []
    for name, source in clips:
        subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi", "-i", f"{source}=size={size}:rate=10",
                        "-frames:v", str(frames), "-c:v", "libx264", "-pix_fmt", "yuv444p", str(folder / name)],
                       check=True)
        entries.append({"file": name, "frames": frames, "width": width, "height": height, "frame_step": 1,
                        "orig_size": size, "flow_mean_px_per_orig_frame": 2.0, "cuts_before_frame": []})
    (folder / "clips.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    return folder


def run_args(footage, out, *extra):
    """A tiny run of the study recipe (from scratch) on the CPU: batch 4, 32-px crops, val.mp4 held out, validated
    on one batch per set (the default 4 took most of a run's time here). A run that resumes or starts from weights
    continues their recipe instead, and a resumed one its number of validation batches and how often it validates,
    unless ``extra`` says."""
    recipe = [] if "--resume" in extra or "--init-weights" in extra else ["--recipe", "study"]
    batches = [] if "--resume" in extra or "--val-batches" in extra else ["--val-batches", "1"]
    every = [] if "--resume" in extra or "--val-every" in extra else ["--val-every", "2"]
    return ["--data", str(footage), "--out", str(out), *recipe, "--batch", "4", "--crop", "32", "--device", "cpu",
            "--validation-clips", "val.mp4", *every, *batches, *extra]


def free_port() -> int:
    """A TCP port free on this machine now, for torchrun's rendezvous (a fixed one fails where another run holds
    it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def torchrun(footage, out, port: int, *extra, timeout: float = 600) -> subprocess.CompletedProcess:
    """train.py in two CPU processes through torchrun (gloo), with ``run_args`` and ``extra``; a run that takes
    more than ``timeout`` seconds is an error (subprocess.TimeoutExpired)."""
    # (NVLink multicast off, as in every process the device scripts start)
    env = dict(os.environ, OMP_NUM_THREADS="1", NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               NVSHMEM_DISABLE_NVLS="1")
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master_port", str(port), str(ROOT / "train.py"), *run_args(footage, out, *extra)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)
