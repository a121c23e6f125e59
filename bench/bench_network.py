"""Time the network on the GPU: one middle frame, and 7 frames from one flow, per resolution.

    python -m bench.bench_network [--weights weights/network.safetensors | --width 2]
                                  [--compile] [--ensembles 2 4] [--peer rife-4.26 rife-3.1 rife-4.6]
                                  [--json out.json]

Speed does not depend on the weights, so random ones are used when none are given. ``--peer`` times RIFE
releases (model/peers.py, their real weights) in the same run, on the same frames, in float32 and under float16
autocast (upstream's two modes), eager as their tools run them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import torch


from bench.timing import cuda_time_ms, require_cuda
from model import Network, load_weights
from model.network import NetworkConfig, count_parameters
from model.ensemble import with_ensemble
from model.peers import PEERS, load_peer
from model.runtime import GraphedNetwork

MATCH_PSNR = 40.0  # dB between compiled and eager frames, below which a compiled time is not reported
SIZES = {"720p": (720, 1280), "1080p": (1080, 1920), "4K": (2160, 3840)}


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


def time_compiled(net: Network, one: torch.Tensor, two: torch.Tensor, repeats: int,
                  modes: Sequence[str] = ("default", "reduce-overhead")) -> dict:
    """bf16 x2 time of the whole network under torch.compile, default mode and with CUDA graphs; the
    first calls (compilation) are reported separately. (run.py --compile compiles the convolution stacks instead,
    ``model.runtime.compile_network``, which the engine's probes time.)"""
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
        mse = (frame.clamp(0, 1) - eager.clamp(0, 1)).pow(2).mean().item()
        out[f"compile_{mode}_vs_eager_psnr"] = agreement = -10 * math.log10(max(mse, 1e-20))
        # a time is reported only for a compiled network that makes the eager network's frames
        if agreement >= MATCH_PSNR:
            out[f"bf16_compile_{mode}_x2_ms"] = milliseconds
        else:
            print(f"note: torch.compile mode {mode}: frames {agreement:.1f} dB from eager (below {MATCH_PSNR:g}): "
                  "its time is not reported", file=sys.stderr)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weights", type=Path, default=None)
    p.add_argument("--sizes", nargs="+", default=list(SIZES))
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--profile", action="store_true", help="print the top CUDA kernels at the first size")
    p.add_argument("--compile", action="store_true",
                   help="also time torch.compile (bf16; default mode, and reduce-overhead = with CUDA graphs)")
    p.add_argument("--compile-modes", nargs="+", default=["default", "reduce-overhead"],
                   choices=["default", "reduce-overhead"], help="which torch.compile modes --compile times")
    p.add_argument("--ensembles", type=int, nargs="+", default=[], choices=[2, 4],
                   help="also time test-time ensembles of these many passes (bf16, eager: run.py --ensemble runs "
                        "them without CUDA graphs)")
    p.add_argument("--width", type=float, default=None, metavar="FACTOR",
                   help="time a network with random weights and every width times FACTOR (train.py --width)")
    p.add_argument("--peer", nargs="+", default=[], choices=list(PEERS),
                   help="also time these RIFE releases (their wheels installed: model/peers.py)")
    p.add_argument("--network", nargs="+", default=None, metavar="KEY=VALUE",
                   help="time a changed NetworkConfig with random weights (e.g. flow_finest_level=0), as train.py")
    args = p.parse_args(argv)
    device = require_cuda()
    if device is None:
        return 2
    changed = args.network or args.width is not None
    if args.weights and changed:
        print("error: --weights excludes --network and --width (random weights time the same)",
              file=sys.stderr)
        return 2
    try:
        config = NetworkConfig().sized(args.width).with_overrides(args.network or [])
    except ValueError as exc:
        print(f"error: --width or --network: {exc}", file=sys.stderr)
        return 2
    net = load_weights(args.weights, device) if args.weights else Network(config).to(device).eval()
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
        graphed = GraphedNetwork(net, one.shape, [0.5], torch.bfloat16)
        row["bf16_graph_x2_ms"] = cuda_time_ms(lambda: graphed(one, two), repeats=args.repeats)
        graphed8 = GraphedNetwork(net, one.shape, [i / 8 for i in range(1, 8)], torch.bfloat16)
        row["bf16_graph_x8_ms"] = cuda_time_ms(lambda: graphed8(one, two), repeats=args.repeats)
        graphed = graphed8 = None  # free the captured graphs' memory before the eager runs
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
        for peer in peers:
            for mode, dtype in (("fp32", None), ("fp16", torch.float16)):
                with torch.no_grad(), torch.autocast("cuda", dtype=dtype or torch.float16, enabled=dtype is not None):
                    row[f"{peer.name}_{mode}_x2_ms"] = cuda_time_ms(lambda: peer(one, two, 0.5), repeats=args.repeats)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.profile and len(rows) == 1:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                    for _ in range(3):
                        net(one, two, [0.5])
                torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=60))
        torch.cuda.empty_cache()
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
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
