#!/usr/bin/env bash
# Rule AC's measures (docs/quality.md) of one or more weights files on a lent GPU machine, through the product's
# path at the engine's defaults (precision auto, CUDA graphs) with the default network's flow scale (auto): the
# held-out pairs and the video path (quadratic) on the standard set, per triplet and per clip, with detail kept.
# The two run side by side on the one GPU, each with half the cores. The pattern set's filmed scenes need ffmpeg,
# which that machine lacks (imageio-ffmpeg's wheel is over a call's 64 MiB), so `bench.patterns` scores the weights
# on a machine that has it.
#
#   DATA=FOLDER bash scripts/remote/screen_score.sh OUTPUT W.safetensors [W2.safetensors ...]
#
# DATA (default ~/vfi/data) holds the staged footage and footage2; THREADS (default half the cores) is each of the
# two processes' thread count: beside a training arm give THREADS=2, or the arm's data threads starve (F62).
# Results: OUTPUT/{pairs,video}.json and each measure's last lines on stdout.
set -uo pipefail
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
out=${1:?the output folder, then the weights files}
shift
[ $# -ge 1 ] || { echo "give at least one weights file" >&2; exit 2; }
data=${DATA:-$HOME/vfi/data}
mkdir -p "$out"
export OMP_NUM_THREADS=${THREADS:-$(( $(nproc) / 2 > 0 ? $(nproc) / 2 : 1 ))}
holdout=(python3 -m training.holdout --data "$data/footage" "$data/footage2" --flow-scale auto --weights "$@")
"${holdout[@]}" --json "$out/pairs.json" > "$out/pairs.txt" 2>&1 & p1=$!
"${holdout[@]}" --motion quadratic --json "$out/video.json" > "$out/video.txt" 2>&1 & p2=$!
status=0
for pid in $p1 $p2; do wait "$pid" || status=1; done
for measure in pairs video; do
    echo "== $measure"
    tail -6 "$out/$measure.txt"
done
exit $status
