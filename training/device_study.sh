#!/usr/bin/env bash
# The scaling study's arms as one device command, side by side on one GPU (issue 28; docs/training.md).
#
#   bash training/device_study.sh MINUTES new|resume
#
# Footage must be staged first (python -m training.stage unpack, one call per bundle; checked here). Each arm
# trains from the frame cache under ~/vfi/runs/ARM (kept on the machine between calls of one lease: the larger
# arms' states do not fit a device call's 64 MiB) and returns its log and its kept weights (fp16; files over
# 15 MiB split into .partN, joined with cat). ARMS overrides the arms: "name:width:folders ..." (folders: all,
# or one footage folder's name).
set -euo pipefail
minutes=${1:?minutes of training}
mode=${2:?new or resume}
export PYTHONUNBUFFERED=1
out=${OUT:?run this on the device machine, where OUT is set}
data=~/vfi/data
cache=~/vfi/cache
runs=~/vfi/runs
if [ -n "${BUNDLE:-}" ]; then  # the last bundle travels with this call
    python3 -m training.stage unpack "$BUNDLE" --dest "$data" --cache "$cache"
fi
python3 -m training.stage check --dest "$data" --cache "$cache"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
arms=${ARMS:-"x1-old:1:footage x1-all:1:all x2-all:2:all x3-all:3:all"}
recipe=(--synthetic-share 0.5 --small-motion-share 0.3 --synthetic-edge 1 --synthetic-edge-share 0.3
        --synthetic-layers 4 --synthetic-motion 2 --native-share 0.25 --downscale-share 1.0 --paste-share 0.3
        --ema 0.999 --cuda-graph --total-steps 40000 --seed 80)
pids=()
for arm in $arms; do
    IFS=: read -r name width folders <<<"$arm"
    mkdir -p "$runs/$name"
    if [ "$mode" = new ]; then
        start=(--width "$width" "${recipe[@]}")
        if [ "$folders" != all ]; then start+=(--train-folders "$folders"); fi
    else
        start=(--resume "$runs/$name" --cuda-graph)
    fi
    # each run ends on its own (--minutes) well inside the device call; timeout is the backstop that leaves time to
    # collect the results below (a run stopped by it keeps its state of the last validation)
    timeout "${LIMIT:-540}" python3 train.py --data "$data/footage" "$data/footage2" --frame-cache "$cache" \
        --out "$runs/$name" --minutes "$minutes" --val-every "${VAL_EVERY:-1000}" "${start[@]}" >"$runs/$name/stdout.txt" 2>&1 &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
mkdir -p "$out/study"
for arm in $arms; do  # collect whatever each arm left, also from an arm that failed
    name=${arm%%:*}
    { grep -v "it/s\]" "$runs/$name/stdout.txt" | tail -4 | sed "s/^/$name: /"; } || true
    for f in log.jsonl stdout.txt config.json train_config.json; do
        cp "$runs/$name/$f" "$out/study/$name.$f" 2>/dev/null || true
    done
    if [ -f "$runs/$name/weights.safetensors" ]; then
        split -b 15M -d -a 1 "$runs/$name/weights.safetensors" "$out/$name.weights.safetensors.part"
    fi
done
tar cf "$out/study.tar" -C "$out" study
rm -r "$out/study"
exit $status
