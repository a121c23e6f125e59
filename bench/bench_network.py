"""Time the network on the GPU: one middle frame, and 7 frames from one flow, per resolution.

    python -m bench.bench_network [--model fast | --weights PATH | --width 2]
                                  [--compile] [--ensembles 2 4] [--peer rife-4.26 rife-3.1 rife-4.6]
                                  [--batch 1 2 4] [--profile [1080p]] [--json out.json]

The weights are run.py's (``--model``, ``--weights``); ``--width`` and ``--network`` time random ones (speed does not
depend on the weights). ``--peer`` times RIFE
releases (evaluation/peers.py, their real weights) in the same run, on the same frames, in float32 and under float16
autocast (upstream's two modes), eager as their tools run them.

The CUDA-graph rows time the engine's own replay, the graphs ``run.py`` replays for a video's whole frames
(``engine.Interpolator.cuda_graphs_for``: ``model.runtime.GraphedPairs``, the flow's steps then the synthesis), bf16,
flow at full resolution (``engine_graphs``). ``--batch`` times N pairs per call (the same graphs captured for N x 3 x
H x W frames: batch 1 is the one-pair row again).

``--profile`` runs the network eagerly under torch.profiler (bf16, one size; with ``--compile-stacks`` also compiled
as ``run.py --compile`` compiles it) and says where the GPU's time goes: the top kernels, and each part of the network
(its ranges synchronise the GPU at their ends, so that every kernel is counted in the part that launched it; kernel
durations do not change with that).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import sys
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch


from bench.timing import cuda_time_ms, require_cuda
from softsplat_vfi.engine.options import add_flags, show_notes, weights_for
from softsplat_vfi.model import Network, load_weights
from softsplat_vfi.model.network import NetworkConfig, count_parameters
from softsplat_vfi.model.ensemble import with_ensemble
from evaluation.peers import PEERS, load_peer
from softsplat_vfi.model.runtime import GraphedPairs, graphed_pairs

MATCH_PSNR = 40.0  # dB between compiled and eager frames, below which a compiled time is not reported
SIZES = {"720p": (720, 1280), "1080p": (1080, 1920), "4K": (2160, 3840)}
# --profile: calls profiled (after as many unprofiled ones), kernels listed, and the parts of the network its ranges
# name (part_ranges), in the order printed; a kernel launched outside every part counts as "other"
PROFILE_CALLS = 3
TOP_KERNELS = 25
PARTS = ("encoder", "flow decoders", "correlation", "metric", "still guard", "softsplat", "synthesis")
OTHER = "other"
# --batch: a batch is timed only where model.inference's estimate of its memory, times GRAPH_MEMORY (the warm-up's
# cached blocks beside the captured graph's own pool, model.runtime._capture), fits in BATCH_HEADROOM of the free memory
BATCH_HEADROOM = 0.9
GRAPH_MEMORY = 2


def gflops(net: Network, h: int, w: int) -> float:
    """Multiply-adds x 2 of the convolutions for one middle frame, counted with forward hooks."""
    total = [0]

    def hook(mod: torch.nn.Conv2d, inp: Tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
        k = mod.kernel_size[0] * mod.kernel_size[1] * mod.in_channels // mod.groups
        total[0] += 2 * out.numel() * k

    handles = [m.register_forward_hook(hook) for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        net(torch.rand(1, 3, h, w, device=next(net.parameters()).device),
            torch.rand(1, 3, h, w, device=next(net.parameters()).device), [0.5])
    for handle in handles:
        handle.remove()
    return total[0] / 1e9


def moving_pair(shape: Sequence[int], device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """A smooth random image (noise upsampled 16x, bicubic) and itself moved 3 px right and 2 down.

    Where compiled and eager frames are compared: on independent noise frames the network is chaotic (on the CPU
    at 128 x 192, eager bf16 is 25.5 dB from eager fp32, and a 1e-3 nudge of one input moves the fp32 frame by
    24.8 dB), so any rounding difference reads as a mismatch there; on this pair eager bf16 is 61.5 dB from fp32.
    """
    n, c, h, w = shape
    g = torch.Generator().manual_seed(0)
    base = torch.rand(n, c, max(h // 16, 2), max(w // 16, 2), generator=g)
    one = torch.nn.functional.interpolate(base, size=(h, w), mode="bicubic", align_corners=False).clamp(0, 1)
    return one.to(device), torch.roll(one, shifts=(2, 3), dims=(2, 3)).to(device)


def agrees(out: dict, key: str, frame: torch.Tensor, eager: torch.Tensor) -> bool:
    """Whether a compiled network's ``frame`` makes the eager network's (within ``MATCH_PSNR``), its PSNR recorded
    as ``out[key + "_vs_eager_psnr"]``; below, a note on stderr says its time is not reported."""
    mse = (frame.clamp(0, 1) - eager.clamp(0, 1)).pow(2).mean().item()
    out[f"{key}_vs_eager_psnr"] = agreement = -10 * math.log10(max(mse, 1e-20))
    if agreement < MATCH_PSNR:
        print(f"note: {key}: frames {agreement:.1f} dB from eager (below {MATCH_PSNR:g}): its time is not reported",
              file=sys.stderr)
    return agreement >= MATCH_PSNR


def time_compiled(net: Network, one: torch.Tensor, two: torch.Tensor, repeats: int,
                  modes: Sequence[str] = ("default", "reduce-overhead")) -> dict:
    """bf16 x2 time of the whole network under torch.compile, default mode and with CUDA graphs; the
    first calls (compilation) are reported separately. (run.py --compile compiles the regions between the custom
    kernels instead, ``model.runtime.compile_network``: ``--compile-stacks``.)"""
    import time

    out = {}
    check = moving_pair(one.shape, one.device)  # agreement is measured on this pair (moving_pair says why)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        eager = net(*check, [0.5])[0].float()
    for mode in modes:
        torch._dynamo.reset()
        compiled = torch.compile(net, mode=mode, dynamic=False)

        def call(a: torch.Tensor = one, b: torch.Tensor = two) -> List[torch.Tensor]:
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                return compiled(a, b, [0.5])

        start = time.perf_counter()
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        out[f"compile_{mode}_first_s"] = time.perf_counter() - start
        milliseconds = cuda_time_ms(call, repeats=repeats)
        # same network, same precision: how far the compiled output is from the eager one (cloned at once: a
        # CUDA-graph replay reuses its output buffers)
        frame = call(*check)[0].float().clone()
        # a time is reported only for a compiled network that makes the eager network's frames
        if agrees(out, f"compile_{mode}", frame, eager):
            out[f"bf16_compile_{mode}_x2_ms"] = milliseconds
    return out


def engine_graphs(net: Network, shape: Sequence[int], compiled: bool = False) -> Optional[GraphedPairs]:
    """The CUDA graphs the engine replays for pairs of ``shape`` (N x 3 x H x W), bf16, flow at full resolution:
    ``Interpolator.cuda_graphs_for``'s for one pair, the same ``model.runtime.graphed_pairs`` for N; with
    ``compiled``, of the network compiled as ``run.py --compile`` compiles it. None where capture failed (said on
    stderr). The engine times the frames of 7 t (x8) as it makes them: the flow once, the synthesis graph per t."""
    from softsplat_vfi.engine import Interpolator, InterpolatorOptions

    interpolator = Interpolator(InterpolatorOptions(precision="bf16", flow_scale=1.0, tile=0, compile=compiled),
                                network=net)
    n, _, h, w = shape
    if n == 1:
        return interpolator.cuda_graphs_for(h, w)
    return graphed_pairs(interpolator.network, torch.Size(shape), interpolator.autocast_dtype, 1.0)


def time_compiled_stacks(net: Network, one: torch.Tensor, two: torch.Tensor, repeats: int) -> dict:
    """bf16 CUDA-graph time of one middle frame with the network compiled as ``run.py --compile`` compiles it
    (``model.runtime.compile_network``), and how far its frame is from the uncompiled graph's: the time is reported
    only where the frames agree within ``MATCH_PSNR``."""
    import time

    check = moving_pair(one.shape, one.device)  # agreement is measured on this pair (moving_pair says why)
    reference = engine_graphs(net, one.shape)
    eager = reference(*check, [0.5])[0].float().clone()
    reference = None
    start = time.perf_counter()
    graphed = engine_graphs(net, one.shape, compiled=True)
    frame = graphed(*check, [0.5])[0].float().clone()
    torch.cuda.synchronize()
    out = {"compile_stacks_first_s": time.perf_counter() - start}
    if agrees(out, "compile_stacks", frame, eager):
        out["bf16_graph_compile_stacks_x2_ms"] = cuda_time_ms(lambda: graphed(one, two, [0.5]), repeats=repeats)
    return out


def batch_size(text: str) -> int:
    """A ``--batch`` argument: pairs per network call, 1 or more (argparse.ArgumentTypeError otherwise)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give pairs per call as whole numbers of 1 or more, e.g. 1 2 4")
    return value


