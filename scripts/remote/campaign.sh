#!/usr/bin/env bash
# One chunk of issue 84's campaign on a lent GPU machine whose calls take at most 64 MiB and hand back at most
# 64 MiB, in files of at most 16 MiB (docs/training.md, "The campaign"). The footage is staged first
# (training.stage unpack, one call per bundle); a resumed arm's state parts are unpacked from RESUME (a folder of
# state.part-* files, default none: a fresh arm).
#
#   bash scripts/remote/campaign.sh OUTPUT MINUTES [train.py options of the arm]
#
# It trains one chunk into /tmp/campaign (resuming from the unpacked state where there is one), then leaves in
# OUTPUT the state as state.part-* (15 MiB each: the network, AdamW's moments, the moving average, the step, the
# recipe and the log; not the kept weights, which the screen does not score) and the chunk's log lines.
set -euo pipefail
out=${1:?the output folder}
minutes=${2:?minutes of training}
shift 2
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
data=${DATA:-$HOME/vfi/data}
cache=${CACHE:-/dev/shm/vfi-cache}
python3 -m training.stage check --dest "$data" --cache "$cache"
state=/tmp/campaign
resume=()
if [ -n "${RESUME:-}" ]; then
    rm -rf "$state" && mkdir -p "$state"
    cat "$RESUME"/state.part-* | tar xf - -C "$state"
    resume=(--resume "$state")
fi
mkdir -p "$out"
python3 train.py --data "$data/footage" "$data/footage2" --frame-cache "$cache" --out "$state" \
    --minutes "$minutes" "${resume[@]}" "$@" 2>&1 | grep -v "it/s\]" | grep -v "^\s*$" | tail -12 | tee "$out/chunk.log"
rm -f "$state/weights.safetensors"
tar cf - -C "$state" . | split -b 15M - "$out/state.part-"
ls -l "$out"
