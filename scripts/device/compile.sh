#!/usr/bin/env bash
# run.py --video with and without --compile on one GPU, as one device command:
#   carry .data/bin (ffmpeg.xz) and .data/ddp (the clip grounded-sam2__car.mp4)
#   bash scripts/device/compile.sh
# Prints wall times (compilation included) and the PSNR between the two outputs' frames.
set -uo pipefail
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/ffmpeg.sh"
make_test_clip 1920:1080 120 /tmp/in1080.mp4
for variant in eager compile; do
    extra=()
    [ "$variant" = compile ] && extra=(--compile)
    start=$(date +%s.%N)
    python3 run.py --video /tmp/in1080.mp4 --out "/tmp/$variant.mp4" --bf16 --preset veryfast "${extra[@]}" 2>&1 | tail -2
    echo "$variant: $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s wall"
done
python3 - <<'PY'
import cv2, numpy as np
a, b = cv2.VideoCapture("/tmp/eager.mp4"), cv2.VideoCapture("/tmp/compile.mp4")
psnrs = []
while True:
    ok1, f1 = a.read(); ok2, f2 = b.read()
    if not (ok1 and ok2):
        break
    mse = np.mean((f1.astype(np.float64) - f2.astype(np.float64)) ** 2)
    psnrs.append(99.0 if mse == 0 else 10 * np.log10(255 ** 2 / mse))
print(f"frames compared {len(psnrs)}, PSNR compiled vs eager: min {min(psnrs):.2f} mean {np.mean(psnrs):.2f} dB")
PY
