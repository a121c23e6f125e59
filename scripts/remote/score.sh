#!/usr/bin/env bash
# The product's held-out measures of one or more weights files in bf16, in one job on a GPU machine: videos
# (`--motion quadratic --flow-scale auto`, as run.py --video runs the default network) on the standard and fresh
# triplet sets, and image pairs (flow at scale 1) on the standard set.
#
#   HOLDOUT=BUNDLE bash scripts/remote/score.sh OUTPUT W.safetensors [W2.safetensors ...]
#
# HOLDOUT (an uploaded `training.stage pack --held-out-only` bundle) is unpacked to ~/vfi/hold first; without it the
# clips must be there from an earlier job on the same machine. Each measure is one training.holdout process that
# scores every weights file in one pass over the triplets (the classical baseline computed once); the three
# processes are spread over the machine's GPUs, one per GPU at a time, each with cores / GPUs threads (several
# processes with their default thread pools side by side were far slower than one alone). Results:
# OUTPUT/{videos_standard,videos_fresh,pairs_standard}.json (each holds every weights file's figures), and each
# measure's last lines on stdout.
set -uo pipefail
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
source "$(dirname "${BASH_SOURCE[0]}")/hold.sh"  # stage_holdout, holdout_bf16
out=${1:?the output folder, then the weights files}
shift
[ $# -ge 1 ] || { echo "give at least one weights file" >&2; exit 2; }
mkdir -p "$out"
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
