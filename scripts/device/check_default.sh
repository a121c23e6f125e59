#!/usr/bin/env bash
# The default weights on the GPU, as one device command (carry .data/middlebury):
#   MIDDLEBURY=.data/middlebury bash scripts/device/check_default.sh
# Middlebury on the GPU (to compare with the CPU's figure: within 0.05 dB), the cuda-marked tests, the network's
# time at 1080p (bf16, CUDA graph and eager) and the time of a 2- and 4-pass ensemble (bf16, eager: ensembles are
# not replayed as graphs), the times from bench/bench_network.py. Each step runs even if one before it fails; the
# results come back under $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
out=${OUT:?run this on the device machine, where OUT is set}
weights=weights/network.safetensors
python3 benchmark_middlebury.py --data "${MIDDLEBURY:?carry .data/middlebury and set MIDDLEBURY}" --device cuda \
    --weights "$weights" --json "$out/middlebury_gpu.json" | tail -1
python3 -m pytest -m cuda tests/ -q -rf 2>&1 | tail -8
# one JSON row per size on stdout (ensemble times as bf16_ensemble{2,4}_x2_ms), then the table
python3 -m bench.bench_network --weights "$weights" --sizes 1080p --ensembles 2 4 --json "$out/bench_network.json"
