"""Where a training step's time goes on the GPU: sampling a batch, and forward+backward+update.

    python -m bench.bench_train --data .data/footage [--width 2] [--batch 32 64] [--crop 256]
                                [--cuda-graph] [--compile] [--compile-regions] [--profile]
                                [--pageable-uploads]

Times are wall-clock per step with the GPU synchronised at both ends, so host-side
stalls (a sampler that waits for the GPU) show up as they do in train.py. Each batch size
is timed in turn; crops/s (batch x steps/s) compares them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import torch

from bench.timing import require_cuda
from softsplat_vfi.model import Network
from softsplat_vfi.model.network import NetworkConfig, count_parameters
from training.compiled import CompiledRegions
from training.config import VALIDATION_CLIPS
from training.data import FootageSampler, load_clips, synthetic_batch
from training.step import StepLoss, TrainStep


def per_step_ms(fn: Callable[[], object], steps: int) -> float:
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / steps * 1e3


def rate(batch: int, ms: float) -> str:
    return f"{ms:.1f} ms ({1e3 / ms:.1f} steps/s, {batch * 1e3 / ms:.0f} crops/s)"


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--width", type=float, default=1.0, help="the network's width factor (train.py --width)")
    p.add_argument("--batch", type=int, nargs="+", default=[32], help="one or several batch sizes, timed in turn")
    p.add_argument("--crop", type=int, default=256)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--profile", action="store_true", help="print the top CUDA kernels of one step")
    p.add_argument("--cuda-graph", action="store_true",
                   help="also time the step as train.py --cuda-graph runs it (recorded once, replayed)")
    p.add_argument("--compile", action="store_true",
                   help="also time the step's forward and losses through torch.compile (compile time reported)")
    p.add_argument("--compile-regions", action="store_true",
                   help="also time the step as train.py --compile runs it: the network's regions between its custom "
                        "kernels and the losses compiled (training.compiled), eager and, with --cuda-graph, "
                        "replayed as a CUDA graph (compile time reported)")
    p.add_argument("--pageable-uploads", action="store_true",
                   help="the sampler copies its tensors to the GPU from pageable memory instead of pinning each "
                        "(training.data.to_device), to measure what pinning costs or saves")
    args = p.parse_args(argv)
    device = require_cuda()
    if device is None:
        return 2
    torch.backends.cudnn.benchmark = True
    if args.pageable_uploads:
        import training.data

        training.data.to_device = lambda x, device: x.to(device, non_blocking=True)
    config = NetworkConfig().sized(args.width)
    gen = torch.Generator().manual_seed(0)
    clips = load_clips(args.data, None, device, args.crop, exclude=VALIDATION_CLIPS)
    sampler = FootageSampler(clips, args.crop, generator=gen)
    net = Network(config).to(device).to(memory_format=torch.channels_last)
    optim = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)
    uploads = "pageable" if args.pageable_uploads else "pinned"
    print(f"{torch.cuda.get_device_name()}: width {args.width:g}, decoder widths {config.decoder_widths}, flow level "
          f"{config.flow_finest_level}, {count_parameters(net) / 1e6:.2f} M parameters, crop {args.crop}, "
          f"{uploads} uploads")

    def update(loss: torch.Tensor) -> None:
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optim.step()

    for size in args.batch:
        n_syn = round(size * 0.3)

        def sample(size: int = size, n_syn: int = n_syn) -> Dict[str, torch.Tensor]:
            real = sampler.batch(size - n_syn)
            syn = synthetic_batch(sampler, n_syn, args.crop, gen=gen)
            both = {k: torch.cat([real[k], syn[k]], 0) for k in ("one", "mid", "two", "t")}
            return {k: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v
                    for k, v in both.items()}

        batch = sample()

        # the trainer's step: its loss module (no synthetic flow term: the batch here carries no ground truth)
        def step_loss(size: int = size, n_syn: int = n_syn, compiled: bool = False) -> StepLoss:
            return StepLoss(TrainStep(net), size - n_syn, size, 1.0, 0.0, True,
                            regions=CompiledRegions(net) if compiled else None)

        def timed(module: Callable[..., Tuple[torch.Tensor, ...]], label: str) -> None:
            def train_step(b: Dict[str, torch.Tensor] = batch) -> None:
                update(module(b["one"], b["two"], b["t"], b["mid"])[0])

            fixed = per_step_ms(train_step, args.steps)
            both = per_step_ms(lambda: train_step(sample()), args.steps)
            print(f"batch {size}, {label}: fixed batch {rate(size, fixed)}; sample + step {rate(size, both)}")

        print(f"batch {size}: sample a batch (footage + synthetic): {per_step_ms(sample, args.steps):.1f} ms")
        timed(step_loss(), "eager")
        if args.cuda_graph:
            # a module of its own: make_graphed_callables replaces the forward of the module it records
            timed(torch.cuda.make_graphed_callables(step_loss(), (batch["one"], batch["two"], batch["t"],
                                                                  batch["mid"])), "--cuda-graph")
        def compiled_then_timed(module: Callable[..., Tuple[torch.Tensor, ...]], label: str) -> None:
            """The first step (compiling), reported apart, then ``timed``."""
            start = time.perf_counter()
            update(module(batch["one"], batch["two"], batch["t"], batch["mid"])[0])
            torch.cuda.synchronize()
            print(f"batch {size}, {label}: first step (compiling) {time.perf_counter() - start:.0f} s")
            timed(module, label)

        if args.compile:
            compiled_then_timed(torch.compile(step_loss()), "torch.compile")
        if args.compile_regions:
            regions = step_loss(compiled=True)
            compiled_then_timed(regions, "--compile")
            if args.cuda_graph:
                timed(torch.cuda.make_graphed_callables(regions, (batch["one"], batch["two"], batch["t"],
                                                                  batch["mid"])), "--compile --cuda-graph")
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            eager = step_loss()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                b = sample()
                update(eager(b["one"], b["two"], b["t"], b["mid"])[0])
                torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=20))
        print(f"batch {size}: peak memory {torch.cuda.max_memory_allocated() / 2 ** 30:.1f} GiB", flush=True)
        torch.cuda.reset_peak_memory_stats()
    return 0


if __name__ == "__main__":
    sys.exit(main())
