#!/usr/bin/env bash
# The product's held-out measures of one or more weights files in bf16, as one device command: for each file,
# videos (`--motion quadratic --flow-scale auto`, as run.py --video runs the default network) on the standard and
# fresh triplet sets, and image pairs (flow at scale 1) on the standard set: the measures rules such as A4 ask for.
#
#   HOLDOUT=.data/bundles_holdout/0 bash scripts/device/score.sh W.safetensors [W2.safetensors ...]
#
# HOLDOUT (carried, a `training.stage pack --held-out-only` bundle) is unpacked to ~/vfi/hold first; without it the
# clips must be there from an earlier call of the lease. The jobs (three per file) are spread over the machine's
# GPUs, one process per GPU at a time, each with cores / GPUs threads: four processes with their default thread
# pools side by side on a 64-core machine did not finish in 420 s what one process alone does in 60 (session 48).
# Results: $OUT/NAME.{videos_standard,videos_fresh,pairs_standard}.json (NAME: the file's name without
# .safetensors), and each job's last lines on stdout: three files per weights file, so two files fit the 8 files a
# call returns.
set -uo pipefail
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
out=${OUT:?run this on the device machine, where OUT is set}
[ $# -ge 1 ] || { echo "give at least one weights file" >&2; exit 2; }
hold=~/vfi/hold
if [ -n "${HOLDOUT:-}" ]; then
    python3 -m training.stage unpack "$HOLDOUT" --dest "$hold" --cache /dev/shm/vfi-hold-cache | tail -1
fi
gpus=$(nvidia-smi -L | wc -l)
[ "$gpus" -ge 1 ] || { echo "no GPU listed by nvidia-smi" >&2; exit 2; }
threads=$(( $(nproc) / gpus ))
export OMP_NUM_THREADS=$(( threads > 0 ? threads : 1 ))
jobs=()  # WEIGHTS|MEASURE|training.holdout options
for weights in "$@"; do
    jobs+=("$weights|videos_standard|--motion quadratic --flow-scale auto --set standard")
    jobs+=("$weights|videos_fresh|--motion quadratic --flow-scale auto --set fresh")
    jobs+=("$weights|pairs_standard|--set standard")
done
run_job() {  # GPU JOB
    local weights measure options name
    IFS='|' read -r weights measure options <<<"$2"
    name=$(basename "$weights" .safetensors)
    # shellcheck disable=SC2086  # the options are meant to split
    CUDA_VISIBLE_DEVICES=$1 python3 -m training.holdout --data "$hold/footage" "$hold/footage2" --device cuda --bf16 \
        --weights "$weights" $options --json "$out/$name.$measure.json" >"$out/$name.$measure.txt" 2>&1
}
status=0
pids=()
for ((gpu = 0; gpu < gpus && gpu < ${#jobs[@]}; gpu++)); do
    ( code=0
      for ((j = gpu; j < ${#jobs[@]}; j += gpus)); do run_job "$gpu" "${jobs[$j]}" || code=1; done
      exit $code ) &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for job in "${jobs[@]}"; do
    IFS='|' read -r weights measure _ <<<"$job"
    name=$(basename "$weights" .safetensors)
    echo "== $name $measure"
    tail -3 "$out/$name.$measure.txt"
    rm -f "$out/$name.$measure.txt"
done
exit $status
