#!/usr/bin/env bash
# One training chunk on a rented GPU machine that keeps nothing between jobs (docs/training.md).
#
#   bash scripts/remote/chunk.sh OUTPUT MINUTES [--recipe NAME | --resume DIR | --init-weights FILE] [train.py options]
#
# OUTPUT: the folder the job hands back. It gets train/state_model.safetensors and train/state_optim.pt (full
# precision) and small.tar with the rest: weights.safetensors (fp16, where a validation replaced the kept weights),
# the configs, progress, loss log, the moving average and the non-linearity table. Put them back together here with
# python -m training.unpack OUTPUT runs/N --resume-dir DIR, and upload DIR to resume.
# DATA names the footage folder (default .data/footage); MIDDLEBURY (optional) scores the kept weights for the log;
# NPROC=2 trains on two GPUs through torchrun (DistributedDataParallel; not with --cuda-graph).
set -euo pipefail
out=${1:?the output folder}
minutes=${2:?minutes of training}
shift 2
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
mkdir -p "$out"
launcher=(python3)
if [ "${NPROC:-1}" -gt 1 ]; then launcher=(torchrun --standalone --nproc_per_node "$NPROC"); fi
"${launcher[@]}" train.py --data "${DATA:-.data/footage}" --out "$out/train" --minutes "$minutes" --val-every 1000 "$@" 2>&1 \
    | grep -v "it/s\]" | grep -v "^\s*$" | tail -12
mkdir -p "$out/t"
cp "$out"/train/*.json* "$out/t/"
# the footage triplets' measured non-linearity (--max-nonlinearity), for the next chunk's --resume
if [ -f "$out/train/nonlinearity.pt" ]; then mv "$out/train/nonlinearity.pt" "$out/t/"; fi
if [ -f "$out/train/state_ema.safetensors" ]; then mv "$out/train/state_ema.safetensors" "$out/t/"; fi
# with MIDDLEBURY set, the kept weights are scored there for the log: evaluation only, weights are chosen by their
# validation score, never by these numbers
if [ -n "${MIDDLEBURY:-}" ] && [ -f "$out/train/weights.safetensors" ]; then
    python3 benchmark_middlebury.py --data "$MIDDLEBURY" --device auto --weights "$out/train/weights.safetensors" \
        --json "$out/t/middlebury.json" | tail -1
fi
if [ -f "$out/train/weights.safetensors" ]; then mv "$out/train/weights.safetensors" "$out/t/"; fi
tar cf "$out/small.tar" -C "$out" t
rm -r "$out/t"
rm -f "$out"/train/*.json*
