"""Probe (issue 68, session 57): the tiled correlation forward against an earlier commit's kernel, side by side in one
process on a GPU: alone on the network's own 1080p shapes (equal outputs checked), and inside the default network at
1080p as a bf16 CUDA graph, plain and with the convolution stacks compiled; RIFE 4.26 timed in the same run.

    python -m bench.probe_correlation --old 63a37dd [--json OUT.json]
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

import torch

from bench.timing import cuda_time_ms, require_cuda


def old_correlation(rev: str):
    """``model/correlation.py`` as it stood at ``rev``, loaded as its own module."""
    source = subprocess.run(["git", "show", f"{rev}:model/correlation.py"], check=True, capture_output=True,
                            text=True).stdout
    path = Path(tempfile.mkdtemp()) / "old_correlation.py"
    path.write_text(source)
    loader = importlib.machinery.SourceFileLoader("old_correlation", str(path))
    spec = importlib.util.spec_from_loader("old_correlation", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module.correlation


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--old", required=True, help="the commit whose kernel is timed beside this tree's")
    p.add_argument("--weights", type=Path, default=Path("weights/network.safetensors"))
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    dev = require_cuda()
    if dev is None:
        return 2
    import model.flow as flow
    from model import load_weights
    from model.peers import load_peer
    from model.runtime import GraphedNetwork, compile_network

    torch.backends.cudnn.benchmark = True
    kernels = {"old": old_correlation(args.old), "new": flow.correlation}
    net = load_weights(args.weights, dev)
    one, two = torch.rand(1, 3, 1080, 1920, device=dev), torch.rand(1, 3, 1080, 1920, device=dev)
    shapes = []

    def record(a: torch.Tensor, b: torch.Tensor, radius: int) -> torch.Tensor:
        shapes.append((tuple(a.shape), a.dtype, radius))
        return kernels["new"](a, b, radius)

    flow.correlation = record
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        net(one, two, [0.5])
    result = {"shapes": [str(s) for s in shapes], "equal": [], "correlation_ms": {"old": 0.0, "new": 0.0}}
    for shape, dtype, radius in shapes:
        a, b = torch.randn(shape, device=dev, dtype=dtype), torch.randn(shape, device=dev, dtype=dtype)
        for name, fn in kernels.items():
            result["correlation_ms"][name] += cuda_time_ms(lambda: fn(a, b, radius), repeats=50)
        result["equal"].append(torch.equal(kernels["old"](a, b, radius), kernels["new"](a, b, radius)))
    for run in range(2):
        for name, fn in kernels.items():
            flow.correlation = fn
            graphed = GraphedNetwork(net, one.shape, [0.5], torch.bfloat16)
            result[f"graph_{name}_{run}_ms"] = cuda_time_ms(lambda: graphed(one, two), repeats=30)
            graphed = None
            torch.cuda.empty_cache()
    for name, fn in kernels.items():
        flow.correlation = fn
        torch._dynamo.reset()
        graphed = GraphedNetwork(compile_network(net), one.shape, [0.5], torch.bfloat16)
        graphed(one, two)
        result[f"compiled_{name}_ms"] = cuda_time_ms(lambda: graphed(one, two), repeats=30)
        graphed = None
        torch.cuda.empty_cache()
    flow.correlation = kernels["new"]
    peer = load_peer("rife-4.26", dev)
    for mode, dtype in (("fp32", None), ("fp16", torch.float16)):
        with torch.no_grad(), torch.autocast("cuda", dtype=dtype or torch.float16, enabled=dtype is not None):
            result[f"rife-4.26_{mode}_ms"] = cuda_time_ms(lambda: peer(one, two, 0.5), repeats=30)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
