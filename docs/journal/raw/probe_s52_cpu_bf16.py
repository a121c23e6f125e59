"""Session 52, rule P (a): seconds per pair on the CPU, fp32 against bf16 autocast, both networks, at 960x540 and
1280x720 (a Middlebury pair resized as texture), warm, three alternating runs each, through engine.Interpolator.

    PYTHONPATH=. python docs/journal/raw/probe_s52_cpu_bf16.py MIDDLEBURY_DIR OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np

from engine import Interpolator, InterpolatorOptions


def main() -> int:
    folder = Path(sys.argv[1]) / "Beanbags"
    rows = []
    for weights in ("network", "fast"):
        for size in ((960, 540), (1280, 720)):
            a, b = (cv2.resize(cv2.imread(str(folder / f"frame1{i}.png")), size)[..., ::-1].astype(np.float32) / 255
                    for i in (0, 1))
            interps = {p: Interpolator(InterpolatorOptions(device="cpu", precision=p,
                                                           weights=Path(f"weights/{weights}.safetensors")))
                       for p in ("fp32", "bf16")}
            for interp in interps.values():
                interp(a, b, [0.5])
            times = {"fp32": [], "bf16": []}
            for _ in range(3):
                for precision, interp in interps.items():
                    start = time.perf_counter()
                    interp(a, b, [0.5])
                    times[precision].append(time.perf_counter() - start)
            row = {"weights": weights, "size": f"{size[0]}x{size[1]}", **{f"{k}_s": v for k, v in times.items()},
                   "bf16_over_fp32": statistics.median(times["bf16"]) / statistics.median(times["fp32"])}
            rows.append(row)
            print(json.dumps(row), flush=True)
    Path(sys.argv[2]).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
