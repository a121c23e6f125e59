"""Session 41: what --flow-scale auto costs per pair (the pair CLI's eager path): one 1080p pair through
engine.Interpolator in bf16 at flow scale 1, at auto where no pair is checked (small motion), and at auto with every
pair checked (model.network.AUTO_MOTION_PX set to 0: the cost of a pair of large motion). CUDA only.

    python docs/journal/raw/probe_s41_auto_cost.py [--weights weights/network.safetensors]
"""
import argparse
import json
from pathlib import Path

import torch

import model.network
from bench.timing import cuda_time_ms, require_cuda
from engine import Interpolator, InterpolatorOptions
from model import load_weights

p = argparse.ArgumentParser()
p.add_argument("--weights", type=Path, default=Path("weights/network.safetensors"))
args = p.parse_args()
device = require_cuda()
torch.backends.cudnn.benchmark = True
net = load_weights(args.weights, device)
g = torch.Generator().manual_seed(0)
canvas = torch.nn.functional.avg_pool2d(torch.rand(1, 3, 1080, 1920 + 8, generator=g), 3, 1, 1).to(device)
one, two = canvas[..., 8:], canvas[..., :1920]  # 8 px of motion: no pair checked at the shipped threshold
rows = {}
for label, scale, threshold in (("scale 1", 1.0, 32.0), ("auto, not checked", "auto", 32.0),
                                ("auto, checked", "auto", 0.0)):
    model.network.AUTO_MOTION_PX = threshold
    interpolator = Interpolator(InterpolatorOptions(precision="bf16", flow_scale=scale), network=net)
    rows[label] = round(cuda_time_ms(lambda: interpolator(one, two, [0.5]), repeats=20), 2)
    print(label, rows[label], "ms", flush=True)
print(json.dumps(rows))
