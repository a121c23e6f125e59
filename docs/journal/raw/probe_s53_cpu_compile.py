"""Rule K (performance-history.md, session 53): the convolution stacks compiled on the CPU against the plain
network, alternating, at 960x540 in fp32. Run: PYTHONPATH=. python docs/journal/raw/probe_s53_cpu_compile.py W
[--freezing] (rule K2: Inductor's freezing on)"""

import json
import sys
import time

import numpy as np
import torch

from engine import Interpolator, InterpolatorOptions
from model import runtime

weights = sys.argv[1]
if "--freezing" in sys.argv:
    import torch._inductor.config

    torch._inductor.config.freezing = True
plain = Interpolator(InterpolatorOptions(weights=weights, device="cpu"))
net = plain.network
runtime.check_compilable = lambda device: None  # the probe's only change: the CUDA check is lifted
compiled = Interpolator(InterpolatorOptions(weights=weights, device="cpu"), network=runtime.compile_network(net))
one = np.random.default_rng(0).integers(0, 256, (540, 960, 3), dtype=np.uint8)
two = np.roll(one, 7, axis=1)
ref = plain.interpolate_integer(one, two, [0.5])[0]
start = time.perf_counter()
out = compiled.interpolate_integer(one, two, [0.5])[0]
compile_s = time.perf_counter() - start
diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
mse = float((diff ** 2).mean())
psnr = float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)
times = {"plain": [], "compiled": []}
for _ in range(5):
    for name, interp in (("plain", plain), ("compiled", compiled)):
        t = time.perf_counter()
        interp.interpolate_integer(one, two, [0.5])
        times[name].append(time.perf_counter() - t)
result = {"weights": weights, "freezing": "--freezing" in sys.argv, "compile_s": round(compile_s, 1), "psnr_vs_plain": psnr, "max_abs_diff": float(diff.max()),
          "times": {k: [round(x, 3) for x in v] for k, v in times.items()},
          "median_ratio": float(np.median(times["compiled"]) / np.median(times["plain"])),
          "fastest_ratio": min(times["compiled"]) / min(times["plain"])}
print(json.dumps(result))
