#!/usr/bin/env bash
# Training throughput on 1, 2, 4, ... N GPUs of one machine (issue 26's scaling table), as one device command:
#
#   bash scripts/device/scaling.sh MINUTES [train.py options]
#
# Footage staged first as for study.sh (python3 -m training.stage unpack .data/bundles/K --dest ~/vfi/data
# --cache /dev/shm/vfi-cache, one call per bundle while the machine stays warm). Each process count trains the
# study recipe at width 2 (the quality model's size) from scratch for MINUTES after set-up, without CUDA graphs
# (they are single-process only; the one-process row is also given with them); each process on its own shard,
# batch 32 per process (the recipe's). Prints one line per run and writes $OUT/scaling.json: steps/s between the
# first and last 100-step log entries, samples/s = steps/s x processes x batch, efficiency = samples/s /
# (processes x the one-process samples/s without graphs).
# DATA (default ~/vfi/data) and CACHE (default /dev/shm/vfi-cache) override where the footage is.
set -euo pipefail
minutes=${1:?minutes of training per process count}
shift
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
out=${OUT:?run this on the device machine, where OUT is set}
data=${DATA:-~/vfi/data}
cache=${CACHE:-/dev/shm/vfi-cache}
gpus=${GPUS:-$(python3 -c "import torch; print(max(1, torch.cuda.device_count()))")}  # GPUS: at most this many processes
counts=(1)
n=2
while [ "$n" -le "$gpus" ]; do counts+=("$n"); n=$((n * 2)); done
run_one() {  # NAME PROCESSES [extra train.py options]: prints "NAME PROCESSES"
    local name=$1 procs=$2
    shift 2
    local launcher=(python3)
    if [ "$procs" -gt 1 ]; then launcher=(torchrun --standalone --nproc_per_node "$procs"); fi
    rm -rf "/tmp/scaling/$name"
    "${launcher[@]}" train.py --data "$data"/footage "$data"/footage2 --frame-cache "$cache" --out "/tmp/scaling/$name" \
        --recipe study --width 2 --minutes "$minutes" --val-every 1000000 "$@" >"/tmp/scaling/$name.txt" 2>&1 \
        || tr '\r' '\n' <"/tmp/scaling/$name.txt" | grep -v "it/s" | tail -3 >&2
    echo "$name $procs"
}
mkdir -p /tmp/scaling
{
    run_one graph-1 1 --cuda-graph "$@"
    for n in "${counts[@]}"; do run_one "ddp-$n" "$n" "$@"; done
} | tee /tmp/scaling/runs.txt
# the rate between the first and the last of the log's 100-step entries: set-up, graph capture and the run's
# final validation are left out
python3 - "$out/scaling.json" <<'PY'
import json, sys
from pathlib import Path
rows, base = [], None
for line in open("/tmp/scaling/runs.txt"):
    name, procs = line.split()
    run = Path("/tmp/scaling") / name
    log = [json.loads(x) for x in open(run / "log.jsonl")] if (run / "log.jsonl").is_file() else []
    steps = [e for e in log if "loss" in e]
    if len(steps) < 2:
        rows.append({"run": name, "processes": int(procs), "steps_per_s": None})
        continue
    rate = (steps[-1]["step"] - steps[0]["step"]) / ((steps[-1]["minutes"] - steps[0]["minutes"]) * 60)
    batch = json.load(open(run / "train_config.json"))["batch"]
    samples = rate * int(procs) * batch
    if name == "ddp-1":
        base = samples
    rows.append({"run": name, "processes": int(procs), "steps_per_s": rate, "samples_per_s": samples})
for r in rows:
    if base and r.get("samples_per_s") and r["run"].startswith("ddp"):
        r["efficiency"] = r["samples_per_s"] / (r["processes"] * base)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
for r in rows:
    print(r)
PY
