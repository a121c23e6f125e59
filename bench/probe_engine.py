"""Issue 85's probe: where a 1080p pair's time goes in the engine's route, host against GPU, both networks.

    python3 -m bench.probe_engine OUT_DIR [PAIRS]

For each shipped network as run.py builds it (bench_video.table_engine): the pipeline's route over PAIRS pairs of a
moving texture (bench_video.route: stream_frames, quadratic paths, a write-behind thread waiting for the frames),
wall time per interpolated frame; the host's time inside each engine call; the GPU's own time for the route's CUDA
graphs fed device tensors (flow state then synthesis, no upload or download); the same with flow scale 1; and a
cProfile of the host over the route (top functions by own time) and torch.profiler's top CPU-side ops. Prints a
summary and writes OUT_DIR/probe_engine.json and OUT_DIR/*.prof.txt.
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import torch

from bench.bench_video import FAST_WEIGHTS, DEFAULT_WEIGHTS, route, table_engine
from bench.timing import cuda_time_ms
from softsplat_vfi.engine import Interpolator, InterpolatorOptions
from softsplat_vfi.media.yuv import run_opencv_on_callers_threads


def texture_frames(count: int, height: int = 1080, width: int = 1920, step: int = 3) -> list:
    rng = np.random.default_rng(0)
    small = rng.random((height // 8 + 4, width // 8 + 4 + count * step // 8 + 4, 3)).astype(np.float32)
    big = torch.nn.functional.interpolate(torch.from_numpy(small).permute(2, 0, 1)[None], scale_factor=8,
                                          mode="bicubic", align_corners=False)[0].permute(1, 2, 0).numpy()
    big = np.clip(big * 255, 0, 255).astype(np.uint8)
    return [np.ascontiguousarray(big[:height, i * step:i * step + width]) for i in range(count)]


def probe_network(name: str, weights: Path, frames: list, stamps: list, rate: Fraction, out: Path) -> dict:
    """One network's row (see the module's docstring)."""
    engine = table_engine(weights, "cuda")
    row = {"flow_scale": str(engine.options.flow_scale)}
    route(engine, frames[:4], stamps[:4], rate, 2)  # capture, warm-up
    host = []
    start_call = engine.start_integer_with_neighbours

    def timed_call(*args, **kwargs):
        t0 = time.perf_counter()
        made = start_call(*args, **kwargs)
        host.append(time.perf_counter() - t0)
        return made

    engine.start_integer_with_neighbours = timed_call
    for trial in range(2):
        host.clear()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        count, interpolated = route(engine, frames, stamps, rate, 2)
        wall = time.perf_counter() - t0
        row[f"route_ms_per_pair_{trial}"] = 1000 * wall / interpolated
        row[f"host_ms_per_call_{trial}"] = 1000 * float(np.median(host))
        row[f"host_ms_mean_{trial}"] = 1000 * float(np.mean(host))
    # cProfile of the host over the route
    prof = cProfile.Profile()
    prof.enable()
    route(engine, frames[:41], stamps[:41], rate, 2)
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(30)
    (out / f"{name}_cprofile.prof.txt").write_text(text.getvalue())
    # torch.profiler over 20 pairs
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as tp:
        route(engine, frames[:21], stamps[:21], rate, 2)
    (out / f"{name}_torch_cpu.prof.txt").write_text(
        tp.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
    (out / f"{name}_torch_cuda.prof.txt").write_text(
        tp.key_averages().table(sort_by="self_cuda_time_total", row_limit=30))
    kernels = [e for e in tp.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    row["profiled_gpu_ms_per_pair"] = sum(e.self_device_time_total for e in kernels) / 1000 / 20
    # the route's graphs on device tensors: the GPU's own time per pair
    graphed = engine.cuda_graphs_for(1080, 1920, True)
    a, b, c = (torch.from_numpy(f).cuda().permute(2, 0, 1)[None].float() / 255 for f in frames[:3])
    state = graphed.flow_state(b, c)

    def graphs_pair():
        graphed.flow_state(a, b)
        graphed.synthesize(state, [0.5], (state.flow_fwd, state.flow_bwd), (1.0, 1.0))

    row["graphs_gpu_ms"] = cuda_time_ms(graphs_pair, warmup=3, repeats=40)
    row["graphs_flow_ms"] = cuda_time_ms(lambda: graphed.flow_state(a, b), warmup=3, repeats=40)
    # host time of the graphs' calls alone (launches and copies queued, not waited for)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        graphs_pair()
    row["graphs_host_ms"] = 1000 * (time.perf_counter() - t0) / 20
    torch.cuda.synchronize()
    if name == "default":
        one = Interpolator(InterpolatorOptions(weights=str(weights), device="cuda", flow_scale=1.0))
        g1 = one.cuda_graphs_for(1080, 1920, True)
        s1 = g1.flow_state(b, c)
        row["graphs_gpu_ms_scale1"] = cuda_time_ms(
            lambda: (g1.flow_state(a, b), g1.synthesize(s1, [0.5], (s1.flow_fwd, s1.flow_bwd), (1.0, 1.0))),
            warmup=3, repeats=40)
    print(name, json.dumps(row, indent=1), flush=True)
    return row


def main() -> int:
    out = Path(sys.argv[1])
    pairs = int(sys.argv[2]) if len(sys.argv) > 2 else 120
    out.mkdir(parents=True, exist_ok=True)
    run_opencv_on_callers_threads()
    frames = texture_frames(pairs + 1)
    rate = Fraction(24)
    stamps = [Fraction(i) / rate for i in range(len(frames))]
    result = {}
    for name, weights in (("default", DEFAULT_WEIGHTS), ("fast", FAST_WEIGHTS)):
        result[name] = probe_network(name, weights, frames, stamps, rate, out)
        torch.cuda.empty_cache()
    (out / "probe_engine.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
