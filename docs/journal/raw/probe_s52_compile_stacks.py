"""Session 52: the default network with only its convolution stacks under ``torch.compile`` (Inductor's fusion of
bias, activation and layout; no CUDA graphs of its own), so that the engine still replays it with its own CUDA
graphs along quadratic paths, against the plain network, side by side on one GPU as videos run (uint8 frames,
quadratic paths through a pan, precision bf16), with the compile time and the frames' difference.

    PYTHONPATH=. python3 docs/journal/raw/probe_s52_compile_stacks.py IMAGE OUT.json [WEIGHTS]
"""

from __future__ import annotations

import copy
import json
import statistics
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

from docs.journal.raw.probe_s52_precision import pan, run_stream
from engine import Interpolator, InterpolatorOptions
from model.weights import load_weights


def compile_stacks(net: nn.Module) -> nn.Module:
    """Every nn.Sequential that holds convolutions directly below a Network part, compiled in place."""
    parts = [net.encoder.levels, net.flow.decoders, net.decoder.blocks]
    for part in parts:
        for i, module in enumerate(part):
            target = module.net if hasattr(module, "net") else module
            compiled = torch.compile(target, dynamic=False)
            if hasattr(module, "net"):
                module.net = compiled
            else:
                part[i] = compiled
    net.decoder.full = torch.compile(net.decoder.full, dynamic=False)
    net.metric.net = torch.compile(net.metric.net, dynamic=False)
    return net


def main() -> int:
    image = cv2.cvtColor(cv2.imread(sys.argv[1]), cv2.COLOR_BGR2RGB)
    out_path = Path(sys.argv[2])
    weights = sys.argv[3] if len(sys.argv) > 3 else "weights/network.safetensors"
    torch._dynamo.config.cache_size_limit = 64
    device = torch.device("cuda")
    plain = load_weights(weights, device).eval()
    nets = {"plain": plain, "stacks": compile_stacks(copy.deepcopy(plain))}
    rows = []
    for width, height in ((1920, 1080), (3840, 2160)):
        frames = pan(image, width, height)
        row = {"weights": weights, "size": f"{width}x{height}", "gpu": torch.cuda.get_device_name()}
        outputs = {}
        for variant in ("plain", "stacks", "plain", "stacks"):
            interp = Interpolator(InterpolatorOptions(device="cuda", precision="bf16", flow_scale=1.0),
                                  network=nets[variant])
            start = time.perf_counter()
            run_stream(interp, [f.copy() for f in frames[:5]])
            row.setdefault(f"{variant}_warmup_s", []).append(time.perf_counter() - start)
            ms = 1000 * statistics.median(run_stream(interp, frames))
            row.setdefault(f"{variant}_ms_per_pair", []).append(ms)
            outputs[variant] = interp.interpolate_integer(frames[10], frames[11], [0.5])[0]
            print(variant, f"{width}x{height}", f"{ms:.1f} ms", flush=True)
        diff = outputs["plain"].astype(np.float64) - outputs["stacks"].astype(np.float64)
        mse = float(np.mean(diff ** 2))
        row["plain_vs_stacks_psnr_db"] = 10 * np.log10(255.0 ** 2 / mse) if mse else float("inf")
        rows.append(row)
        print(json.dumps(row), flush=True)
    out_path.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
