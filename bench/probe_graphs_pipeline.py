"""Video pipeline output frames/s at x2 with the network run eagerly or replayed as CUDA graphs, and frames
uploaded through pinned or pageable memory, at two x264 presets, twice.

    python bench/probe_graphs_pipeline.py --video in1080.mp4   # on a CUDA machine with ffmpeg (bench/device_ffmpeg.sh)

Session 12 (H200, docs/performance.md): pinning each frame as it was uploaded (``Tensor.pin_memory()``, a new
page-locked buffer every frame) cost more than the graphs gained: with one or two graphs the pipeline ran at
33-37 frames/s with pinned uploads against 45-54 with plain pageable copies. ``model.inference`` now uploads
pageable frames; this probe keeps the old pinned step as a baseline beside the eager and graphed steps that run.py
can take. 8-bit input only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_video import _pipeline  # noqa: E402
from bench.timing import require_cuda  # noqa: E402
from model import load_weights  # noqa: E402
from model.inference import _download_integer, _run, interpolate_integer  # noqa: E402
from model.runtime import GraphedNetwork, GraphedPairs  # noqa: E402
from pipeline.video import VideoOptions  # noqa: E402


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

    def eager_pinned(one: np.ndarray, two: np.ndarray, ts) -> List[np.ndarray]:
        outs = _run(net, pinned(one), pinned(two), ts, None, 1.0, 0, 128)
        return [_download_integer(o, np.uint8, 255.0) for o in outs]

    def one_graph(one: np.ndarray, two: np.ndarray, ts) -> List[np.ndarray]:
        a, b = pageable(one), pageable(two)
        key = (tuple(a.shape), tuple(ts))
        if key not in graphs:
            graphs[key] = GraphedNetwork(net, a.shape, ts)
        return [_download_integer(o.clamp(0.0, 1.0), np.uint8, 255.0) for o in graphs[key](a, b)]

    def two_graphs(one: np.ndarray, two: np.ndarray, ts) -> List[np.ndarray]:  # as run.py --cuda-graphs
        shape = (1, 3, *one.shape[:2])
        if shape not in graphs:
            graphs[shape] = GraphedPairs(net, shape)
        return interpolate_integer(net, one, two, ts, graphed=graphs[shape])

    graphs = {}
    steps = {"eager, pinned (s11)": eager_pinned,
             "eager": lambda one, two, ts: interpolate_integer(net, one, two, ts),
             "one graph": one_graph,
             "two graphs (run.py)": two_graphs}
    for _ in range(2):
        for preset in ("medium", "veryfast"):
            for name, step in steps.items():
                seconds, frames, stats = _pipeline(args.video, step, VideoOptions(factor=2, preset=preset))
                print(f"{preset:9s} {name:22s} {frames / seconds:6.1f} output frames/s ({seconds:.2f} s, "
                      f"{stats['interpolated']} interpolated)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
