"""Video throughput on the GPU: the whole pipeline (decode, interpolate, encode, mux) and the model alone.

    python -m bench.bench_video --video in.mp4 [--factor 2] [--bf16] [--eager] [--preset veryfast]
        [--motion quadratic linear] [--ensemble 1 2 4] [--flow-scale 1 auto] [--stages] [--json out.json]
    python -m bench.bench_video --memory 3840x2160 7680x4320 [--flow-scale 0.5] [--tile 2048]

Pipeline frames per second count output frames (a x2 job writes two per input frame)
over the wall-clock time of ``pipeline.video.interpolate_video`` after a warm-up pair.
The model alone is one interpolated frame per call on frames already in GPU memory.
``--motion`` times the pipeline once per motion named (run.py --motion), ``--ensemble`` once per number of
passes named (run.py --ensemble) and ``--flow-scale`` once per flow scale named (run.py --flow-scale), in one
process, side by side.
``--stages`` adds where the pipeline's time goes: decoding alone (input frames per second, as the
pipeline reads them) and the pipeline with an interpolator that copies the nearer input frame
(decode, encode and mux without the network), in the same output frames per second.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Tuple

import numpy as np
import torch

from bench.timing import cuda_time_ms, require_cuda
from engine import Interpolator, InterpolatorOptions
from engine.options import flow_scale_value
from media.video import VideoInfo, probe, read_frames
from model import Network, load_weights
from model.ensemble import PASSES
from model.network import FlowScale
from pipeline.video import Interpolator as PipelineInterpolator
from pipeline.video import MOTIONS, VideoOptions, interpolate_video


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


def engine_for(args: argparse.Namespace, net: Network, passes: int, flow_scale: FlowScale) -> Interpolator:
    """The engine run.py uses, with its CUDA graphs unless --eager (an ensemble runs eagerly)."""
    return Interpolator(InterpolatorOptions(precision="bf16" if args.bf16 else "fp32", flow_scale=flow_scale,
                                            tile=args.tile, cuda_graphs=not args.eager, ensemble=passes),
                        network=net)


def time_video(args: argparse.Namespace, net: Network, device: torch.device, info: VideoInfo, one: np.ndarray,
               two: np.ndarray, passes: int, flow_scale: FlowScale) -> List[dict]:
    """One row per motion of ``args.motion``: the pipeline's frames per second with ``passes`` per frame and flow at
    ``flow_scale``, beside the model alone (one interpolated frame per call, eager)."""
    interpolator = engine_for(args, net, passes, flow_scale)
    # warm-up (and the capture of the graphs each motion timed replays)
    interpolator.interpolate_integer(one, two, [0.5])
    if "quadratic" in args.motion:
        interpolator.interpolate_integer_with_neighbours(one, two, [0.5], None, None)
    a = torch.from_numpy(one.copy()).to(device).permute(2, 0, 1)[None].float() / 255.0
    b = torch.from_numpy(two.copy()).to(device).permute(2, 0, 1)[None].float() / 255.0
    model_ms = cuda_time_ms(lambda: interpolator(a, b, [0.5]), repeats=20)
    graphed = interpolator.cuda_graphs_for(info.height, info.width)
    rows = []
    for motion in args.motion:
        options = VideoOptions(factor=args.factor, preset=args.preset, motion=motion)
        seconds, frames_out, stats = time_pipeline(args.video, interpolator, options)
        row = {"video": args.video.name, "size": f"{info.width}x{info.height}", "frames_in": info.frames,
               "frames_out": frames_out, "factor": args.factor, "bf16": args.bf16, "preset": args.preset,
               "motion": motion, "ensemble": passes, "flow_scale": flow_scale,
               "network_in_pipeline": "eager" if graphed is None else "CUDA graphs",
               "pipeline_seconds": round(seconds, 2), "pipeline_fps": round(frames_out / seconds, 1),
               "model_ms_per_frame": round(model_ms, 2), "model_fps": round(1000.0 / model_ms, 1),
               "interpolated": stats["interpolated"], "audio": stats["audio"]}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--video", type=Path, help="input clip for the pipeline and model timings")
    p.add_argument("--factor", type=int, default=2)
    p.add_argument("--weights", type=Path, default=Path("weights/network.safetensors"))
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast, as run.py --bf16")
    p.add_argument("--flow-scale", type=flow_scale_value, nargs="+", default=[1.0],
                   help="flow scales to time (run.py --flow-scale: a factor or auto), each beside the others; "
                        "--memory takes the first")
    p.add_argument("--tile", type=int, default=0)
    p.add_argument("--memory", nargs="*", default=[], help="sizes WxH: peak GPU memory of one pair each")
    p.add_argument("--preset", default="medium", help="x264/x265 preset of the pipeline's encoder")
    p.add_argument("--eager", action="store_true", help="run the network in the pipeline op by op, as run.py "
                   "--eager, instead of replaying it as CUDA graphs (model.runtime.GraphedPairs; whole frames) as "
                   "run.py does by default; the model-alone figure is eager either way")
    p.add_argument("--motion", nargs="+", default=["quadratic"], choices=MOTIONS,
                   help="the pipeline's paths between frames (run.py --motion); several: one row each, in order")
    p.add_argument("--ensemble", type=int, nargs="+", default=[1], choices=PASSES,
                   help="passes per frame to time (run.py --ensemble), each beside the others")
    p.add_argument("--stages", action="store_true", help="also time decoding alone and the pipeline without "
                   "the network")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    device = require_cuda()
    if device is None:
        return 2
    torch.backends.cudnn.benchmark = True
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
            start = time.perf_counter()
            decoded = sum(1 for _ in read_frames(info))
            decode_fps = round(decoded / (time.perf_counter() - start), 1)
            copy = lambda x, y, ts: [(x if t < 0.5 else y).copy() for t in ts]  # noqa: E731
            seconds, frames_out, _ = time_pipeline(args.video, copy, VideoOptions(factor=args.factor,
                                                                                  preset=args.preset))
            row = {"video": args.video.name, "decode_fps": decode_fps,
                   "pipeline_without_network_fps": round(frames_out / seconds, 1)}
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
        row = {"size": size, "flow_scale": args.flow_scale[0], "tile": args.tile, "bf16": args.bf16,
               "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2),
               "seconds": round(time.perf_counter() - start, 2), "out_shape": list(out.shape)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
