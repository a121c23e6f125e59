"""Session 52: the engine's frames per second with precision "auto" (the default since this session) against
"fp32", as the video tool runs them (uint8 frames in and out, CUDA graphs, quadratic paths through a stream).

    PYTHONPATH=. python3 docs/journal/raw/probe_s52_precision.py IMAGE OUT.json

IMAGE is any photo (here a Middlebury frame, evaluation data, used only as texture to pan over): a 25-frame pan
(6 px right and 3 px down per frame, plus a 0.4% zoom per frame) is cut from it at 1080p and 4K, and each network
runs through it twice per precision, alternating, after one warm-up pass (graph capture).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import List

import cv2
import numpy as np
import torch

from engine import Interpolator, InterpolatorOptions


def pan(image: np.ndarray, width: int, height: int, frames: int = 25) -> List[np.ndarray]:
    big = cv2.resize(image, (int(width * 1.4), int(height * 1.4)), interpolation=cv2.INTER_CUBIC)
    out = []
    for i in range(frames):
        zoom = 1.0 + 0.004 * i
        m = np.array([[zoom, 0, -6.0 * i], [0, zoom, -3.0 * i]], dtype=np.float32)
        out.append(np.ascontiguousarray(cv2.warpAffine(big, m, (width, height), flags=cv2.INTER_CUBIC,
                                                       borderMode=cv2.BORDER_REFLECT)))
    return out


def run_stream(interp: Interpolator, frames: List[np.ndarray]) -> List[float]:
    """Seconds per pair along quadratic paths (each pair with the frame before and after it where they exist)."""
    seconds = []
    for i in range(len(frames) - 1):
        before = (frames[i - 1], 1.0) if i > 0 else None
        after = (frames[i + 2], 1.0) if i + 2 < len(frames) else None
        start = time.perf_counter()
        interp.interpolate_integer_with_neighbours(frames[i], frames[i + 1], [0.5], before, after)
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> int:
    image = cv2.cvtColor(cv2.imread(sys.argv[1]), cv2.COLOR_BGR2RGB)
    out_path = Path(sys.argv[2])
    rows = []
    for weights in ("network", "fast"):
        for width, height in ((1920, 1080), (3840, 2160)):
            frames = pan(image, width, height)
            results = {"fp32": [], "auto": []}
            outputs = {}
            for precision in ("fp32", "auto", "fp32", "auto"):
                interp = Interpolator(InterpolatorOptions(weights=Path(f"weights/{weights}.safetensors"),
                                                          device="cuda", precision=precision, flow_scale=1.0))
                run_stream(interp, [f.copy() for f in frames[:5]])  # warm-up: cuDNN, graph capture
                seconds = run_stream(interp, frames)
                results[precision].append(1000 * statistics.median(seconds))
                outputs[precision] = interp.interpolate_integer(frames[10], frames[11], [0.5])[0]
                resolved = str(interp.autocast_dtype)
                print(weights, f"{width}x{height}", precision, resolved, f"{results[precision][-1]:.1f} ms/pair",
                      flush=True)
            diff = outputs["fp32"].astype(np.float64) - outputs["auto"].astype(np.float64)
            mse = float(np.mean(diff ** 2))
            rows.append({"weights": weights, "size": f"{width}x{height}", "gpu": torch.cuda.get_device_name(),
                         "auto_dtype": resolved, "fp32_ms_per_pair": results["fp32"],
                         "auto_ms_per_pair": results["auto"],
                         "fp32_vs_auto_psnr_db": 10 * np.log10(255.0 ** 2 / mse) if mse else float("inf"),
                         "fp32_vs_auto_max_abs": float(np.abs(diff).max())})
            print(json.dumps(rows[-1]), flush=True)
    out_path.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
