#!/usr/bin/env bash
# Rule AF's runs (F84): the pipeline with segments closed behind the writing (this tree) against the tree before it
# (6fb0055), interleaved in one call on one GPU machine: the fast network in bf16 at x264 veryfast, then medium, on
# the issue's 1080p testsrc2 clip and the natural car clip (480 frames each, made as the stage table makes them),
# REPS runs per arm (default 2). Each line of OUTPUT/ab.log is "arm clip preset rep" and one of bench_video --video
# --stages's JSON lines (the pipeline with the network; decoding alone and the pipeline without a network).
#
#   bash scripts/remote/ab_segments.sh OUTPUT OLD_TREE
#
# OLD_TREE, made here before the loan (1.5 MB; the weights are linked from this tree there):
#     mkdir -p .data/ab/old && git archive 6fb0055 | tar -x -C .data/ab/old \
#         && rm -rf .data/ab/old/softsplat_vfi/weights/*.safetensors .data/ab/old/tests .data/ab/old/docs
# Two calls, as ffmpeg.sh says: the first carries .data/ffparts/0 and .data/ab; the second, within 30 s, carries
# .data/ffparts/1, .data/bench and .data/ab and runs this (about 7 minutes at REPS=2).
set -uo pipefail
out=${1:?the output folder}
old=$(cd "${2:?the tree before F84}" && pwd)
reps=${REPS:-2}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
source "$(dirname "${BASH_SOURCE[0]}")/ffmpeg.sh"  # use_packed_ffmpeg
use_packed_ffmpeg || exit 2
if command -v nvidia-smi >/dev/null; then nvidia-smi --query-gpu=name --format=csv,noheader; fi
ln -sf "$PWD"/softsplat_vfi/weights/*.safetensors "$old"/softsplat_vfi/weights/
cp bench/bench_video.py "$old"/bench/  # (both arms timed by one bench: its --stages copy row on the engine's device)
clips=$(mktemp -d)
python3 -c "
import sys
from pathlib import Path
from bench.bench_video import make_clip
for spec in ('synthetic', '.data/bench/grounded-sam2__car.mp4'):
    clip = make_clip(spec, Path(sys.argv[1]), (1080, 1920), 480)
    print(clip.path.name, clip.made, clip.info.frames)
" "$clips" | tee "$out/clips.log"
new=$PWD
for preset in veryfast medium; do
    for clip in "$clips"/synthetic.mp4 "$clips"/natural-grounded-sam2__car.mp4; do
        for rep in $(seq "$reps"); do
            for arm in before after; do
                root=$new
                [ "$arm" = before ] && root=$old
                rows=$(cd "$root" && python3 -m bench.bench_video --video "$clip" --bf16 --preset "$preset" --stages \
                    --weights softsplat_vfi/weights/fast.safetensors 2>>"$out/errors.log")
                echo "$rows" | sed "s/^/$arm $(basename "$clip") $preset $rep /" | tee -a "$out/ab.log"
            done
        done
    done
done