def time_batches(net: Network, h: int, w: int, batches: Sequence[int], repeats: int) -> dict:
    """bf16 CUDA-graph time of one middle frame for each of N pairs per call (``engine_graphs`` on N x 3 x H x W
    frames, as the one-pair row): ms per call and per pair. A batch whose estimated memory does not fit, or whose
    capture fails, is skipped with a note."""
    from softsplat_vfi.model.inference import available_memory, memory_factor, needed_memory

    device = next(net.parameters()).device
    out = {}
    for n in batches:
        needed = GRAPH_MEMORY * n * needed_memory(h, w, device, memory_factor(net))
        free = available_memory(device)
        if needed > BATCH_HEADROOM * free:
            print(f"note: batch {n} at {h}x{w} skipped: about {needed / 2 ** 30:.0f} GiB, "
                  f"{free / 2 ** 30:.0f} GiB free", file=sys.stderr)
            continue
        shape = torch.Size((n, 3, h, w))
        one = torch.rand(shape, device=device)
        two = torch.rand(shape, device=device)
        graphed = None
        try:
            graphed = engine_graphs(net, shape)
            if graphed is None:
                continue
            milliseconds = cuda_time_ms(lambda: graphed(one, two, [0.5]), repeats=repeats)
        except torch.cuda.OutOfMemoryError:
            print(f"note: batch {n} at {h}x{w} ran out of GPU memory: not timed", file=sys.stderr)
            continue
        finally:
            graphed = None  # the captured graph's memory, freed before the next batch
            torch.cuda.empty_cache()
        out[f"bf16_graph_batch{n}_ms"] = milliseconds
        out[f"bf16_graph_batch{n}_per_pair_ms"] = milliseconds / n
        one = two = None
    return out


