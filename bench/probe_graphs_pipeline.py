"""Session 11's probe: video pipeline output frames/s with the eager network against the network replayed as one
CUDA graph (``model.runtime.GraphedNetwork``, times fixed at the first pair's), at x2, two x264 presets, twice.

    python bench/probe_graphs_pipeline.py --video in1080.mp4   # on a CUDA machine with ffmpeg (bench/device_ffmpeg.sh)

Unlike ``bench_video.py --cuda-graphs`` (``GraphedPairs``, through ``model.inference.interpolate_integer``), the
graphed step here uploads frames with a plain pageable copy and quantises its output itself; the two measured
differently on two H200 machines (docs/performance.md), which is what this script is kept to settle.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_video import _pipeline  # noqa: E402
from bench.timing import require_cuda  # noqa: E402
from model import load_weights  # noqa: E402
from model.inference import interpolate_integer  # noqa: E402
from model.runtime import GraphedNetwork  # noqa: E402
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
    graphs = {}

    def graphed(one, two, ts):
        a = torch.from_numpy(one).to(device).permute(2, 0, 1).unsqueeze(0).float() / 255.0
        b = torch.from_numpy(two).to(device).permute(2, 0, 1).unsqueeze(0).float() / 255.0
        key = (tuple(a.shape), tuple(ts))
        if key not in graphs:
            graphs[key] = GraphedNetwork(net, a.shape, ts)
        return [(o[0] * 255).round_().clamp_(0, 255).permute(1, 2, 0).to(torch.uint8).cpu().numpy()
                for o in graphs[key](a, b)]

    def eager(one, two, ts):
        return interpolate_integer(net, one, two, ts)

    for _ in range(2):
        for preset in ("medium", "veryfast"):
            for name, step in (("eager", eager), ("graph", graphed)):
                seconds, frames, stats = _pipeline(args.video, step, VideoOptions(factor=2, preset=preset))
                print(f"{preset:9s} {name:6s} {frames / seconds:6.1f} output frames/s ({seconds:.2f} s, "
                      f"{stats['interpolated']} interpolated)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
