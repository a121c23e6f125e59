"""Video throughput on the GPU: the whole pipeline (decode, interpolate, encode, mux) and the model alone.

    python -m bench.bench_video --video in.mp4 [--factor 2] [--bf16] [--eager] [--preset veryfast]
        [--motion quadratic linear] [--ensemble 1 2 4] [--flow-scale 1 auto] [--stages] [--json out.json]
    python -m bench.bench_video --memory 3840x2160 7680x4320 [--flow-scale 0.5] [--tile 2048]

Pipeline frames per second count output frames (a x2 job writes two per input frame)
over the wall-clock time of ``pipeline.video.interpolate_video`` after a warm-up pair.
The model alone is one interpolated frame per call on frames already in GPU memory, eager, and (without
``--eager``, which runs the pipeline's network op by op too) replayed as the CUDA graphs that run.py runs by default.
``--motion`` times the pipeline once per motion named (run.py --motion), ``--ensemble`` once per number of
passes named (run.py --ensemble) and ``--flow-scale`` once per flow scale named (run.py --flow-scale), in one
process, side by side.
``--stages`` adds where the pipeline's time goes: decoding alone (input frames per second, as the
pipeline reads them) and the pipeline with an interpolator that copies the nearer input frame
(decode, encode and mux without the network), in the same output frames per second.

The stage table (issue 85) times each stage of the pipeline on two or more kinds of clip, side by side, in one call:

    python -m bench.bench_video --clips synthetic NATURAL.mp4 [--size 1920x1080] [--frames 480] [--factor 2]
        [--weights weights/network.safetensors weights/fast.safetensors] [--preset veryfast medium]
        [--device auto|cpu|cuda] [--compiled] [--json out.json]

``synthetic`` is ffmpeg's testsrc2 with a 440 Hz AAC tone (x264 -preset fast -crf 18, 4:2:0, 24 frames/s: the
issue's clip), made at ``--size`` with ``--frames`` frames; a path is natural footage, looped to ``--frames``,
scaled with lanczos to ``--size`` where it differs and re-encoded the same way, with the same tone as its audio (the
header says what was done). Each stage then runs on each clip (rates in frames per second: "in" counts input
frames, "out" output frames, of which a x2 job writes two per input frame; beside each rate, the CPU cores its
stage kept busy: this process's and its ffmpeg processes' CPU seconds over the stage's wall-clock seconds, which
tells a stage that waits from one that fills the machine):

- decode: ffmpeg decoding to its null muxer, no conversion; decode + rgb24: with the conversion to RGB, still in
  ffmpeg; read_frames: the pipeline's reader (``media.video.read_frames``: the conversion and the pipe into Python);
  read_frames + thumbnails: with the scene test's thumbnails, as the pipeline's reading thread makes them.
- rgb24 pipe: the output's raw frames into ffmpeg's null muxer, without (pipe alone) and with the conversion to
  4:2:0 (pipe + yuv420p); yuv420p conversion: FrameWriter's own (``media.yuv.rgb_to_yuv``) on one thread; x264 P:
  ``media.video.FrameWriter`` as the pipeline opens it (the frames converted to 4:2:0 by its threads, then through
  the pipe; x264 at preset P, CRF 18); x264 P, rgb24 in: x264 fed RGB that ffmpeg converts, as FrameWriter fed it
  before issue 85; x264 P, yuv420p in: x264 fed the decoded 4:2:0 frames, no conversion at all. The encoders take
  the decoded frames forwards then backwards (as many as the output has), at the output rate.
- mux: ``media.video.concat_and_mux`` of the x264 output with the clip's audio copied, as the pipeline's last step.
- network N, route: the engine as run.py builds it (``engine.Interpolator``, its defaults for the device: precision,
  CUDA graphs, the flow scale the weights file states: auto for the default network, 1 for the fast one) fed the decoded
  frames from memory through the pipeline's own schedule (``pipeline.video.stream_frames``: thumbnails, cuts,
  quadratic paths, a pair's work queued before its frames are waited for, which a write-behind thread does);
  ms per frame is the route's time over the frames it interpolated. network N, eager pair: one middle frame of float
  frames already on the device, linear, eager (the figure the rows without ``--clips`` call "model alone");
  network N, graphs pair (CUDA only): the CUDA graphs the route replays, one middle frame, as bench_network times.
- pipeline N P: ``pipeline.video.interpolate_video`` (run.py --video's path: decode, scene test, network, encode in
  segments, mux with the audio copied) with that engine, after its set-up (``plan_video``: probe and checks, timed
  apart); pipeline copy P: the same with an interpolator that copies the nearer frame (no network), sized in segments
  as the engine's device sizes them; pipeline copy P, one segment: the output in one segment (what closing a segment
  and opening the next one costs).

With ``--compiled`` (CUDA) each network also runs as run.py --compile runs it, as the network "N compiled" in every
network and pipeline row; it compiles in its route's warm-up, which no row times (compiled, the warm-up runs the
whole clip once, so that every branch a pair can take is compiled before the timed runs).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from bench.timing import cuda_time_ms, median_ms, require_cuda
from softsplat_vfi.engine import Interpolator, InterpolatorOptions
from softsplat_vfi.engine.interpolator import check_compile, resolve_device
from softsplat_vfi.engine.options import add_flags, device_for, show_notes
from softsplat_vfi.media.video import (FrameWriter, VideoInfo, concat_and_mux, ffmpeg_exe, output_pix_fmt, probe,
                                       read_frames, rgb_conversion_filter)
from softsplat_vfi.media.yuv import planar_layout, rgb_to_yuv, run_opencv_on_callers_threads
from softsplat_vfi.model import Network, load_weights
from softsplat_vfi.model.network import FlowScale
from softsplat_vfi.pipeline.prefetch import WriteBehind
from softsplat_vfi.pipeline.schedule import make_plan, thumb_change, thumbnail
from softsplat_vfi.pipeline.video import Interpolator as PipelineInterpolator
from softsplat_vfi.pipeline.video import (WRITE_DEPTH, VideoOptions, drain_after_slow_pairs, frame_made,
                                          interpolate_video, plan_video, stream_frames, video_options_from_args)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WEIGHTS = ROOT / "softsplat_vfi" / "weights" / "network.safetensors"
FAST_WEIGHTS = ROOT / "softsplat_vfi" / "weights" / "fast.safetensors"


def parse_size(text: str) -> tuple:
    w, h = text.lower().split("x")
    return int(h), int(w)


def time_pipeline(video: Path, step: PipelineInterpolator, options: VideoOptions) -> Tuple[float, int, dict]:
    """Wall-clock seconds of ``interpolate_video`` into a temporary file, its output frame count and stats."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.mp4"
        torch.cuda.synchronize()
        start = time.perf_counter()
        stats = interpolate_video(video, out, step, options, progress=False)
        seconds = time.perf_counter() - start
        return seconds, probe(out).frames, stats