@contextlib.contextmanager
def part_ranges(net: Network, sync: Callable[[], None]) -> Iterator[None]:
    """``torch.profiler.record_function`` ranges named by PARTS around the network's parts while inside: forward
    hooks on its modules (encoder, flow decoders, metric, synthesis decoder) and, for the parts that are functions,
    wrappers put in place of the names the network calls them by (correlation, still guard, softsplat), restored on
    leaving. ``sync`` runs as each range begins and ends (``torch.cuda.synchronize``: every kernel then starts inside
    the innermost range it was launched in). The network's outputs do not change."""
    import softsplat_vfi.model.flow
    import softsplat_vfi.model.network

    stack: List[torch.profiler.record_function] = []

    def begin(name: str) -> None:
        sync()
        stack.append(torch.profiler.record_function(name))
        stack[-1].__enter__()

    def end() -> None:
        sync()
        stack.pop().__exit__(None, None, None)

    def ranged(name: str, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def call(*args: object, **kwargs: object) -> object:
            begin(name)
            try:
                return fn(*args, **kwargs)
            finally:
                end()
        return call

    modules = [(net.encoder, "encoder"), *((d, "flow decoders") for d in net.flow.decoders),
               (net.metric, "metric"), (net.decoder, "synthesis")]
    functions = [(softsplat_vfi.model.flow, "correlation", "correlation"),
                 (softsplat_vfi.model.network, "still_weight", "still guard"),
                 (softsplat_vfi.model.network, "splat_pyramid", "softsplat")]
    handles = []
    saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in functions]
    try:
        for module, name in modules:
            handles.append(module.register_forward_pre_hook(lambda _m, _i, name=name: begin(name)))
            handles.append(module.register_forward_hook(lambda _m, _i, _o: end()))
        for owner, attr, name in functions:
            setattr(owner, attr, ranged(name, getattr(owner, attr)))
        yield
    finally:
        for handle in handles:
            handle.remove()
        for owner, attr, fn in saved:
            setattr(owner, attr, fn)
        while stack:  # a forward that raised inside a module's range
            stack.pop().__exit__(None, None, None)


