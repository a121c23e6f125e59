"""Session 52: where the default network's time goes at 1080p on the GPU (bf16 autocast, eager), by operator.

    PYTHONPATH=. python3 docs/journal/raw/probe_s52_profile.py IMAGE [WEIGHTS] [channels_last]

IMAGE gives texture (a 1080p crop of it and the same crop moved 6 px right and 3 px down); prints the profiler's
table by CUDA time (10 calls after 5 warm-ups) and the time of the flow estimate and of the synthesis alone.
"""

from __future__ import annotations

import sys

import cv2
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from bench.timing import cuda_time_ms
from model.weights import load_weights


def main() -> int:
    image = cv2.cvtColor(cv2.imread(sys.argv[1]), cv2.COLOR_BGR2RGB)
    weights = sys.argv[2] if len(sys.argv) > 2 else "weights/network.safetensors"
    big = cv2.resize(image, (2000, 1160), interpolation=cv2.INTER_CUBIC)
    frames = [big[3 * i:3 * i + 1088, 6 * i:6 * i + 1920] for i in (0, 1)]
    one, two = (torch.from_numpy(np.ascontiguousarray(f)).permute(2, 0, 1)[None].float().div(255).cuda()
                for f in frames)
    torch.backends.cudnn.benchmark = True
    net = load_weights(weights, torch.device("cuda")).eval()
    if "channels_last" in sys.argv[3:]:
        net = net.to(memory_format=torch.channels_last)
        one, two = (x.contiguous(memory_format=torch.channels_last) for x in (one, two))
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        whole = cuda_time_ms(lambda: net(one, two, [0.5]), repeats=20)
        flow = cuda_time_ms(lambda: net.estimate_flow(one, two), repeats=20)
        state = net.estimate_flow(one, two)
        synth = cuda_time_ms(lambda: net.synthesize(state, 0.5), repeats=20)
        print(f"whole {whole:.2f} ms, estimate_flow {flow:.2f} ms, synthesize {synth:.2f} ms (1920x1088, bf16, eager)")
        for _ in range(5):
            net(one, two, [0.5])
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                net(one, two, [0.5])
            torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=45, max_name_column_width=90))
    return 0


if __name__ == "__main__":
    sys.exit(main())