def rows_precision(args: argparse.Namespace) -> str:
    """The precision of the rows without --clips: float32 unless --bf16 or --fp16 says otherwise (the protocol
    their tables in docs/performance.md were measured with), where run.py's default is auto."""
    return "fp32" if args.precision == "auto" else args.precision


def engine_for(args: argparse.Namespace, net: Network, passes: int, flow_scale: FlowScale) -> Interpolator:
    """The engine run.py uses, with its CUDA graphs unless --eager (an ensemble runs eagerly)."""
    return Interpolator(InterpolatorOptions(precision=rows_precision(args), flow_scale=flow_scale, tile=args.tile,
                                            cuda_graphs=args.cuda_graphs, ensemble=passes),
                        network=net)


def time_video(args: argparse.Namespace, net: Network, device: torch.device, info: VideoInfo, one: np.ndarray,
               two: np.ndarray, passes: int, flow_scale: FlowScale) -> List[dict]:
    """One row per motion of ``args.motion``: the pipeline's frames per second with ``passes`` per frame and flow at
    ``flow_scale``, beside the model alone (one interpolated frame per call, eager, and replayed as the CUDA graphs
    that the pipeline runs)."""
    interpolator = engine_for(args, net, passes, flow_scale)
    # warm-up (and the capture of the graphs each motion timed replays)
    interpolator.interpolate_integer(one, two, [0.5])
    if "quadratic" in args.motion:
        interpolator.interpolate_integer_with_neighbours(one, two, [0.5], None, None)
    a = torch.from_numpy(one.copy()).to(device).permute(2, 0, 1)[None].float() / 255.0
    b = torch.from_numpy(two.copy()).to(device).permute(2, 0, 1)[None].float() / 255.0
    model_ms = cuda_time_ms(lambda: interpolator(a, b, [0.5]), repeats=20)
    graphed = interpolator.cuda_graphs_for(info.height, info.width)
    # the model as the pipeline runs it (its CUDA graphs), which the eager figure overstates by the launches
    graphs_ms = None if graphed is None else cuda_time_ms(lambda: graphed(a, b, [0.5]), repeats=20)
    rows = []
    for motion in args.motion:
        options = video_options_from_args(args, motion=motion)
        seconds, frames_out, stats = time_pipeline(args.video, interpolator, options)
        row = {"video": args.video.name, "size": f"{info.width}x{info.height}", "frames_in": info.frames,
               "frames_out": frames_out, "factor": args.factor, "bf16": rows_precision(args) == "bf16",
               "preset": args.preset, "motion": motion, "ensemble": passes, "flow_scale": flow_scale,
               "network_in_pipeline": "eager" if graphed is None else "CUDA graphs",
               "pipeline_seconds": round(seconds, 2), "pipeline_fps": round(frames_out / seconds, 1),
               "model_ms_per_frame": round(model_ms, 2), "model_fps": round(1000.0 / model_ms, 1),
               "model_graphs_ms_per_frame": None if graphs_ms is None else round(graphs_ms, 2),
               "interpolated": stats["interpolated"], "audio": stats["audio"]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


# ---- the stage table (issue 85): each stage of the pipeline, on each kind of clip, side by side ----

SYNTHETIC = "synthetic"
TONE = "sine=f=440:r=48000"  # the clips' audio, which the mux and the pipeline copy


@dataclass
class Clip:
    """A clip of the stage table: its column's name, what was done to make it, the file and what probe says."""

    name: str
    made: str
    path: Path
    info: VideoInfo


def _ffmpeg(args: Sequence[str]) -> None:
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-y", *args], check=True)


def make_clip(spec: str, folder: Path, size: Tuple[int, int], frames: int) -> Clip:
    """The clip ``spec`` names (``synthetic``, or a path: natural footage) as the table times it: ``frames`` frames of
    ``size`` (height, width), x264 -preset fast -crf 18 4:2:0 with an AAC tone, in ``folder``."""
    h, w = size
    encode = ["-c:v", "libx264", "-preset", "fast", "-crf", "18", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest"]
    if spec == SYNTHETIC:
        out = folder / "synthetic.mp4"
        _ffmpeg(["-f", "lavfi", "-i", f"testsrc2=size={w}x{h}:rate=24", "-f", "lavfi", "-i", TONE,
                 "-t", f"{frames / 24:.6f}", *encode, str(out)])
        return Clip(SYNTHETIC, f"testsrc2 {w}x{h} at 24/s", out, probe(out))
    source = Path(spec)
    src = probe(source)
    out = folder / f"natural-{source.stem}.mp4"
    scale = [] if (src.height, src.width) == size else ["-vf", f"scale={w}:{h}:flags=lanczos"]
    rate = f"{src.rate.numerator}/{src.rate.denominator}"
    tone = f"{TONE}:d={float(frames / src.rate):.6f}"
    _ffmpeg(["-stream_loop", "-1", "-r", rate, "-i", str(source), "-f", "lavfi", "-i", tone, "-map", "0:v:0",
             "-map", "1:a", "-frames:v", str(frames), *scale, *encode, str(out)])
    made = [f"{source.name} {src.width}x{src.height} at {float(src.rate):g}/s"]
    if src.frames < frames:
        made.append(f"looped {src.frames} -> {frames} frames")
    if scale:
        made.append(f"lanczos to {w}x{h}")
    return Clip(f"natural {source.stem}", ", ".join(made), out, probe(out))


@dataclass(frozen=True)
class Timing:
    """A stage's wall-clock seconds and the CPU cores it kept busy meanwhile: CPU seconds of this process and of the
    ffmpeg processes it ran (those ended within the stage) over the wall-clock seconds."""

    seconds: float
    cores: Optional[float] = None


@dataclass(frozen=True)
class Measured:
    """One cell of the table: a rate (frames per second), milliseconds or seconds, and the cores busy for it."""

    value: float
    cores: Optional[float] = None


def _cpu_seconds() -> Optional[float]:
    try:
        import resource  # (Unix)
    except ImportError:
        return None
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _rate(count: int, timing: Timing) -> Measured:
    return Measured(count / max(timing.seconds, 1e-9), timing.cores)


def _timed(fn: Callable[[], object]) -> Timing:
    """``fn()`` timed, the GPU's queued work included."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    cpu = _cpu_seconds()
    start = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    after = _cpu_seconds()
    return Timing(seconds, None if cpu is None or after is None else (after - cpu) / max(seconds, 1e-9))


def decode_stages(clip: Clip) -> Dict[str, Measured]:
    """Input frames per second of decoding, in ffmpeg and into Python as the pipeline reads."""
    info = clip.info
    thumbnail(np.zeros((8, 8, 3), np.uint8))  # (OpenCV imported before the timing)
    decode = ["-i", str(clip.path), "-map", f"0:{info.stream}", "-fps_mode", "passthrough"]
    rows = {"decode": _rate(info.frames, _timed(lambda: _ffmpeg([*decode, "-f", "null", "-"]))),
            "decode + rgb24": _rate(info.frames, _timed(lambda: _ffmpeg([*decode, "-pix_fmt", "rgb24", "-f", "null",
                                                                         "-"])))}
    rows["read_frames"] = _rate(info.frames, _timed(lambda: sum(1 for _ in read_frames(info))))

    def with_thumbnails() -> None:
        previous = None
        for frame in read_frames(info):
            thumb = thumbnail(frame)
            if previous is not None:
                thumb_change(thumb, previous)
            previous = thumb

    rows["read_frames + thumbnails"] = _rate(info.frames, _timed(with_thumbnails))
    return rows


def ping_pong(frames: Sequence[np.ndarray], count: int) -> Iterator[np.ndarray]:
    """``count`` frames: ``frames`` forwards, then backwards, and so on (no jump where the clip ends)."""
    order = list(range(len(frames))) + list(range(len(frames) - 2, 0, -1)) or [0]
    for j in range(count):
        yield frames[order[j % len(order)]]


def _raw_into_ffmpeg(frames: Iterator[bytes], pix_fmt: str, size: Tuple[int, int], rate: Fraction,
                     out: Sequence[str]) -> int:
    """Raw frames of ``pix_fmt`` through a pipe into ffmpeg with output options ``out``; the frame count."""
    h, w = size
    proc = subprocess.Popen([ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-y", "-f", "rawvideo",
                             "-pix_fmt", pix_fmt, "-s", f"{w}x{h}", "-r", f"{rate.numerator}/{rate.denominator}",
                             "-i", "-", *out], stdin=subprocess.PIPE)
    count = 0
    for data in frames:
        proc.stdin.write(data)
        count += 1
    proc.stdin.close()
    if proc.wait() != 0:
        raise RuntimeError(f"ffmpeg {' '.join(out)} failed")
    return count


def encode_stages(clip: Clip, frames: List[np.ndarray], factor: int, presets: Sequence[str],
                  folder: Path) -> Tuple[Dict[str, Measured], Path]:
    """Output frames per second of the output's side (the pipe, the conversion, x264 at each preset) and of the mux
    with the audio copied; the x264 file of the first preset, for the mux."""
    info = clip.info
    size = (info.height, info.width)
    count = factor * len(frames)
    rate = info.rate * factor
    rows: Dict[str, Measured] = {}
    as_bytes = lambda: (f.reshape(-1).view(np.uint8) for f in ping_pong(frames, count))  # noqa: E731
    rows["rgb24 pipe alone"] = _rate(count, _timed(
        lambda: _raw_into_ffmpeg(as_bytes(), "rgb24", size, rate, ["-f", "null", "-"])))
    rows["rgb24 pipe + yuv420p"] = _rate(count, _timed(
        lambda: _raw_into_ffmpeg(as_bytes(), "rgb24", size, rate, ["-pix_fmt", "yuv420p", "-f", "null", "-"])))
    pix_fmt = output_pix_fmt("libx264", None, info.width, info.height, info.bit_depth > 8)
    layout = planar_layout(pix_fmt, info.width, info.height, info.color[0])
    # ffmpeg's own conversion of the RGB, as FrameWriter leaves it to ffmpeg where media.yuv does not convert
    scale = rgb_conversion_filter(info.color[0], pix_fmt)
    conversion = ["-vf", scale] if scale else ["-pix_fmt", pix_fmt]
    if layout is not None:  # FrameWriter's conversion, on this thread alone
        rows[f"{pix_fmt} conversion (one thread)"] = _rate(count, _timed(
            lambda: [rgb_to_yuv(f, layout) for f in ping_pong(frames, count)]))
    yuv = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-i", str(clip.path),
                          "-map", f"0:{info.stream}", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt",
                          "yuv420p", "-"], capture_output=True, check=True).stdout
    step = len(yuv) // info.frames
    yuv_frames = [np.frombuffer(yuv, np.uint8, step, k * step) for k in range(len(frames))]
    first = None
    for preset in presets:
        out = folder / f"{clip.path.stem}-{preset}.mp4"

        def encode() -> None:
            writer = FrameWriter(out, info.width, info.height, rate, info.bit_depth, "libx264", 18, pix_fmt, preset,
                                 info.sample_aspect, info.color)
            for frame in ping_pong(frames, count):
                writer.write(frame, copy=False)  # (as the pipeline writes: no copy)
            writer.close()

        rows[f"x264 {preset}"] = _rate(count, _timed(encode))
        # the encoder as FrameWriter fed it before issue 85: RGB through the pipe, converted to 4:2:0 in ffmpeg
        rows[f"x264 {preset}, rgb24 in"] = _rate(count, _timed(lambda: _raw_into_ffmpeg(
            as_bytes(), "rgb24", size, rate, [*conversion, "-c:v", "libx264", "-crf", "18", "-preset", preset,
                                              "-f", "mp4", str(folder / "rgb-in.mp4")])))
        rows[f"x264 {preset}, yuv420p in"] = _rate(count, _timed(lambda: _raw_into_ffmpeg(
            (f.data for f in ping_pong(yuv_frames, count)), "yuv420p", size, rate,
            ["-c:v", "libx264", "-crf", "18", "-preset", preset, "-f", "mp4", str(folder / "yuv-in.mp4")])))
        first = first or out
    muxed = folder / f"{clip.path.stem}-muxed.mp4"
    rows["mux, audio copied"] = _rate(count, _timed(lambda: concat_and_mux(
        [first], clip.path, muxed, with_audio=clip.info.has_audio, with_subtitles=False,
        durations=[Fraction(count) / rate])))
    return rows, first


def table_engine(weights: Path, device: str, precision: str = "auto", compile: bool = False) -> Interpolator:
    """The engine as run.py builds it for ``weights`` (engine.options.options_from_args): its defaults, and the flow
    scale the weights file states (its metadata: auto for the default network, 1 for the fast one), which the
    engine reads as run.py's does; with ``compile``, as run.py --compile builds it."""
    return Interpolator(InterpolatorOptions(weights=str(weights), device=device, precision=precision,
                                            compile=compile))


def engine_line(name: str, interpolator: Interpolator) -> str:
    """What the table's rows for network ``name`` ran: the weights, autocast, flow scale, CUDA graphs."""
    options = interpolator.options
    graphs = options.cuda_graphs and interpolator.device.type == "cuda"
    autocast = str(interpolator.autocast_dtype).replace("torch.", "") if interpolator.autocast_dtype else "none"
    return (f"network {name}: {Path(options.weights).name} on {interpolator.device}, autocast {autocast}, flow scale "
            f"{options.flow_scale}, CUDA graphs {'on' if graphs else 'off'}, "
            f"compile {'on' if options.compile else 'off'}")


def route(interpolator: Interpolator, frames: List[np.ndarray], stamps: Sequence[Fraction], rate: Fraction,
          factor: int) -> Tuple[int, int]:
    """The frames through the pipeline's schedule and ``interpolator`` as ``interpolate_video`` drives them, from
    memory, the output frames waited for by a write-behind thread and dropped; (output frames, interpolated)."""
    plan = make_plan(stamps[-1] + 1 / rate, rate, factor)
    stats: dict = {}
    behind: WriteBehind = WriteBehind(lambda made: frame_made(made[1]), depth=WRITE_DEPTH, name="bench-route")
    count = 0
    try:
        for made in stream_frames(iter(frames), stamps, plan, interpolator, VideoOptions(factor=factor), stats,
                                  later=True, before_pair=drain_after_slow_pairs(behind)):
            behind.put(made)
            count += 1
        behind.finish()
    except BaseException:
        behind.stop()
        raise
    return count, stats["interpolated"]


def network_stages(clip: Clip, frames: List[np.ndarray], factor: int, name: str,
                   interpolator: Interpolator) -> Dict[str, Measured]:
    """The network on the clip's decoded frames: through the pipeline's route (output frames per second, and ms per
    interpolated frame), and one pair alone, eager and (CUDA) replayed as graphs, in ms."""
    info = clip.info
    stamps = info.pts[:len(frames)]
    # warm-up: graphs captured, kernels built; compiled, the whole clip (a pair that takes another branch, such as
    # flow scale auto's half-scale flow on large motion, would compile inside the timed run)
    warm = len(frames) if interpolator.options.compile else 3
    route(interpolator, frames[:warm], stamps[:warm], info.rate, factor)
    made: List[Tuple[int, int]] = []
    timing = _timed(lambda: made.append(route(interpolator, frames, stamps, info.rate, factor)))
    count, interpolated = made[0]
    rows = {f"network {name}, route": _rate(count, timing),
            f"network {name}, route ms per frame": Measured(1000.0 * timing.seconds / max(1, interpolated))}
    device = interpolator.device
    a, b = (torch.from_numpy(f.copy()).to(device).permute(2, 0, 1)[None].float() / 255.0 for f in frames[:2])
    repeats = 20 if device.type == "cuda" else 2
    with torch.no_grad():
        rows[f"network {name}, eager pair ms"] = Measured(median_ms(lambda: interpolator(a, b, [0.5]), device,
                                                                     repeats))
        graphed = interpolator.cuda_graphs_for(info.height, info.width)
        if graphed is not None:
            rows[f"network {name}, graphs pair ms"] = Measured(median_ms(lambda: graphed(a, b, [0.5]), device,
                                                                          repeats))
    return rows


class CopyNearer:
    """Stands in for the network: the nearer input frame for each t. ``device`` is the engine's, so that the
    pipeline sizes its segments as it does for the engine (``pipeline.video.segment_frames``: a stand-in without one
    counts as a CPU, whose 1080p segments hold 6 frames)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device

    def __call__(self, one: np.ndarray, two: np.ndarray, times: Sequence[float]) -> List[np.ndarray]:
        return [one if t < 0.5 else two for t in times]


def pipeline_stages(clip: Clip, factor: int, presets: Sequence[str], engines: Dict[str, Interpolator],
                    device: torch.device, folder: Path) -> Dict[str, Measured]:
    """Output frames per second of ``interpolate_video`` with each engine and without a network, at each preset;
    and the seconds of its set-up (``plan_video``), which the rates include."""
    rows: Dict[str, Measured] = {}
    out = folder / f"{clip.path.stem}-out.mp4"
    rows["pipeline set-up s"] = Measured(_timed(lambda: plan_video(clip.path, out, VideoOptions(factor=factor)))
                                         .seconds)
    copy = CopyNearer(device)
    runs = [(f"{name} {preset}", step, VideoOptions(factor=factor, preset=preset))
            for preset in presets for name, step in [*engines.items(), ("copy", copy)]]
    # the output in one segment: what closing a segment and opening the next costs
    runs.append((f"copy {presets[0]}, one segment", copy,
                 VideoOptions(factor=factor, preset=presets[0], segment_seconds=1e9, segment_work_seconds=1e9)))
    for name, step, options in runs:
        stats: dict = {}
        timing = _timed(lambda: stats.update(interpolate_video(clip.path, out, step, options, progress=False)))
        if clip.info.has_audio and stats.get("audio") != "copied":
            raise RuntimeError(f"{clip.path}: the pipeline's audio is {stats.get('audio')!r}, not copied")
        rows[f"pipeline {name}"] = _rate(stats["frames_out"], timing)
        out.unlink()
    return rows


def _network_name(weights: Path) -> str:
    return {"network": "default"}.get(weights.stem, weights.stem)


def stage_table(args: argparse.Namespace, weights: Sequence[Path], presets: Sequence[str]) -> Tuple[List[str],
                                                                                                    List[dict]]:
    """Every stage on every clip of ``args.clips``: what ran (the machine, the engines) and one JSON line per clip
    and stage, printed as each group of stages is measured (a run cut short keeps those), then the table, a column
    per clip. Returns the notes and the rows (clip, stage, value, ...)."""
    size = parse_size(args.size)
    rows: List[dict] = []
    run_opencv_on_callers_threads()  # every stage as the pipeline runs its jobs
    device = resolve_device(args.device)
    engines = {_network_name(w): table_engine(w, str(device), args.precision) for w in weights}
    if args.compiled:  # beside each network, the same compiled (its first pair compiles, in the route's warm-up)
        engines.update({f"{_network_name(w)} compiled": table_engine(w, str(device), args.precision, compile=True)
                        for w in weights})
    notes = [f"machine: {os.cpu_count()} CPU cores, {device}"
             + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""),
             *(engine_line(name, interpolator) for name, interpolator in engines.items())]
    print("\n".join(notes), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        clips = [make_clip(spec, folder, size, args.frames) for spec in args.clips]
        for clip in clips:
            frames = list(read_frames(clip.info))
            groups: List[Callable[[], Dict[str, Measured]]] = [
                lambda: decode_stages(clip), lambda: encode_stages(clip, frames, args.factor, presets, folder)[0],
                *(functools.partial(network_stages, clip, frames, args.factor, name, interpolator)
                  for name, interpolator in engines.items()),
                lambda: pipeline_stages(clip, args.factor, presets, engines, device, folder)]
            for group in groups:
                for stage, measured in group().items():
                    row = {"clip": clip.name, "made": clip.made, "size": f"{clip.info.width}x{clip.info.height}",
                           "frames_in": clip.info.frames, "factor": args.factor, "device": str(device),
                           "stage": stage, "unit": _unit(stage), "value": round(measured.value, 3),
                           "cores": None if measured.cores is None else round(measured.cores, 2)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    print(format_table(rows, clips))
    return notes, rows


def _unit(stage: str) -> str:
    if stage.endswith(" s"):
        return "s"
    if stage.endswith(" ms") or stage.endswith("ms per frame"):
        return "ms"
    return "in fps" if stage.startswith(("decode", "read_frames")) else "out fps"


def _cell(row: dict) -> str:
    """A value, with the cores busy for it where measured (a rate's)."""
    text = f"{row['value']:.{2 if row['unit'] == 's' else 1}f}"
    return text if row["cores"] is None or row["unit"] == "s" else f"{text} ({row['cores']:.1f} cores)"


def format_table(rows: Sequence[dict], clips: Sequence[Clip]) -> str:
    """The rows as a Markdown table: a row per stage, a column per clip, each clip's making said above it."""
    names = [clip.name for clip in clips]
    values = {(row["clip"], row["stage"]): row for row in rows}
    stages = list(dict.fromkeys(row["stage"] for row in rows))
    lines = [f"{clip.name}: {clip.made}, {clip.info.frames} frames, audio {'yes' if clip.info.has_audio else 'no'}"
             for clip in clips]
    lines += ["", "| stage | unit | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for stage in stages:
        cells = [_cell(values[(n, stage)]) if (n, stage) in values else "-" for n in names]
        lines.append(f"| {stage} | {_unit(stage)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def stage_rows(video: Path, info: VideoInfo, device: torch.device, options: VideoOptions) -> dict:
    """--video --stages: decoding alone, and the pipeline with the copying stand-in on the engine's ``device``, so
    that its segments are those the engine's pipeline makes (a stand-in without a device gets a CPU's, 6 frames at
    1080p, and the row timed their closing)."""
    start = time.perf_counter()
    decoded = sum(1 for _ in read_frames(info))
    decode_fps = round(decoded / (time.perf_counter() - start), 1)
    seconds, frames_out, _ = time_pipeline(video, CopyNearer(device), options)
    return {"video": video.name, "decode_fps": decode_fps,
            "pipeline_without_network_fps": round(frames_out / seconds, 1)}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=(
        "This protocol's defaults: --weights the default and the fast network (the rows without --clips take the "
        "first); --factor 2; --preset medium for the rows without --clips (they take the first given), veryfast "
        "and medium for --clips (each given); for the rows without --clips --flow-scale 1, --tile 0 and float32 "
        "unless --fp16 or --bf16 (their --flow-scale, --tile, --ensemble and --eager are theirs alone: --clips runs "
        "each network at run.py's defaults, the weights file's flow scale)."))
    p.add_argument("--video", type=Path, help="input clip for the pipeline and model timings")
    # run.py's engine and video flags from their one declaration, at this protocol's defaults (the epilog says them)
    add_flags(p, options=VideoOptions, only=("factor",), defaults={"factor": 2})
    add_flags(p, only=("weights", "device", "precision", "flow_scale", "tile", "ensemble", "cuda_graphs"),
              several=("weights", "flow_scale", "ensemble"),
              defaults={"weights": [DEFAULT_WEIGHTS, FAST_WEIGHTS], "flow_scale": [1.0], "tile": 0})
    p.add_argument("--no-network", action="store_true",
                   help="--clips: no network rows, the pipeline with the copying stand-in only")
    p.add_argument("--memory", nargs="*", default=[], help="sizes WxH: peak GPU memory of one pair each")
    # several presets and motions: a row each, in order (no --preset: the epilog's defaults)
    add_flags(p, options=VideoOptions, only=("preset", "motion"), several=("preset", "motion"),
              defaults={"preset": None})
    p.add_argument("--stages", action="store_true", help="also time decoding alone and the pipeline without "
                   "the network")
    p.add_argument("--clips", nargs="+", default=[], metavar="CLIP",
                   help="the stage table: 'synthetic' (testsrc2 with a tone) and/or natural clips' paths, a column "
                        "each (the module's docstring lists the stages)")
    p.add_argument("--compiled", action="store_true",
                   help="--clips: also each network as run.py --compile runs it (rows 'N compiled'; each compiles "
                        "in its route's untimed warm-up, a run of the whole clip)")
    p.add_argument("--size", default="1920x1080", help="--clips: the clips' frame size WxH")
    p.add_argument("--frames", type=int, default=480, help="--clips: input frames per clip")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    show_notes()
    if args.clips:
        if args.frames < 3:
            p.error("--frames must be at least 3 (the route's warm-up takes three)")
        try:
            device = device_for(args)
            if args.compiled:
                check_compile(resolve_device(device))
        except ValueError as exc:
            p.error(str(exc))
        weights = [] if args.no_network else args.weights
        missing = [str(w) for w in weights if not w.is_file()]
        if missing:
            p.error(f"--weights {' '.join(missing)}: no such file")
        notes, rows = stage_table(args, weights, args.preset or ["veryfast", "medium"])
        if args.json is not None:
            args.json.write_text(json.dumps({"notes": notes, "rows": rows}, indent=1) + "\n")
        return 0
    args.weights = args.weights[0]
    args.preset = (args.preset or ["medium"])[0]
    device = require_cuda()
    if device is None:
        return 2
    net = load_weights(args.weights, device) if args.weights.is_file() else Network().to(device).eval()
    rows = []
    if args.video is not None:
        info = probe(args.video)
        frames = read_frames(info)
        one, two = next(frames), next(frames)
        frames.close()
        for flow_scale in args.flow_scale:
            for passes in args.ensemble:
                rows += time_video(args, net, device, info, one, two, passes, flow_scale)
        if args.stages:
            row = stage_rows(args.video, info, device, video_options_from_args(args, leave=("motion",)))
            rows.append(row)
            print(json.dumps(row), flush=True)
    interpolator = engine_for(args, net, 1, args.flow_scale[0]) if args.memory else None
    for size in args.memory:
        h, w = parse_size(size)
        rng = np.random.default_rng(0)
        one = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        two = np.roll(one, 7, axis=1)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        out = interpolator.interpolate_integer(one, two, [0.5])[0]
        torch.cuda.synchronize()
        row = {"size": size, "flow_scale": args.flow_scale[0], "tile": args.tile,
               "bf16": rows_precision(args) == "bf16", "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
               "seconds": round(time.perf_counter() - start, 2), "out_shape": list(out.shape)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
