"""Session 42: what --flow-scale auto costs when replayed as CUDA graphs (model.runtime.GraphedPairs), one 1080p pair,
bf16, on the H200: scale 1, auto where the pair is not a candidate, and auto where it is (forced with
AUTO_MOTION_PX = -1, so the half-scale graph always replays). Flow and one synthesis per pair.

    PYTHONPATH=. python3 docs/journal/raw/probe_s42_auto_graph_cost.py
"""
import torch

import model.network
from bench.timing import cuda_time_ms
from model import load_weights
from model.runtime import GraphedPairs

net = load_weights("weights/network.safetensors", torch.device("cuda"))
torch.backends.cudnn.benchmark = True
shape = (1, 3, 1080, 1920)
one, two = torch.rand(shape, device="cuda"), torch.rand(shape, device="cuda")
for repeat in range(2):
    for label, scale, threshold in (("scale 1", 1.0, 32.0), ("auto, not a candidate", "auto", 1e9),
                                    ("auto, a candidate", "auto", -1.0)):
        model.network.AUTO_MOTION_PX = threshold
        graphed = GraphedPairs(net, shape, torch.bfloat16, flow_scale=scale)
        ms = cuda_time_ms(lambda: graphed(one, two, [0.5]), repeats=30)
        print(f"run {repeat + 1}: {label:24s} {ms:6.2f} ms per pair", flush=True)
        del graphed
        torch.cuda.empty_cache()
