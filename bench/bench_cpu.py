"""Time one interpolated frame on the CPU, warm, through ``engine.Interpolator`` (what run.py runs):

    python -m bench.bench_cpu --weights weights/network.safetensors weights/fast.safetensors --threads 2

Per weights file and size: the median and the fastest of ``--repeats`` calls after one warm-up call, on a random
frame and the same frame shifted 7 px (the time does not depend on the content).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import List, Optional

import numpy as np
import torch

from bench.bench_network import SIZES as GPU_SIZES
from softsplat_vfi.engine.options import DEFAULT_WEIGHTS, add_flags, show_notes

SIZES = {"540p": (540, 960), **GPU_SIZES}  # the GPU benchmark's sizes, and 960x540 for the CPU


def time_pair(weights: Path, height: int, width: int, repeats: int) -> List[float]:
    """Seconds per call of one warm interpolator on a ``height`` x ``width`` pair, ``repeats`` times."""
    from softsplat_vfi.engine import Interpolator, InterpolatorOptions

    interp = Interpolator(InterpolatorOptions(weights=weights, device="cpu"))
    one = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)
    two = np.roll(one, 7, axis=1)
    interp(one, two)  # warm-up: allocations, thread pools
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        interp(one, two)
        times.append(time.perf_counter() - start)
    return times


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(p, only=("weights",), several=("weights",), defaults={"weights": [DEFAULT_WEIGHTS]})
    p.add_argument("--sizes", nargs="+", choices=list(SIZES), default=["540p", "720p"])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    args = p.parse_args(argv)
    show_notes()  # the library's notes on stderr while this tool runs
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    for weights in args.weights:
        for size in args.sizes:
            times = time_pair(weights, *SIZES[size], args.repeats)
            print(f"{weights} {size}: median {statistics.median(times):.2f} s, fastest {min(times):.2f} s "
                  f"({args.repeats} calls, {torch.get_num_threads()} threads)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
