"""Which part of the network ``torch.compile`` gets wrong: each part compiled alone, against eager.

    python -m bench.compile_check [--model fast | --weights PATH] [--size 720x1280] [--fp32]
                                  [--backend inductor] [--inputs smooth] [--parts whole flow ...]

Issue 64: ``bench/bench_network.py --compile`` found the whole compiled network's frames 18.7 dB from eager on CUDA
in bf16, compared on noise frames, where the network is chaotic (it now compares on ``moving_pair``). Each part
here gets eager inputs and prints its outputs' PSNR against eager (peak: the eager output's largest magnitude, at
least 1, so flows in pixels compare too); a part at or above bench_network's MATCH_PSNR (40 dB) agrees.
``--backend aot_eager`` splits tracing errors (AOTAutograd) from Inductor's code generation.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from bench.bench_network import MATCH_PSNR, moving_pair
from softsplat_vfi.engine.interpolator import resolve_device
from softsplat_vfi.engine.options import add_flags, device_for, show_notes, weights_for
from softsplat_vfi.model import Network, load_weights
from softsplat_vfi.model.correlation import correlation
from softsplat_vfi.model.synthesis import splat_pyramid
from softsplat_vfi.model.warp import still_weight


def psnr(ref: torch.Tensor, out: torch.Tensor) -> float:
    """PSNR of ``out`` against ``ref`` with the peak ``ref``'s largest magnitude (at least 1)."""
    ref, out = ref.float(), out.float()
    peak = max(ref.abs().max().item(), 1.0)
    mse = (ref - out).pow(2).mean().item()
    return 10 * math.log10(peak ** 2 / max(mse, 1e-20))


def pair(kind: str, h: int, w: int, device: torch.device) -> Tuple[torch.Tensor, torch.Tensor]:
    """``smooth``: bench_network's check pair (``moving_pair``); ``rand``: noise, on which the network is chaotic
    (any rounding difference moves its frames by 20-30 dB, eager bf16 against eager fp32 too)."""
    if kind == "smooth":
        return moving_pair((1, 3, h, w), device)
    g = torch.Generator().manual_seed(0)
    return torch.rand(1, 3, h, w, generator=g).to(device), torch.rand(1, 3, h, w, generator=g).to(device)


def parts(net: Network, one: torch.Tensor, two: torch.Tensor) -> Dict[str, Tuple[Callable, tuple]]:
    """Each part as (function, eager inputs); the functions return a tensor or a list of tensors."""
    state = net.estimate_flow(one, two)
    feats = (net.encoder(one), net.encoder(two))
    to_t = (state.flow_fwd * 0.5, state.flow_bwd * 0.5)
    warped = (splat_pyramid(state.one, state.feats_one, to_t[0], state.metric_one),
              splat_pyramid(state.two, state.feats_two, to_t[1], state.metric_two))

    def flows_guarded(a: torch.Tensor, b: torch.Tensor) -> List[torch.Tensor]:
        flows = net.run_flow_steps(a, b, 1.0)
        return [flows.flow_fwd, flows.flow_bwd]

    return {
        "whole": (lambda a, b: net(a, b, [0.5]), (one, two)),
        "encoder": (net.encoder, (one,)),
        "flow": (lambda fa, fb: list(net.flow(fa, fb, one.shape[2:])[:2]), feats),
        "flows_guarded": (flows_guarded, (one, two)),
        # compiled, correlation takes its PyTorch path (eager CUDA: the CuPy kernel, in float32)
        "correlation": (lambda a, b: correlation(a, b, net.config.flow_radius), (feats[0][-1], feats[1][-1])),
        "still_weight": (still_weight, (one, two)),
        "metric": (net.metric, (one, two, state.flow_fwd)),
        "splat_pyramid": (splat_pyramid, (state.one, state.feats_one, to_t[0], state.metric_one)),
        "decoder": (lambda a, b: net.decoder(a, b, 0.5), warped),
        "synthesize": (lambda s: net.synthesize(s, 0.5), (state,)),
    }


def as_list(x) -> List[torch.Tensor]:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # run.py's flags; this check's own defaults: bf16 autocast on CUDA (--device cpu tries it on small frames)
    add_flags(p, only=("weights", "device", "precision"), defaults={"device": "cuda", "precision": "bf16"})
    p.add_argument("--size", default="720x1280", help="HxW")
    p.add_argument("--backend", default="inductor", help="torch.compile backend: inductor, aot_eager, eager")
    p.add_argument("--inputs", choices=["smooth", "rand"], default="smooth")
    p.add_argument("--parts", nargs="+", default=None, help="a subset of the parts (default: all)")
    args = p.parse_args(argv)
    show_notes()  # the library's notes on stderr while this tool runs
    if args.device != "cpu" and not torch.cuda.is_available():
        print("error: this check needs a CUDA GPU (or --device cpu, on small frames)", file=sys.stderr)
        return 2
    try:
        device = resolve_device(device_for(args))
        weights = weights_for(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    h, w = (int(v) for v in args.size.lower().split("x"))
    net = load_weights(weights, device)
    one, two = pair(args.inputs, h, w, device)
    dtype = torch.float16 if args.precision == "fp16" else torch.bfloat16
    autocast = torch.autocast(device.type, dtype=dtype, enabled=args.precision != "fp32")
    with torch.no_grad(), autocast:
        table = parts(net, one, two)
        names = args.parts or list(table)
        unknown = set(names) - set(table)
        if unknown:
            print(f"error: unknown parts {sorted(unknown)}: choose from {', '.join(table)}", file=sys.stderr)
            return 2
        for name in names:
            fn, inputs = table[name]
            ref = as_list(fn(*inputs))
            torch._dynamo.reset()
            start = time.perf_counter()
            out = as_list(torch.compile(fn, backend=args.backend, dynamic=False)(*inputs))
            seconds = time.perf_counter() - start
            scores = [psnr(r, o) for r, o in zip(ref, out)]
            verdict = "ok" if min(scores) >= MATCH_PSNR else "DIFFERS"
            print(f"{name:14s} {verdict:8s} psnr " + " ".join(f"{s:6.1f}" for s in scores)
                  + f"  (compile + first call {seconds:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
