#!/usr/bin/env bash
# Issue 81's measurement on one lent GPU machine: a 1080p clip with audio as `run.py --video` alone, then as
# `run.py --batch --ray local` in 4 Ray tasks sharing the one GPU (--task-gpus 0.25), both timed, and their frames
# (framemd5) and audio packets compared.
#
#   bash scripts/remote/batch_bench.sh OUTPUT [SECONDS]
#
# That machine has neither ffmpeg (ffmpeg.sh: two halves, ~/ffparts and .data/ffparts/1) nor Ray. Ray travels as
# wheels in 22-MiB parts (one fits a call beside an ffmpeg half and the tree), made here:
#     pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#         --platform manylinux2014_x86_64 -d /tmp/raywhl ray==2.60.0 jsonschema jsonschema-specifications \
#         referencing rpds-py
#     tar cf - -C /tmp/raywhl . | split -b 22M - .data/rayparts/ray.part-
# and copied there one part per call (`mkdir -p ~/rayparts && cp .data/rayparts/ray.part-a? ~/rayparts/`, the
# parts that call carries), back to back; the other packages Ray needs are on that machine. SECONDS: the clip's
# length (default 60: 12 segments of 5 s, so 4 tasks of 3). OUTPUT gets bench.log.
set -uo pipefail
out=${1:?the output folder}
seconds=${2:-60}
size=${SIZE:-1920x1080}  # (SIZE=160x96 on a CPU machine: a smoke test of this script)
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
source "$(dirname "${BASH_SOURCE[0]}")/ffmpeg.sh"  # use_packed_ffmpeg
mkdir -p "$out"
use_packed_ffmpeg || exit 2
if ! python3 -c "import ray" 2>/dev/null; then
    rm -rf /tmp/raywhl /tmp/raysite && mkdir -p /tmp/raywhl
    cat ~/rayparts/ray.part-* | tar xf - -C /tmp/raywhl || { echo "error: no Ray parts in ~/rayparts" >&2; exit 2; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/raysite \
        /tmp/raywhl/*.whl || exit 2
    export PYTHONPATH=/tmp/raysite${PYTHONPATH:+:$PYTHONPATH}
fi
now() { python3 -c "import time; print(time.time())"; }
since() { python3 -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$1"; }
work=$(mktemp -d)
clip=$work/clip.mp4
ffmpeg -y -loglevel error -f lavfi -i testsrc2=size=$size:rate=24 -f lavfi -i sine=frequency=440:sample_rate=48000 \
    -t "$seconds" -c:v libx264 -pix_fmt yuv420p -c:a aac -shortest "$clip" || exit 2
{
    if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; fi
    start=$(now)
    python3 run.py --video "$clip" --out "$work/single.mp4" -y --segment-seconds 5 2>&1 | tail -2
    echo "single: $(since "$start") s"
    mkdir -p "$work/batch"
    start=$(now)
    python3 run.py --batch "$clip" --out-dir "$work/batch" --ray local --task-gpus 0.25 --segment-seconds 5 2>&1 \
        | tail -8
    echo "batch (Ray start-up included): $(since "$start") s"
    for stream in v a; do
        for f in "$work/single.mp4" "$work/batch/clip.mp4"; do
            echo "$stream $(basename "$f"): $(ffmpeg -loglevel error -i "$f" -map "0:$stream" -c copy -f framemd5 - \
                | grep -v '^#' | md5sum | cut -c1-16)"
        done
    done
} 2>&1 | tee "$out/bench.log"
