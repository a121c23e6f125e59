"""CUDA-event timing: warm-up, many repeats, median (see METHOD.md in the docs)."""

from __future__ import annotations

import statistics
import sys
import time
from typing import Callable, Optional

import torch


def cuda_time_ms(fn: Callable[[], object], warmup: int = 5, repeats: int = 30) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def median_ms(fn: Callable[[], object], device: torch.device, repeats: int, warmup: int = 3) -> float:
    """``fn``'s median time in ms on ``device``: ``cuda_time_ms`` on a GPU; elsewhere one warm-up call, then the
    wall clock's median over ``repeats`` calls."""
    if device.type == "cuda":
        return cuda_time_ms(fn, warmup=warmup, repeats=repeats)
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(1000.0 * (time.perf_counter() - start))
    return statistics.median(times)


def copy_bandwidth_gbs(device: torch.device, nbytes: int = 2 << 30) -> float:
    """Device-to-device copy bandwidth, counting bytes read plus bytes written."""
    a = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_()
    b = torch.empty_like(a)
    ms = cuda_time_ms(lambda: b.copy_(a), warmup=3, repeats=10)
    return 2 * nbytes / (ms * 1e-3) / 1e9


def require_cuda() -> Optional[torch.device]:
    """The CUDA device for a GPU benchmark, or None after saying on stderr that one is needed."""
    if not torch.cuda.is_available():
        print("error: this benchmark needs a CUDA GPU", file=sys.stderr)
        return None
    return torch.device("cuda")
