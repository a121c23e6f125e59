#!/usr/bin/env bash
# Training arms side by side on a machine of several GPUs, one GPU each (CUDA graphs, no DDP): an A/B/... test of
# recipes in one device command, each arm trained by scripts/device/study.sh on the footage staged beforehand.
#
#   bash scripts/device/arms.sh MINUTES "NAME WIDTH FOLDERS MODE [train.py options]" ["NAME ..." ...]
#   e.g. I="--recipe quality-psnr-mixed --schedule-start 84919 --holdout-flow-scale auto --validate-first"
#        INIT=weights/network.safetensors bash scripts/device/arms.sh 7.0 "ctl 2 all init $I" "syn 2 all init $I --synthetic-share 0.3"
#
# Stage the footage first (one call per bundle, as study.sh says); BUNDLE is not read here. INIT and MIDDLEBURY
# pass to every arm. The arms' states stay under ~/vfi/runs/NAME for `resume` arms in the same lease. Results:
# $OUT/NAME/ for each arm: study.tar (log, configs, stdout) and the last step's fp16 weights in 15 MiB parts
# (study.sh with RETURN=last), two files per arm, so four arms fill the 8 files a call returns.
# MINUTES count after the arms' set-up (decoding, graph capture, --validate-first: about a minute with four arms
# starting together), and study.sh stops an arm at LIMIT seconds (540): 7.0 minutes fit (env.sh's warn_overrun
# says when they do not; session 48's 8.6 were stopped after their last validation and resumed from it).
set -uo pipefail
minutes=${1:?minutes of training}
shift
[ $# -ge 1 ] || { echo "give at least one arm: \"NAME WIDTH FOLDERS MODE [options]\"" >&2; exit 2; }
root=${OUT:?run this on the device machine, where OUT is set}
limit=${LIMIT:-540}  # study.sh's stop, passed to every arm so that the warning and the stop agree
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
warn_overrun "$minutes" "$limit"
here=$(cd "$(dirname "$0")" && pwd)
gpus=$(nvidia-smi -L | wc -l)
if [ "$#" -gt "$gpus" ]; then echo "$# arms for $gpus GPUs: give at most one arm per GPU" >&2; exit 2; fi
pids=()
names=()
gpu=0
for arm in "$@"; do
    # shellcheck disable=SC2086  # the arm's words are meant to split
    set -- $arm
    name=$1 width=$2 folders=$3 mode=$4
    shift 4
    mkdir -p "$root/$name"
    CUDA_VISIBLE_DEVICES=$gpu OUT="$root/$name" RETURN=last BUNDLE= LIMIT=$limit \
        bash "$here/study.sh" "$name" "$width" "$folders" "$minutes" "$mode" "$@" > "$root/$name.txt" 2>&1 &
    pids+=($!)
    names+=("$name")
    gpu=$((gpu + 1))
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for name in "${names[@]}"; do echo "== $name"; cat "$root/$name.txt"; rm "$root/$name.txt"; done
exit $status
