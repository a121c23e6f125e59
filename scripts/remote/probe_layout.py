"""Probe (issue 85): the engine's CUDA-graph pair at 1080p with cuDNN's autotuner off/on and the network's weights
in channels_last, side by side in one process. Prints ms per pair (median of 40 integer pairs through
engine.Interpolator at its defaults) and each variant's largest difference from the first variant's frame."""

import statistics
import sys
import time

import numpy as np
import torch

from softsplat_vfi.engine import Interpolator, InterpolatorOptions
from softsplat_vfi.engine.interpolator import load_network


def frames(h: int = 1080, w: int = 1920):
    rng = np.random.default_rng(0)
    base = rng.random((h // 8 + 8, w // 8 + 8, 3)).astype(np.float32)
    import cv2

    big = cv2.resize(base, (w + 64, h + 64), interpolation=cv2.INTER_CUBIC)
    a = (np.clip(big[:h, :w], 0, 1) * 255).astype(np.uint8)
    b = (np.clip(big[6:h + 6, 9:w + 9], 0, 1) * 255).astype(np.uint8)
    return a, b


def main() -> None:
    a, b = frames()
    for weights in sys.argv[1:]:
        first = None
        for bench in (False, True):
            for layout in ("contiguous", "channels_last"):
                torch.backends.cudnn.benchmark = bench
                net = load_network(weights, torch.device("cuda"))
                if layout == "channels_last":
                    import copy

                    net = copy.deepcopy(net).to(memory_format=torch.channels_last)
                try:
                    engine = Interpolator(InterpolatorOptions(weights=weights), network=net)
                    for _ in range(8):
                        out = engine.interpolate_integer(a, b, [0.5])[0]
                    times = []
                    for _ in range(40):
                        torch.cuda.synchronize()
                        start = time.perf_counter()
                        out = engine.interpolate_integer(a, b, [0.5])[0]
                        torch.cuda.synchronize()
                        times.append((time.perf_counter() - start) * 1e3)
                except Exception as exc:  # a probe: say what failed and go on
                    print(weights, bench, layout, "failed:", repr(exc)[:300], flush=True)
                    continue
                first = out if first is None else first
                diff = int(np.abs(out.astype(int) - first).max())
                print(f"{weights} cudnn.benchmark={bench} {layout}: {statistics.median(times):.2f} ms "
                      f"(min {min(times):.2f}), max diff {diff}", flush=True)


if __name__ == "__main__":
    main()
