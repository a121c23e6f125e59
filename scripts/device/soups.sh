#!/usr/bin/env bash
# Soups of a trained arm with the weights it started from, scored in one device command: for each share, the
# weighted average (python -m training.average --shares A B), the stripe check (scripts/diagnose/patterns.py) and
# the held-out margin in bf16 (training.holdout, all soups in one pass over the triplets).
#
#   HOLDOUT=.data/bundles_holdout/0 bash scripts/device/soups.sh ARM.safetensors BASE.safetensors A:B [A:B ...]
#
# A:B is the arm's share against the base's (5:3 is α = 0.625). The arm is usually ~/vfi/runs/NAME/last.safetensors
# (the last step) from study.sh in the same lease. The soups stay under ~/vfi/soups (rebuild the chosen one locally
# with the same command); the stripe table and the margins (holdout_bf16.json) come back under $OUT.
set -euo pipefail
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
source "$(dirname "${BASH_SOURCE[0]}")/hold.sh"  # stage_holdout, holdout_bf16
out=${OUT:?run this on the device machine, where OUT is set}
arm=${1:?the weights of the trained arm}
base=${2:?the weights it started from}
shift 2
[ "$#" -gt 0 ] || { echo "name one or more shares A:B: the share of the arm, then of the base" >&2; exit 2; }
mkdir -p ~/vfi/soups
soups=()
for share in "$@"; do
    soup=~/vfi/soups/soup_${share/:/_}.safetensors
    python3 -m training.average --out "$soup" "$arm" "$base" --shares "${share%%:*}" "${share##*:}"
    soups+=("$soup")
done
python3 -m scripts.diagnose.patterns --weights "$arm" "${soups[@]}" | tee "$out/stripes.txt"
stage_holdout "${HOLDOUT:?carry the held-out bundle and set HOLDOUT}"
holdout_bf16 --weights "$arm" "${soups[@]}" --json "$out/holdout_bf16.json"
