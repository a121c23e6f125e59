"""Session 11's probe, widened for the next call: video pipeline output frames/s at x2 with the network run
eagerly (as run.py does) against four graphed steps, one CUDA graph for the whole pair (``GraphedNetwork``, times
fixed at the first pair's) or two (``GraphedPairs``: flow per pair, synthesis per t), each with frames uploaded by a
plain pageable copy or through pinned memory (``model.inference``'s upload), at two x264 presets, twice.

    python bench/probe_graphs_pipeline.py --video in1080.mp4   # on a CUDA machine with ffmpeg (bench/device_ffmpeg.sh)

In session 11 the one-graph pageable step reached 48-52 frames/s against 34 eager on one H200, while
``bench_video.py --cuda-graphs`` (two graphs, pinned) gained 2-4% on the next: this run tells which part matters.
8-bit input only.
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
from model.inference import _download_integer, _upload_integer, interpolate_integer  # noqa: E402
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

    def pinned(x: np.ndarray) -> torch.Tensor:
        return _upload_integer(x, device, 255.0)

    def graphed_step(kind: str, upload):
        graphs = {}

        def step(one: np.ndarray, two: np.ndarray, ts) -> List[np.ndarray]:
            a, b = upload(one), upload(two)
            if kind == "one graph":
                key = (tuple(a.shape), tuple(ts))
                if key not in graphs:
                    graphs[key] = GraphedNetwork(net, a.shape, ts)
                outs = graphs[key](a, b)
            else:
                if a.shape not in graphs:
                    graphs[a.shape] = GraphedPairs(net, a.shape)
                outs = graphs[a.shape](a, b, ts)
            return [_download_integer(o.clamp(0.0, 1.0), np.uint8, 255.0) for o in outs]
        return step

    steps = {"eager": lambda one, two, ts: interpolate_integer(net, one, two, ts)}
    for kind in ("one graph", "two graphs"):
        for name, upload in (("pageable", pageable), ("pinned", pinned)):
            steps[f"{kind}, {name}"] = graphed_step(kind, upload)
    for _ in range(2):
        for preset in ("medium", "veryfast"):
            for name, step in steps.items():
                seconds, frames, stats = _pipeline(args.video, step, VideoOptions(factor=2, preset=preset))
                print(f"{preset:9s} {name:22s} {frames / seconds:6.1f} output frames/s ({seconds:.2f} s, "
                      f"{stats['interpolated']} interpolated)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
