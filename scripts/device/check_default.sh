#!/usr/bin/env bash
# The default weights on the GPU, as one device command (carry .data/middlebury, and the held-out bundle for
# HOLDOUT):
#   MIDDLEBURY=.data/middlebury [HOLDOUT=.data/bundles_holdout/0] bash scripts/device/check_default.sh
# With HOLDOUT (a `training.stage pack` bundle of the held-out clips' footage folders) the held-out margin in bf16
# first; then Middlebury on the GPU (to compare with the CPU's figure: within 0.05 dB), the cuda-marked tests, the
# network's time at 720p, 1080p and 4K (bf16, CUDA graph and eager) and the time of a 2- and 4-pass ensemble (bf16,
# eager: ensembles are not replayed as graphs), the times from bench/bench_network.py. Each step runs even if one
# before it fails; the results come back under $OUT.
set -uo pipefail
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
source "$(dirname "${BASH_SOURCE[0]}")/hold.sh"  # stage_holdout, holdout_bf16
out=${OUT:?run this on the device machine, where OUT is set}
weights=weights/network.safetensors
if [ -n "${HOLDOUT:-}" ]; then
    stage_holdout "$HOLDOUT"
    holdout_bf16 --weights "$weights" --json "$out/holdout_bf16.json" | tail -2
fi
python3 benchmark_middlebury.py --data "${MIDDLEBURY:?carry .data/middlebury and set MIDDLEBURY}" --device cuda \
    --weights "$weights" --json "$out/middlebury_gpu.json" | tail -1
python3 -m pytest -m cuda tests/ -q -rf 2>&1 | tail -8
# one JSON row per size on stdout (ensemble times as bf16_ensemble{2,4}_x2_ms), then the table
python3 -m bench.bench_network --weights "$weights" --sizes 720p 1080p 4K --ensembles 2 4 --json "$out/bench_network.json"
