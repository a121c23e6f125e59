#!/usr/bin/env bash
# Issue 85's measurement on one GPU machine, in one call: the video pipeline's stage table (bench.bench_video
# --clips) for the synthetic clip and a natural one side by side at 1080p x2, then the issue's own rows (the bench
# without --clips, as filed: float32; and with --bf16, as run.py runs the network) on the issue's clip.
#
#   bash scripts/remote/video_stages.sh OUTPUT [NATURAL_CLIP] [FRAMES]
#
# NATURAL_CLIP defaults to the first of .data/bench/grounded-sam2__car.mp4 (carry .data/bench), ~/vfi/data/footage/ and
# .data/footage/ that exists: the footage clip of a highway seen from above, 960x540 at 25/s (halved from 1080p), 168
# frames, which the bench loops to FRAMES and scales to 1080p with lanczos, as the 1080p clip of the earlier pipeline
# tables in docs/performance.md was made (no 1080p natural footage is staged). FRAMES: input frames per clip (default
# 300: the whole call in about 6 minutes; 480 is the issue's clip length). OUTPUT gets stages.json, stages.log
# and issue.log. COMPILED=1 adds each network as run.py --compile runs it (about 3 minutes more: each compiles from
# an empty cache).
#
# ffmpeg travels in two halves (ffmpeg.sh says how they are made): call 1 carries .data/ffparts/0 and runs
# `mkdir -p ~/ffparts && cp .data/ffparts/0/* ~/ffparts/`; call 2, within the 30 s the machine stays warm, carries
# .data/ffparts/1 and .data/bench and runs `bash scripts/remote/video_stages.sh $OUT`.
set -euo pipefail
out=${1:?the output folder}
natural=${2:-}
frames=${3:-300}
size=${SIZE:-1920x1080}  # (SIZE=128x72 on a CPU machine: a smoke test of this script up to the rows that need CUDA)
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
source "$(dirname "${BASH_SOURCE[0]}")/ffmpeg.sh"  # use_packed_ffmpeg
if [ -z "$natural" ]; then
    for clip in .data/bench/grounded-sam2__car.mp4 ~/vfi/data/footage/grounded-sam2__car.mp4 \
        .data/footage/grounded-sam2__car.mp4; do
        if [ -f "$clip" ]; then natural=$clip; break; fi
    done
fi
if [ -z "$natural" ] || [ ! -f "$natural" ]; then
    echo "error: no natural clip found: pass one (or carry .data/bench/grounded-sam2__car.mp4)" >&2
    exit 2
fi
mkdir -p "$out"
use_packed_ffmpeg || exit 2
ffmpeg -hide_banner -version | sed -n 1p
if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; fi
start=$(date +%s)
python3 -m bench.bench_video --clips synthetic "$natural" --size "$size" --frames "$frames" ${COMPILED:+--compiled} \
    --json "$out/stages.json" 2>&1 | tee "$out/stages.log" || echo "error: the stage table failed (exit $?)"
echo "stage table: $(( $(date +%s) - start )) s"
# the issue's clip and rows: the fast network at veryfast, float32 (the bench's default without --bf16) and bf16
clip=$(mktemp -d)/clip.mp4
ffmpeg -hide_banner -loglevel error -f lavfi -i testsrc2=size=1920x1080:rate=24 -f lavfi -i sine=f=440:r=48000 \
    -t 20 -c:v libx264 -preset fast -crf 18 -pix_fmt yuv420p -c:a aac -shortest "$clip"
for precision in "" --bf16; do
    python3 -m bench.bench_video --video "$clip" --weights softsplat_vfi/weights/fast.safetensors --preset veryfast $precision \
        2>&1 | tee -a "$out/issue.log" || echo "error: the issue's rows failed (exit $?)"
done
echo "in all: $(( $(date +%s) - start )) s"
