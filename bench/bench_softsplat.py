"""Time softsplat on the GPU: our CUDA path and our PyTorch path, forward and forward+backward.

    python -m bench.bench_softsplat [--dtype float32|bfloat16] [--repeats 30] [--json out.json]

Shapes and inputs follow ../shared/ANCHORS.md: 'soft' mode, flow ~ N(0, 8 px),
metric ~ N(0, 1). The bytes floor reads input, flow and metric once and writes
the output once, at the measured copy bandwidth.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import List, Optional, Tuple

import torch


from softsplat_vfi import softsplat
from bench.timing import copy_bandwidth_gbs, cuda_time_ms, require_cuda

SHAPES = [(1, 3, 1080, 1920), (1, 3, 2160, 3840), (1, 33, 1080, 1920), (1, 65, 540, 960),
          (1, 97, 270, 480), (8, 33, 256, 256)]
# published operator on an H200, ../shared/ANCHORS.md: (forward ms, forward+backward ms)
PUBLISHED = {(1, 3, 1080, 1920): (0.696, 1.371), (1, 3, 2160, 3840): (1.631, 3.993),
             (1, 33, 1080, 1920): (3.365, 7.986), (1, 65, 540, 960): (1.823, 4.168),
             (1, 97, 270, 480): (0.928, 1.780), (8, 33, 256, 256): (0.923, 2.216)}


def load_variant(path: Optional[Path]) -> ModuleType:
    """The operator module to time: softsplat.py, or an older copy kept for comparison."""
    if path is None:
        return softsplat
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"softsplat_variant_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(dtype: torch.dtype, repeats: int, with_torch: bool, op: ModuleType = softsplat) -> List[dict]:
    device = torch.device("cuda")
    bandwidth = copy_bandwidth_gbs(device)
    print(f"device: {torch.cuda.get_device_name()}, copy bandwidth {bandwidth / 1000:.2f} TB/s, dtype {dtype}")
    rows = []
    for shape in SHAPES:
        n, c, h, w = shape
        gen = torch.Generator(device=device).manual_seed(0)
        x = torch.rand(shape, device=device, generator=gen).to(dtype)
        flow = (torch.randn(n, 2, h, w, device=device, generator=gen) * 8).to(dtype)
        metric = torch.randn(n, 1, h, w, device=device, generator=gen).to(dtype)
        size = torch.finfo(dtype).bits // 8
        floor_ms = size * n * h * w * (2 * c + 3) / (bandwidth * 1e9) * 1e3
        row = {"shape": "x".join(map(str, shape)), "floor_ms": floor_ms}
        paths = [("cuda", lambda a, b, m: op.splat(a, b, m, "soft"))]
        if with_torch:
            paths.append(("torch", lambda a, b, m: op._splat_torch(a, b, m, "soft", "addeps")))
        for name, fn in paths:
            row[f"{name}_fwd_ms"] = cuda_time_ms(lambda: fn(x, flow, metric), repeats=repeats)
            xg, fg, mg = (t.clone().requires_grad_() for t in (x, flow, metric))
            grad = torch.randn_like(x)

            def fwd_bwd() -> None:
                out = fn(xg, fg, mg)
                torch.autograd.grad(out, (xg, fg, mg), grad)

            row[f"{name}_fwdbwd_ms"] = cuda_time_ms(fwd_bwd, repeats=repeats)
        pub = PUBLISHED[shape]
        row["published_fwd_ms"], row["published_fwdbwd_ms"] = pub
        row["speedup_fwd"] = pub[0] / row["cuda_fwd_ms"]
        row["speedup_fwdbwd"] = pub[1] / row["cuda_fwdbwd_ms"]
        rows.append(row)
        torch.cuda.empty_cache()
    return rows


def profile_kernels(op: ModuleType, dtype: torch.dtype) -> None:
    """Where forward+backward spends its GPU time, kernel by kernel."""
    from torch.profiler import ProfilerActivity, profile

    for shape in SHAPES:
        n, c, h, w = shape
        x = torch.rand(shape, device="cuda", dtype=dtype, requires_grad=True)
        flow = (torch.randn(n, 2, h, w, device="cuda") * 8).to(dtype).requires_grad_()
        metric = torch.randn(n, 1, h, w, device="cuda", dtype=dtype, requires_grad=True)
        for _ in range(3):
            op.splat(x, flow, metric, "soft").sum().backward()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                op.splat(x, flow, metric, "soft").backward(torch.ones_like(x))
            torch.cuda.synchronize()
        print(f"\nkernels for {shape} (10 x forward+backward)")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=50))


def print_table(rows: List[dict], dtype: torch.dtype) -> None:
    with_torch = "torch_fwd_ms" in rows[0]
    head = ("| shape | ours CUDA fwd | ours CUDA fwd+bwd | published fwd | published fwd+bwd | speed-up fwd "
            "| speed-up fwd+bwd |")
    if with_torch:
        head += " ours PyTorch fwd | ours PyTorch fwd+bwd |"
    head += " bytes floor |"
    print(f"\n{dtype} (ms, median of CUDA-event timings)")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        line = (f"| {r['shape']} | {r['cuda_fwd_ms']:.3f} | {r['cuda_fwdbwd_ms']:.3f} | {r['published_fwd_ms']:.3f} "
                f"| {r['published_fwdbwd_ms']:.3f} | {r['speedup_fwd']:.2f}x | {r['speedup_fwdbwd']:.2f}x |")
        if with_torch:
            line += f" {r['torch_fwd_ms']:.3f} | {r['torch_fwdbwd_ms']:.3f} |"
        line += f" {r['floor_ms']:.3f} |"
        print(line)


def host_overhead(op: ModuleType, dtype: torch.dtype, calls: int = 2000) -> Tuple[float, float, float]:
    """Microseconds of host time per call on a tiny input, where the GPU work is negligible: what a call costs
    before the kernels matter (Python, dispatch, launches). Forward without gradients (inference), forward of an
    input that requires grad, and forward+backward."""
    x = torch.rand(1, 3, 32, 32, device="cuda").to(dtype)
    xg = x.clone().requires_grad_()
    flow = (torch.randn(1, 2, 32, 32, device="cuda") * 8).to(dtype)
    metric = torch.randn(1, 1, 32, 32, device="cuda").to(dtype)
    result = []
    for inp, backward in ((x, False), (xg, False), (xg, True)):
        for i in range(calls // 10 + calls):  # the first tenth warms up
            if i == calls // 10:
                torch.cuda.synchronize()
                start = time.perf_counter()
            out = op.splat(inp, flow, metric, "soft")
            if backward:
                out.sum().backward()
        torch.cuda.synchronize()
        result.append((time.perf_counter() - start) / calls * 1e6)
    return result[0], result[1], result[2]


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--no-torch", action="store_true", help="skip the (slow) PyTorch path")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--module", type=Path, default=None, help="time another copy of softsplat.py (a variant)")
    p.add_argument("--profile", action="store_true", help="per-kernel GPU times at every shape")
    p.add_argument("--overhead", action="store_true", help="also the host time per call on a 1x3x32x32 input")
    args = p.parse_args(argv)
    if require_cuda() is None:
        return 2
    dtype = getattr(torch, args.dtype)
    if args.module is not None:
        print(f"variant: {args.module}")
    op = load_variant(args.module)
    if args.profile:
        profile_kernels(op, dtype)
    if args.overhead:
        fwd, fwd_grad, both = host_overhead(op, dtype)
        print(f"host time per call at 1x3x32x32: forward {fwd:.1f} us (input requiring grad: {fwd_grad:.1f} us), "
              f"forward+backward {both:.1f} us")
    rows = run(dtype, args.repeats, not args.no_torch, op)
    print_table(rows, dtype)
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "dtype": args.dtype,
                                         "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