def part_totals(ranges: Sequence[Tuple[str, float, float]],
                kernels: Sequence[Tuple[str, float, float]]) -> Dict[str, float]:
    """Kernel time per part: each kernel ``(name, start, duration)`` counted in the innermost of ``ranges``
    ``(part, start, end)`` that it starts in (nested ranges: the one that began last), OTHER where none."""
    totals: Dict[str, float] = {}
    for _, start, duration in kernels:
        inside = [r for r in ranges if r[1] <= start < r[2]]
        part = max(inside, key=lambda r: r[1])[0] if inside else OTHER
        totals[part] = totals.get(part, 0.0) + duration
    return totals


def profiled(events: Sequence) -> Tuple[List[Tuple[str, float, float]], List[Tuple[str, float, float]]]:
    """(ranges, kernels) of a profile's events (``prof.events()``): the parts' ranges on the host (name, start,
    end) and the GPU's kernels and copies (name, start, duration), in microseconds from the profile's start."""
    from torch.autograd import DeviceType

    ranges, kernels = [], []
    for e in events:
        if e.device_type == DeviceType.CPU and e.name in PARTS:
            ranges.append((e.name, e.time_range.start, e.time_range.end))
        elif e.device_type == DeviceType.CUDA and e.name not in PARTS and not e.is_user_annotation:
            kernels.append((e.name, e.time_range.start, e.time_range.end - e.time_range.start))
    return ranges, kernels


def profile_network(net: Network, size: str, repeats: int, compiled: bool = False) -> dict:
    """Where one middle frame's GPU time goes at ``size`` (bf16): the CUDA-graph time of a call, and from
    PROFILE_CALLS calls under torch.profiler (after as many unprofiled ones) the kernels' time per call, the
    TOP_KERNELS kernels with their share and launches per call, and the time per part of the network. The calls
    run eagerly, or with ``compiled`` compiled as ``run.py --compile`` runs them (``model.runtime.compile_network``;
    the parts' ranges sit around the compiled regions, so they stay)."""
    from torch.profiler import ProfilerActivity, profile

    from softsplat_vfi.model.runtime import compile_network

    if compiled:
        net = compile_network(net)
    device = next(net.parameters()).device
    h, w = SIZES[size]
    one = torch.rand(1, 3, h, w, device=device)
    two = torch.rand(1, 3, h, w, device=device)
    graphed = engine_graphs(net, one.shape)
    graph_ms = cuda_time_ms(lambda: graphed(one, two, [0.5]), repeats=repeats)
    graphed = None
    torch.cuda.empty_cache()

    def call() -> None:
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            net(one, two, [0.5])

    with part_ranges(net, torch.cuda.synchronize):
        for _ in range(PROFILE_CALLS):
            call()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(PROFILE_CALLS):
                call()
            torch.cuda.synchronize()
    ranges, kernels = profiled(prof.events())
    total = sum(k[2] for k in kernels)
    if not total:
        raise ValueError("the profile holds no CUDA kernels: run on a CUDA build of torch whose profiler sees the GPU")
    by_name: Dict[str, List[float]] = {}
    for name, _, duration in kernels:
        entry = by_name.setdefault(name, [0.0, 0])
        entry[0] += duration
        entry[1] += 1
    top = sorted(by_name.items(), key=lambda item: -item[1][0])[:TOP_KERNELS]
    parts = part_totals(ranges, kernels)
    return {
        "size": size, "compiled": compiled, "calls": PROFILE_CALLS, "bf16_graph_x2_ms": graph_ms,
        "kernel_ms_per_call": total / 1e3 / PROFILE_CALLS,
        "parts_ms_per_call": {part: parts.get(part, 0.0) / 1e3 / PROFILE_CALLS for part in (*PARTS, OTHER)},
        "kernels": [{"name": name, "ms_per_call": t / 1e3 / PROFILE_CALLS, "share": t / total,
                     "launches_per_call": count / PROFILE_CALLS} for name, (t, count) in top],
    }


