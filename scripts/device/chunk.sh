#!/usr/bin/env bash
# One training chunk as one device command (the GPU machine keeps nothing between calls).
#
#   carry: .data/footage and, when resuming, the lean state folder (.data/rN; see docs/training.md)
#   bash scripts/device/chunk.sh MINUTES [--recipe NAME | --resume .data/rN | --init-weights FILE] [train.py options]
#
# Writes to $OUT/train: state_model.safetensors and state_optim.pt, and $OUT/small.tar with weights.safetensors
# (fp16, where a validation replaced the kept weights), the configs, progress, loss log, the moving average
# (state_ema.safetensors, with --ema-decay above 0, as every recipe has it) and the non-linearity table (with
# --max-nonlinearity): three files, as at most 8 come back per call (an A/B call returns 6 and leaves room for 2
# more). To resume, unpack them into a state folder: python -m training.unpack FILES_AT runs/N --resume-dir .data/rN
# DATA overrides the footage folder (default .data/footage); MIDDLEBURY (optional) scores the kept weights;
# NPROC=2 trains on two GPUs through torchrun (DistributedDataParallel, batch 32 per GPU; not with --cuda-graph).
set -euo pipefail
minutes=${1:?minutes of training}
shift
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
out=${OUT:?run this on the device machine, where OUT is set}
launcher=(python3)
if [ "${NPROC:-1}" -gt 1 ]; then launcher=(torchrun --standalone --nproc_per_node "$NPROC"); fi
"${launcher[@]}" train.py --data "${DATA:-.data/footage}" --out "$out/train" --minutes "$minutes" --val-every 1000 "$@" 2>&1 \
    | grep -v "it/s\]" | grep -v "^\s*$" | tail -12
mkdir -p "$out/t"
cp "$out"/train/*.json* "$out/t/"
# the footage triplets' measured non-linearity (--max-nonlinearity), for the next chunk's --resume
if [ -f "$out/train/nonlinearity.pt" ]; then mv "$out/train/nonlinearity.pt" "$out/t/"; fi
if [ -f "$out/train/state_ema.safetensors" ]; then mv "$out/train/state_ema.safetensors" "$out/t/"; fi
# with MIDDLEBURY set (a carried folder), the kept weights are scored there for the log: evaluation only,
# runs are compared and weights chosen by their validation score, never by these numbers
if [ -n "${MIDDLEBURY:-}" ] && [ -f "$out/train/weights.safetensors" ]; then
    python3 benchmark_middlebury.py --data "$MIDDLEBURY" --device auto --weights "$out/train/weights.safetensors" \
        --json "$out/t/middlebury.json" | tail -1
fi
if [ -f "$out/train/weights.safetensors" ]; then mv "$out/train/weights.safetensors" "$out/t/"; fi
tar cf "$out/small.tar" -C "$out" t
rm -r "$out/t"
rm -f "$out"/train/*.json*
