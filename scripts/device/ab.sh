#!/usr/bin/env bash
# Two training chunks side by side on a two-GPU machine (nvidia-h200-x2), one per GPU: an A/B test of two
# recipes in one device command. Both start from what their options say (e.g. the fast weights at their step,
# 40000: a new warm-up and cosine from there needs --schedule-start 40000).
#
#   carry: .data/footage (and .data/middlebury with MIDDLEBURY=.data/middlebury to score the kept weights)
#   bash scripts/device/ab.sh MINUTES "OPTIONS A" "OPTIONS B"
#   e.g. W="--init-weights weights/fast.safetensors --schedule-start 40000 --total-steps 7000"
#        bash scripts/device/ab.sh 8.5 "$W" "$W --native-share 0"
#
# Results: $OUT/a and $OUT/b, each laid out as scripts/device/chunk.sh leaves $OUT (6 files in all, so 2 more of
# the call's own fit in the 8 a call returns).
set -uo pipefail
minutes=${1:?minutes of training}
root=${OUT:?run this on the device machine, where OUT is set}
here=$(cd "$(dirname "$0")" && pwd)
pids=()
for run in a b; do
    if [ "$run" = a ]; then options=${2:?options of run A}; gpu=0; else options=${3:?options of run B}; gpu=1; fi
    mkdir -p "$root/$run"
    # shellcheck disable=SC2086  # the options are meant to split into words
    CUDA_VISIBLE_DEVICES=$gpu OUT="$root/$run" bash "$here/chunk.sh" "$minutes" $options \
        > "$root/$run.txt" 2>&1 &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for run in a b; do echo "== $run"; cat "$root/$run.txt"; rm "$root/$run.txt"; done
exit $status
