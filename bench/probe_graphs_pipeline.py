"""Video pipeline output frames/s at x2 with the network run eagerly or replayed as CUDA graphs, and frames
uploaded through pinned or pageable memory, at two x264 presets, twice.

    python -m bench.probe_graphs_pipeline --video in1080.mp4  # a CUDA machine with ffmpeg (scripts/device/ffmpeg.sh)

Session 12 (H200, docs/journal/performance-history.md): pinning each frame as it was uploaded
(``Tensor.pin_memory()``, a new page-locked buffer every frame) cost more than the graphs gained: with one or
two graphs the pipeline ran at 32-37 frames/s with pinned uploads against 39-54 with plain pageable copies.
``model.inference`` now uploads pageable frames; this probe keeps the old pinned step as a baseline beside the
eager and graphed steps that run.py can take. 8-bit input only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import torch


from bench.bench_video import time_pipeline
from bench.timing import require_cuda
from engine import Interpolator, InterpolatorOptions
from model import load_weights
from model.runtime import GraphedNetwork
from pipeline.video import VideoOptions


def download(out: torch.Tensor) -> np.ndarray:
    """A 1 x 3 x H x W tensor in [0, 1] as an H x W x 3 uint8 array, rounded on the GPU (as the engine does)."""
    return (out[0] * 255.0).round_().permute(1, 2, 0).to(torch.uint8).cpu().numpy()


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--video", type=Path, required=True)
    p.add_argument("--weights", type=Path, default=Path("weights/network.safetensors"))
    args = p.parse_args(argv)
    device = require_cuda()
    if device is None:
        return 2
    torch.backends.cudnn.benchmark = True
    net = load_weights(args.weights, device)

    def pageable(x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(x).to(device).permute(2, 0, 1).unsqueeze(0).float() / 255.0

    def pinned(x: np.ndarray) -> torch.Tensor:  # session 11's upload: a new page-locked buffer every frame
        return torch.from_numpy(x).pin_memory().to(device, non_blocking=True).permute(2, 0, 1).unsqueeze(0) / 255.0

    def eager_pinned(one: np.ndarray, two: np.ndarray, ts: Sequence[float]) -> List[np.ndarray]:
        with torch.no_grad():  # the network itself, as session 11 ran it (no input checks)
            return [download(o.float().clamp(0.0, 1.0)) for o in net(pinned(one), pinned(two), list(ts))]

    def one_graph(one: np.ndarray, two: np.ndarray, ts: Sequence[float]) -> List[np.ndarray]:
        a, b = pageable(one), pageable(two)
        key = (tuple(a.shape), tuple(ts))
        if key not in graphs:
            graphs[key] = GraphedNetwork(net, a.shape, ts)
        return [download(o.clamp(0.0, 1.0)) for o in graphs[key](a, b)]

    graphs = {}
    steps = {"eager, pinned (s11)": eager_pinned,
             "eager": Interpolator(InterpolatorOptions(tile=0, cuda_graphs=False), network=net),
             "one graph": one_graph,
             # run.py's default: the flow and the synthesis replayed as two graphs (model.runtime.GraphedPairs)
             "two graphs (run.py)": Interpolator(InterpolatorOptions(tile=0), network=net)}
    for _ in range(2):
        for preset in ("medium", "veryfast"):
            for name, step in steps.items():
                seconds, frames, stats = time_pipeline(args.video, step, VideoOptions(factor=2, preset=preset))
                print(f"{preset:9s} {name:22s} {frames / seconds:6.1f} output frames/s ({seconds:.2f} s, "
                      f"{stats['interpolated']} interpolated)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
