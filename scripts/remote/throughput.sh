#!/usr/bin/env bash
# The training step's throughput as train.py runs it, settings side by side in one job (docs/performance.md,
# Training step): each arm trains the same recipe from the same seed for STEPS steps on the footage in DATA (default
# .data/footage) and leaves its loss log in OUTPUT/log-ARM.jsonl, so the arms' losses per step compare as well.
#
#   bash scripts/remote/throughput.sh OUTPUT STEPS [train.py options for every arm]
#
# The arms: "graph" (--cuda-graph, today's setting) and "compile" (--cuda-graph --compile). The rate printed is
# train.py's own (steps over the chunk's wall time, the first step's compiling included).
set -euo pipefail
out=${1:?the output folder}
steps=${2:?steps per arm}
shift 2
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
mkdir -p "$out"
for arm in graph compile; do
    extra=(--cuda-graph)
    if [ "$arm" = compile ]; then extra+=(--compile); fi
    rm -rf "/tmp/throughput-$arm"
    start=$(date +%s)
    python3 train.py --data "${DATA:-.data/footage}" --out "/tmp/throughput-$arm" --max-steps "$steps" \
        --val-every 1000000 --val-batches 1 --minutes 60 "${extra[@]}" "$@" 2>&1 | grep "steps/s" | sed "s/^/$arm: /"
    echo "$arm: $(( $(date +%s) - start )) s in all, set-up and the last validation included"
    cp "/tmp/throughput-$arm/log.jsonl" "$out/log-$arm.jsonl"
done
