"""Where a training step's time goes on the GPU: sampling a batch, and forward+backward+update.

    python -m bench.bench_train --data .data/footage [--batch 32] [--crop 256] [--profile] [--cuda-graph]
                                [--pageable-uploads]

Times are wall-clock per step with the GPU synchronised at both ends, so host-side
stalls (a sampler that waits for the GPU) show up as they do in train.py.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, List, Optional

import torch

from bench.timing import require_cuda
from model import Network
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


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--crop", type=int, default=256)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--profile", action="store_true", help="print the top CUDA kernels of one step")
    p.add_argument("--cuda-graph", action="store_true",
                   help="also time the step as train.py --cuda-graph runs it (recorded once, replayed)")
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
    gen = torch.Generator().manual_seed(0)
    clips = load_clips(args.data, None, device, args.crop, exclude=VALIDATION_CLIPS)
    sampler = FootageSampler(clips, args.crop, generator=gen)
    n_syn = round(args.batch * 0.3)

    def sample():
        real = sampler.batch(args.batch - n_syn)
        syn = synthetic_batch(sampler, n_syn, args.crop, gen=gen)
        return {k: torch.cat([real[k], syn[k]], 0) for k in ("one", "mid", "two", "t")}

    print(f"{torch.cuda.get_device_name()}: batch {args.batch}, crop {args.crop}, "
          f"{'pageable' if args.pageable_uploads else 'pinned'} uploads")
    print(f"sample a batch (footage + synthetic): {per_step_ms(sample, args.steps):.1f} ms")
    net = Network().to(device).to(memory_format=torch.channels_last)
    optim = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)
    batch = {k: v.contiguous(memory_format=torch.channels_last) if v.dim() == 4 else v
             for k, v in sample().items()}

    # the trainer's step: its loss module (no synthetic flow term: the batch here carries no ground truth) and update
    def step_loss():
        return StepLoss(TrainStep(net), args.batch - n_syn, args.batch, 1.0, 0.0, True)

    def update(loss):
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optim.step()

    eager = step_loss()

    def train_step(b=batch):
        update(eager(b["one"], b["two"], b["t"], b["mid"])[0])

    step_ms = per_step_ms(train_step, args.steps)
    both_ms = per_step_ms(lambda: train_step(sample()), args.steps)
    print(f"forward+backward+update on a fixed batch: {step_ms:.1f} ms")
    print(f"sample + step, as train.py does: {both_ms:.1f} ms ({1e3 / both_ms:.1f} steps/s)")
    if args.cuda_graph:
        # a module of its own: make_graphed_callables replaces the forward of the module it records
        graphed = torch.cuda.make_graphed_callables(step_loss(), (batch["one"], batch["two"], batch["t"], batch["mid"]))

        def graphed_step(b=batch):
            update(graphed(b["one"], b["two"], b["t"], b["mid"])[0])

        graph_ms = per_step_ms(graphed_step, args.steps)
        graph_both_ms = per_step_ms(lambda: graphed_step(sample()), args.steps)
        print(f"--cuda-graph: fixed batch {graph_ms:.1f} ms; sample + step {graph_both_ms:.1f} ms "
              f"({1e3 / graph_both_ms:.1f} steps/s)")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            train_step(sample())
            torch.cuda.synchronize()
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25))
    return 0


if __name__ == "__main__":
    sys.exit(main())
