#!/usr/bin/env bash
# One arm of the scaling study (issue 28; docs/journal/scaling-study.md) as one device command, alone on the GPU.
#
#   BUNDLE=.data/bundles/N bash scripts/device/study.sh NAME WIDTH FOLDERS MINUTES new|resume|init [train.py options]
#
# Options after the mode go to train.py (a new arm: recipe overrides such as --total-steps 5000).
# FOLDERS: all, or one footage folder's name (training clips; validation always uses every held-out clip).
# Footage must be staged first, one call per bundle while the machine stays warm:
#     python3 -m training.stage unpack .data/bundles/N --dest ~/vfi/data --cache /dev/shm/vfi-cache
# BUNDLE names the last one, unpacked by this call. The frame cache lives in /dev/shm (RAM): memory-mapped from
# the disk, random crops page-faulted and a step took 4-5 s (session 19); from RAM a batch of 16 takes 8 ms. The
# arm's state stays under ~/vfi/runs/NAME for a `resume` call in the same lease; the log, the kept weights and the
# last step's (fp16, split into 15 MiB parts, joined with cat) come back under $OUT. NPROC=N trains on N GPUs of the
# machine through torchrun (DistributedDataParallel, the recipe's batch per GPU, without CUDA graphs).
set -euo pipefail
name=${1:?arm name}
width=${2:?width factor}
folders=${3:?all or a footage folder name}
minutes=${4:?minutes of training}
mode=${5:?new, resume or init}
shift 5
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
warn_overrun "$minutes" "${LIMIT:-540}"
out=${OUT:?run this on the device machine, where OUT is set}
data=~/vfi/data
cache=/dev/shm/vfi-cache
run=~/vfi/runs/$name
if [ -n "${BUNDLE:-}" ]; then
    python3 -m training.stage unpack "$BUNDLE" --dest "$data" --cache "$cache"
fi
python3 -m training.stage check --dest "$data" --cache "$cache"
# the study's recipe (training/config.py RECIPES["study"]): the fast recipe without the non-linearity filter,
# from scratch, seed 80, one 40000-step cosine, validated on the held-out source repositories
mkdir -p "$run"
if [ "$mode" = new ]; then
    start=(--width "$width" --recipe study)
    if [ "$folders" != all ]; then start+=(--train-folders "$folders"); fi
elif [ "$mode" = init ]; then
    # an arm continued in a new lease from its committed fp16 weights (their step and recipe; fresh optimizer
    # moments, eased in over 500 steps): INIT names the weights file
    start=(--init-weights "${INIT:?INIT=weights file to continue from}" --rewarm 500)
else
    start=(--resume "$run")
fi
status=0
# the run ends on its own (--minutes, counted after set-up) well inside the call; timeout is the backstop that
# leaves time to collect the results (a run stopped by it keeps its state of the last validation)
launcher=(python3)
graph=(--cuda-graph)
if [ "${NPROC:-1}" -gt 1 ]; then launcher=(torchrun --standalone --nproc_per_node "$NPROC"); graph=(); fi
timeout "${LIMIT:-540}" "${launcher[@]}" train.py --data "$data/footage" "$data/footage2" --frame-cache "$cache" \
    --out "$run" --minutes "$minutes" --val-every "${VAL_EVERY:-1000}" "${graph[@]}" "${start[@]}" "$@" >"$run/stdout.txt" 2>&1 \
    || status=$?
{ tr '\r' '\n' <"$run/stdout.txt" | grep -v "it/s" | tail -6; } || true
mkdir -p "$out/study"
# with MIDDLEBURY set (a carried folder), the kept weights are scored there after training: evaluation only, for
# the study's table; arms are compared by their held-out margin, never by these numbers
if [ -n "${MIDDLEBURY:-}" ] && [ -f "$run/weights.safetensors" ]; then
    python3 benchmark_middlebury.py --data "$MIDDLEBURY" --device auto --weights "$run/weights.safetensors" \
        --json "$out/study/$name.middlebury.json" | tail -1 || true
fi
for f in log.jsonl stdout.txt config.json train_config.json; do
    cp "$run/$f" "$out/study/$name.$f" 2>/dev/null || true
done
returned=${RETURN:-both}  # which fp16 weights come back: kept, last or both (scripts/device/arms.sh: last)
if [ "$returned" != last ] && [ -f "$run/weights.safetensors" ]; then
    split -b 15M -d -a 1 "$run/weights.safetensors" "$out/$name.weights.safetensors.part"
fi
# the last step's moving average as well: soups (soups.sh ~/vfi/runs/NAME/last.safetensors ...) start from it
# whichever step validated best, and the kept file above is the start when no later step beat it
if [ "$returned" != kept ] && python3 -m training.export "$run" --out "$run/last.safetensors" >/dev/null; then
    split -b 15M -d -a 1 "$run/last.safetensors" "$out/$name.last.safetensors.part"
fi
tar cf "$out/study.tar" -C "$out" study
rm -r "$out/study"
exit $status
