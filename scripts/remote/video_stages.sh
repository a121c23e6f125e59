#!/usr/bin/env bash
# Issue 85's measurement on one GPU machine, in one call: the video pipeline's stage table (bench.bench_video
# --clips) for the synthetic clip and a natural one side by side at 1080p x2, then the issue's own rows (the bench
# without --clips, as filed: float32; and with --bf16, as run.py runs the network) on the issue's clip.
#
#   bash scripts/remote/video_stages.sh OUTPUT [NATURAL_CLIP] [FRAMES]
#
# NATURAL_CLIP defaults to the first of .data/bench/openpose__video.mp4 (carry .data/bench), ~/vfi/data/footage/ and
# .data/footage/ that exists: the footage's largest natural clip, 1280x720 at 25/s, 205 frames, which the bench loops
# to FRAMES and scales to 1080p (no 1080p natural footage is staged). FRAMES: input frames per clip (default 360: the
# whole call in about 6 minutes; 480 is the issue's clip length). OUTPUT gets stages.json, stages.log and issue.log.
set -euo pipefail
out=${1:?the output folder}
natural=${2:-}
frames=${3:-360}
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
if [ -z "$natural" ]; then
    for clip in .data/bench/openpose__video.mp4 ~/vfi/data/footage/openpose__video.mp4 .data/footage/openpose__video.mp4
    do
        if [ -f "$clip" ]; then natural=$clip; break; fi
    done
fi
if [ -z "$natural" ] || [ ! -f "$natural" ]; then
    echo "error: no natural clip found: pass one (or carry .data/bench/openpose__video.mp4)" >&2
    exit 2
fi
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
start=$(date +%s)
python3 -m bench.bench_video --clips synthetic "$natural" --size 1920x1080 --frames "$frames" \
    --json "$out/stages.json" 2>&1 | tee "$out/stages.log"
echo "stage table: $(( $(date +%s) - start )) s"
# the issue's clip and rows: the fast network at veryfast, float32 (the bench's default without --bf16) and bf16
ffmpeg=$(python3 -c "import imageio_ffmpeg; print(imageio_ffmpeg.get_ffmpeg_exe())")
clip=$(mktemp -d)/clip.mp4
"$ffmpeg" -hide_banner -loglevel error -f lavfi -i testsrc2=size=1920x1080:rate=24 -f lavfi -i sine=f=440:r=48000 \
    -t 20 -c:v libx264 -preset fast -crf 18 -pix_fmt yuv420p -c:a aac -shortest "$clip"
for precision in "" --bf16; do
    python3 -m bench.bench_video --video "$clip" --weights weights/fast.safetensors --preset veryfast $precision \
        2>&1 | tee -a "$out/issue.log"
done
echo "in all: $(( $(date +%s) - start )) s"
