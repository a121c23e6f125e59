#!/usr/bin/env bash
# Checks for a machine with two GPUs (nvidia-h200-x2), as one device command:
#   carry .data/bin (ffmpeg.xz: the GPU machine has no ffmpeg) and .data/ddp (3 footage clips + clips.jsonl)
#   bash scripts/device/multi_gpu.sh
# 1. softsplat on cuda:1 against PyTorch; 2. train.py under torchrun on 2 GPUs (DDP) and on 1;
# 3. run.py --video split over 2 GPUs by torchrun against one process; 4. throughput and memory (bench.bench_video).
set -uo pipefail
out=${OUT:?run this on the device machine, where OUT is set}
export PYTHONUNBUFFERED=1
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"  # NVLink multicast off in every process started here
source scripts/device/ffmpeg.sh  # run from the repository root
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

echo "== 1. softsplat CUDA tests (cuda:0 and cuda:1)"
python3 -m pytest -m cuda tests/test_softsplat.py -q -rA > /tmp/op_tests.txt 2>&1
tail -1 /tmp/op_tests.txt
echo "of which on cuda:1: $(grep -c 'PASSED.*cuda:1' /tmp/op_tests.txt) passed, $(grep -c 'FAILED.*cuda:1' /tmp/op_tests.txt) failed"

echo "== 2. DDP training, 2 GPUs then 1 (200 steps each)"
common=(--data .data/ddp --init-weights weights/fast.safetensors --schedule-start 40000 --max-steps 200
        --val-every 100 --validation-clips davis2016-val__480p__car-shadow.mp4 --minutes 3)
torchrun --standalone --nproc_per_node 2 train.py "${common[@]}" --out /tmp/ddp2 2>&1 | grep -E "done|validation|error|Error" | tail -4
python3 train.py "${common[@]}" --out /tmp/ddp1 2>&1 | grep -E "done|validation|error|Error" | tail -4
cp /tmp/ddp2/log.jsonl "$out/ddp2_log.jsonl"

echo "== 3. video split over 2 GPUs (torchrun) vs one process"
make_test_clip 1920:1080 120 /tmp/in1080.mp4
make_test_clip 3840:2160 60 /tmp/in4k.mp4
( time torchrun --standalone --nproc_per_node 2 run.py --video /tmp/in1080.mp4 --out /tmp/split.mp4 --segment-seconds 1 ) 2>&1 | grep -E "wrote|error|real"
( time python3 run.py --video /tmp/in1080.mp4 --out /tmp/single.mp4 --segment-seconds 1 ) 2>&1 | grep -E "wrote|error|real"
python3 - <<'PY'
import hashlib, subprocess
import numpy as np
from media.video import probe, read_frames
a, b, src = probe("/tmp/split.mp4"), probe("/tmp/single.mp4"), probe("/tmp/in1080.mp4")
print("frames split/single/input:", a.frames, b.frames, src.frames, "duration:", float(a.duration), float(b.duration), float(src.duration))
worst = 99.0
for x, y in zip(read_frames(a), read_frames(b)):
    mse = np.mean((x.astype(np.float64) - y.astype(np.float64)) ** 2)
    worst = min(worst, 99.0 if mse == 0 else 10 * np.log10(255 ** 2 / mse))
print(f"split vs single: lowest per-frame PSNR {worst:.2f} dB (99 = identical)")
def audio(p):
    r = subprocess.run(["ffmpeg", "-v", "error", "-i", p, "-map", "0:a", "-c", "copy", "-f", "md5", "-"], capture_output=True, text=True)
    return r.stdout.strip()
print("audio md5 input/split/single:", audio("/tmp/in1080.mp4"), audio("/tmp/split.mp4"), audio("/tmp/single.mp4"))
PY

echo "== 4. throughput on one GPU, 16 cores (as nvidia-h200), and memory"
for v in /tmp/in1080.mp4 /tmp/in4k.mp4; do
  for prec in "" "--bf16"; do
    CUDA_VISIBLE_DEVICES=0 taskset -c 0-15 python3 -m bench.bench_video --video $v $prec 2>&1 | grep "{"
  done
done
CUDA_VISIBLE_DEVICES=0 python3 -m bench.bench_video --bf16 --memory 3840x2160 7680x4320 2>&1 | grep "{"
CUDA_VISIBLE_DEVICES=0 python3 -m bench.bench_video --bf16 --flow-scale 0.5 --memory 3840x2160 7680x4320 2>&1 | grep "{"
CUDA_VISIBLE_DEVICES=0 python3 -m bench.bench_video --bf16 --tile 2048 --memory 7680x4320 2>&1 | grep "{"
echo "== done"
