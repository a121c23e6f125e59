"""Session 52, rule C: ``model.runtime.compile_network`` (the convolution stacks compiled, the engine's own CUDA
graphs along quadratic paths) against the plain network, and where it is not 0.9x as fast, against the whole
network compiled in reduce-overhead mode (the old ``--compile``, constant velocity); one GPU, 1080p, bf16.

    PYTHONPATH=. python3 docs/journal/raw/probe_s52_rule_c.py IMAGE OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from docs.journal.raw.probe_s52_precision import pan, run_stream
from engine import Interpolator, InterpolatorOptions
from model.runtime import compile_network
from model.weights import load_weights


def timed(net: torch.nn.Module, frames: list, row: dict, name: str) -> np.ndarray:
    interp = Interpolator(InterpolatorOptions(device="cuda", precision="bf16", flow_scale=1.0), network=net)
    start = time.perf_counter()
    run_stream(interp, [f.copy() for f in frames[:5]])
    row.setdefault(f"{name}_warmup_s", []).append(time.perf_counter() - start)
    row.setdefault(f"{name}_ms_per_pair", []).append(1000 * statistics.median(run_stream(interp, frames)))
    print(name, row[f"{name}_ms_per_pair"][-1], flush=True)
    return interp.interpolate_integer_with_neighbours(frames[10], frames[11], [0.5], (frames[9], 1.0),
                                                      (frames[12], 1.0))[0]


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(255.0 ** 2 / mse) if mse else float("inf")


def main() -> int:
    image = cv2.cvtColor(cv2.imread(sys.argv[1]), cv2.COLOR_BGR2RGB)
    frames = pan(image, 1920, 1080)
    rows = []
    for weights in ("network", "fast"):
        plain = load_weights(f"weights/{weights}.safetensors", torch.device("cuda")).eval()
        nets = {"plain": plain, "stacks": compile_network(plain)}
        row = {"weights": weights, "size": "1920x1080", "gpu": torch.cuda.get_device_name()}
        out = {}
        for name in ("plain", "stacks", "plain", "stacks"):
            out[name] = timed(nets[name], frames, row, name)
        row["stacks_vs_plain_psnr_db"] = psnr(out["plain"], out["stacks"])
        row["ratio_stacks_plain"] = statistics.median(row["stacks_ms_per_pair"]) / statistics.median(
            row["plain_ms_per_pair"])
        if row["ratio_stacks_plain"] > 0.9:
            whole = torch.compile(plain, mode="reduce-overhead", dynamic=False)
            for name in ("whole", "whole"):
                timed(whole, frames, row, name)
            row["ratio_stacks_whole"] = statistics.median(row["stacks_ms_per_pair"]) / statistics.median(
                row["whole_ms_per_pair"])
        rows.append(row)
        print(json.dumps(row), flush=True)
    Path(sys.argv[2]).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