def print_profile(result: dict) -> None:
    kernel_ms = result["kernel_ms_per_call"]
    how = "compiled as run.py --compile" if result["compiled"] else "eager"
    print(f"\nprofile at {result['size']}, bf16, {how}, {result['calls']} calls: kernels {kernel_ms:.2f} ms per call "
          f"(the CUDA-graph call: {result['bf16_graph_x2_ms']:.2f} ms)")
    print("\n| part | ms per call | share |\n|---|---|---|")
    for part, ms in result["parts_ms_per_call"].items():
        print(f"| {part} | {ms:.2f} | {100 * ms / kernel_ms:.1f}% |")
    print(f"\n| kernel (top {len(result['kernels'])}) | ms per call | share | launches per call |\n|---|---|---|---|")
    for k in result["kernels"]:
        name = k["name"] if len(k["name"]) <= 100 else k["name"][:97] + "..."
        print(f"| `{name}` | {k['ms_per_call']:.3f} | {100 * k['share']:.1f}% | {k['launches_per_call']:g} |")


def print_tables(rows: List[dict], peers: list, batches: List[int]) -> None:
    """The markdown tables of the timed rows: the network per size, each peer, and with ``batches`` the batched
    calls."""
    print("\n| size | GFLOPs | fp32 ms | bf16 ms | bf16 channels_last ms | bf16 CUDA graph ms "
          "| 7 frames (x8) bf16 ms | 7 frames (x8) bf16 CUDA graph ms |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['size']} | {r['gflops']:.0f} | {r['fp32_x2_ms']:.2f} | {r['bf16_x2_ms']:.2f} | "
              f"{r['bf16_cl_x2_ms']:.2f} | {r['bf16_graph_x2_ms']:.2f} | {r['bf16_x8_ms']:.2f} | "
              f"{r['bf16_graph_x8_ms']:.2f} |")
    for peer in peers:
        print(f"| {peer.name} ({peer.parameters / 1e6:.2f} M) | " + " | ".join(
            f"{r['size']}: fp32 {r[peer.name + '_fp32_x2_ms']:.2f} ms, fp16 {r[peer.name + '_fp16_x2_ms']:.2f} ms"
            for r in rows) + " |")
    if batches:
        print("\n| size | pairs per call | bf16 CUDA graph ms per call | ms per pair | pairs per s |")
        print("|---|---|---|---|---|")
        for r in rows:
            for n in batches:
                if f"bf16_graph_batch{n}_ms" in r:
                    per_pair = r[f"bf16_graph_batch{n}_per_pair_ms"]
                    print(f"| {r['size']} | {n} | {r[f'bf16_graph_batch{n}_ms']:.2f} | {per_pair:.2f} | "
                          f"{1e3 / per_pair:.1f} |")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_flags(p, only=("weights",))
    p.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--profile", nargs="?", const="1080p", default=None, choices=list(SIZES),
                   help="profile the network at this size (default 1080p; bf16, eager, and with --compile-stacks "
                        "also compiled so): the top CUDA kernels and the time per part of the network")
    p.add_argument("--batch", type=batch_size, nargs="+", default=[], metavar="N",
                   help="also time N pairs per network call for each N (bf16, CUDA graph, as the one-pair graph row)")
    p.add_argument("--compile", action="store_true",
                   help="also time torch.compile (bf16; default mode, and reduce-overhead = with CUDA graphs)")
    p.add_argument("--compile-stacks", action="store_true",
                   help="also time the CUDA graph compiled as run.py --compile compiles it")
    p.add_argument("--compile-modes", nargs="+", default=["default", "reduce-overhead"],
                   choices=["default", "reduce-overhead"], help="which torch.compile modes --compile times")
    p.add_argument("--ensembles", type=int, nargs="+", default=[], choices=[2, 4],
                   help="also time test-time ensembles of these many passes (bf16, eager: run.py --ensemble runs "
                        "them without CUDA graphs)")
    p.add_argument("--width", type=float, default=None, metavar="FACTOR",
                   help="time a network with random weights and every width times FACTOR (train.py --width)")
    p.add_argument("--peer", nargs="+", default=[], choices=list(PEERS),
                   help="also time these RIFE releases (their wheels installed: evaluation/peers.py)")
    p.add_argument("--network", nargs="+", default=None, metavar="KEY=VALUE",
                   help="time a changed NetworkConfig with random weights (e.g. flow_finest_level=0), as train.py")
    args = p.parse_args(argv)
    show_notes()  # the library's notes on stderr while this tool runs
    # the arguments are checked before the GPU, so that a machine without one checks a command line
    changed = args.network or args.width is not None
    if changed and (args.weights is not None or args.model != "network"):
        print("error: --model and --weights exclude --network and --width (random weights time the same)",
              file=sys.stderr)
        return 2
    try:
        weights = None if changed else weights_for(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        config = NetworkConfig().sized(args.width).with_overrides(args.network or [])
    except ValueError as exc:
        print(f"error: --width or --network: {exc}", file=sys.stderr)
        return 2
    device = require_cuda()
    if device is None:
        return 2
    net = load_weights(weights, device) if weights else Network(config).to(device).eval()
    try:
        peers = [load_peer(name, device) for name in args.peer]
    except ValueError as exc:  # a missing wheel names its pip command
        print(f"error: {exc}", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    print(f"device: {torch.cuda.get_device_name()}, params {count_parameters(net) / 1e6:.2f} M")
    rows = []
    for name in args.sizes:
        h, w = SIZES[name]
        one = torch.rand(1, 3, h, w, device=device)
        two = torch.rand(1, 3, h, w, device=device)
        row = {"size": name, "gflops": gflops(net, h, w)}
        graphed = engine_graphs(net, one.shape)  # one capture: the synthesis replays once per t
        if graphed is None:  # (the note says why)
            return 2
        for key, times in (("x2", [0.5]), ("x8", [i / 8 for i in range(1, 8)])):
            row[f"bf16_graph_{key}_ms"] = cuda_time_ms(lambda: graphed(one, two, times), repeats=args.repeats)
        graphed = None  # free the captured graphs' memory before the eager runs
        torch.cuda.empty_cache()
        row.update(time_batches(net, h, w, args.batch, args.repeats))
        for mode in ("fp32", "bf16", "bf16_cl"):
            model = net.to(memory_format=torch.channels_last) if mode == "bf16_cl" else net
            a = one.contiguous(memory_format=torch.channels_last) if mode == "bf16_cl" else one
            b = two.contiguous(memory_format=torch.channels_last) if mode == "bf16_cl" else two
            ctx = torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode != "fp32")
            with torch.no_grad(), ctx:
                row[f"{mode}_x2_ms"] = cuda_time_ms(lambda: model(a, b, [0.5]), repeats=args.repeats)
                row[f"{mode}_x8_ms"] = cuda_time_ms(lambda: model(a, b, [i / 8 for i in range(1, 8)]),
                                                    repeats=max(3, args.repeats // 4))
            net.to(memory_format=torch.contiguous_format)
        for passes in args.ensembles:
            runner = with_ensemble(net, passes)
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                row[f"bf16_ensemble{passes}_x2_ms"] = cuda_time_ms(lambda: runner(one, two, [0.5]),
                                                                   repeats=args.repeats)
        if args.compile:
            row.update(time_compiled(net, one, two, args.repeats, args.compile_modes))
        if args.compile_stacks:
            row.update(time_compiled_stacks(net, one, two, args.repeats))
        for peer in peers:
            for mode, dtype in (("fp32", None), ("fp16", torch.float16)):
                with torch.no_grad(), torch.autocast("cuda", dtype=dtype or torch.float16, enabled=dtype is not None):
                    row[f"{peer.name}_{mode}_x2_ms"] = cuda_time_ms(lambda: peer(one, two, 0.5), repeats=args.repeats)
        rows.append(row)
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    profiled_runs = [profile_network(net, args.profile, args.repeats, compiled)
                     for compiled in (False, True)[:1 + args.compile_stacks]] if args.profile else []
    print_tables(rows, peers, args.batch)
    for profiled_run in profiled_runs:
        print_profile(profiled_run)
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows,
                                         "profiles": profiled_runs}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
