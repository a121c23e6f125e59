#!/usr/bin/env bash
# The product's held-out measures of one or more weights files in bf16, as one device command: videos
# (`--motion quadratic --flow-scale auto`, as run.py --video runs the default network) on the standard and fresh
# triplet sets, and image pairs (flow at scale 1) on the standard set: the measures rules such as A4 ask for.
#
#   HOLDOUT=.data/bundles_holdout/0 bash scripts/device/score.sh W.safetensors [W2.safetensors ...]
#
# HOLDOUT (carried, a `training.stage pack --held-out-only` bundle) is unpacked to ~/vfi/hold first; without it the
# clips must be there from an earlier call of the lease. Each measure is one training.holdout process that scores
# every weights file in one pass over the triplets (the classical baseline computed once); the three processes
# are spread over the machine's GPUs, one per GPU at a time, each with cores / GPUs threads: four processes with
# their default thread pools side by side on a 64-core machine did not finish in 420 s what one process alone does
# in 60 (session 48). Results: $OUT/{videos_standard,videos_fresh,pairs_standard}.json (each holds every weights
# file's figures), and each measure's last lines on stdout.
set -uo pipefail
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
source "$(dirname "${BASH_SOURCE[0]}")/hold.sh"  # stage_holdout, holdout_bf16
out=${OUT:?run this on the device machine, where OUT is set}
[ $# -ge 1 ] || { echo "give at least one weights file" >&2; exit 2; }
if [ -n "${HOLDOUT:-}" ]; then stage_holdout "$HOLDOUT"; fi
gpus=$(nvidia-smi -L | wc -l)
[ "$gpus" -ge 1 ] || { echo "no GPU listed by nvidia-smi" >&2; exit 2; }
threads=$(( $(nproc) / gpus ))
export OMP_NUM_THREADS=$(( threads > 0 ? threads : 1 ))
measures=(videos_standard videos_fresh pairs_standard)
declare -A options=(
    [videos_standard]="--motion quadratic --flow-scale auto --set standard"
    [videos_fresh]="--motion quadratic --flow-scale auto --set fresh"
    [pairs_standard]="--set standard"
)
pids=()
for ((gpu = 0; gpu < gpus && gpu < ${#measures[@]}; gpu++)); do
    # GPU i scores measures i, i + GPUs, ...
    ( code=0
      for ((m = gpu; m < ${#measures[@]}; m += gpus)); do
          measure=${measures[$m]}
          # shellcheck disable=SC2086  # the options are meant to split
          CUDA_VISIBLE_DEVICES=$gpu holdout_bf16 --weights "$@" ${options[$measure]} --json "$out/$measure.json" \
              >"$out/$measure.txt" 2>&1 || code=1
      done
      exit $code ) &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for measure in "${measures[@]}"; do
    echo "== $measure"
    tail -3 "$out/$measure.txt"
    rm -f "$out/$measure.txt"
done
exit $status
