#!/usr/bin/env bash
# Trains the next chunk of one arm of issue 84's screen on a lent GPU machine, in the foreground of the call that
# runs it, and hands that chunk's state back in the same call's $OUT (F69: three loans lost an arm's first chunk when
# the machine went back between the call that trained it and the call that was to fetch it). The footage must be
# staged first.
#
#   bash scripts/remote/arm.sh WORK MINUTES [the first chunk's train.py options]
#
# WORK/chunkK holds chunk K's state parts and log lines (campaign.sh's output). The first call starts chunk 1 fresh
# (or from --init-weights where its options name them); each later call resumes from the latest complete chunk,
# without options (a resumed run keeps its own recipe). Where WORK holds no chunk and RESUME names a folder of state
# parts (carried from here after the machine went back), chunk 1 resumes from those. MINUTES: at most 7, so that the
# start, the chunk and the packing fit one 10-minute call. The last line says whether the arm reached its end.
set -euo pipefail
work=${1:?the work folder}
minutes=${2:?minutes of this chunk}
shift 2
out=${OUT:?the call output folder}
here=$(dirname "${BASH_SOURCE[0]}")
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
mkdir -p "$work"
last=0
for dir in "$work"/chunk*; do
    k=${dir##*/chunk}
    if [ -e "$dir/state.part-aa" ] && [ "$k" -gt "$last" ]; then last=$k; fi
done
next=$((last + 1))
rm -rf "$work/chunk$next"
if [ "$last" -gt 0 ]; then export RESUME="$work/chunk$last"; fi
if [ -n "${RESUME:-}" ]; then
    bash "$here/campaign.sh" "$work/chunk$next" "$minutes"  # RESUME names the state; it keeps its own recipe
else
    bash "$here/campaign.sh" "$work/chunk$next" "$minutes" "$@"
fi
cp "$work/chunk$next"/state.part-* "$work/chunk$next/chunk.log" "$out/"
python3 -c "
import json
state = '/tmp/campaign'
step = json.load(open(f'{state}/progress.json'))['step']
config = json.load(open(f'{state}/train_config.json'))
end = config['schedule_start'] + config['total_steps']
print(f'chunk $next: step {step} of {end}' + (' (the arm is done)' if step >= end else ''))"
