#!/usr/bin/env bash
# The default weights on the GPU, as one device command (carry .data/middlebury):
#   MIDDLEBURY=.data/middlebury bash scripts/device/check_default.sh
# Middlebury on the GPU (to compare with the CPU's figure: within 0.05 dB), the cuda-marked tests, the network's
# time at 1080p (bf16, CUDA graph and eager) and the time of a 2- and 4-pass ensemble (bf16, eager: ensembles are
# not replayed as graphs). Each step runs even if one before it fails; the results come back under $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
out=${OUT:?run this on the device machine, where OUT is set}
weights=weights/network.safetensors
python3 benchmark_middlebury.py --data "${MIDDLEBURY:?carry .data/middlebury and set MIDDLEBURY}" --device cuda \
    --weights "$weights" --json "$out/middlebury_gpu.json" | tail -1
python3 -m pytest -m cuda tests/ -q -rf 2>&1 | tail -8
python3 -m bench.bench_network --weights "$weights" --sizes 1080p --json "$out/bench_network.json" | tail -3
python3 - "$weights" <<'PY' | tee "$out/ensemble_ms.txt"
import sys

import torch

from bench.timing import cuda_time_ms
from model import load_weights
from model.ensemble import with_ensemble

net = load_weights(sys.argv[1], torch.device("cuda")).eval()
one, two = (torch.rand(1, 3, 1080, 1920, device="cuda") for _ in range(2))
for passes in (1, 2, 4):
    runner = with_ensemble(net, passes)

    def call():
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            return runner(one, two, [0.5])

    print(f"1080p, bf16 eager, {passes} pass(es): {cuda_time_ms(call, repeats=20):.1f} ms")
PY
