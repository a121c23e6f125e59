"""Plot validation and Middlebury PSNR against training minutes from the chunk logs (OpenCV only).

    python -m scripts.diagnose.plot_training   # writes docs/journal/training_psnr.png

Reads ``docs/journal/raw/train_chunk<N><arm>.jsonl`` (minutes since each chunk's start, validation PSNR by
step) and ``docs/journal/raw/middlebury_chunk<N><arm>.json`` (Middlebury PSNR of the weights each chunk kept,
with the kept step given in ``KEPT_STEP``). The arm is "" (arm a of an A/B test) unless ``CARRIED_ARM``
names the arm whose weights the next chunk continued from.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import List, Optional, Tuple

import cv2
import numpy as np

# step of the weights each chunk kept (its best validation); chunks 8, 9, 11-15, 22 and 27 kept none; 16-19 are the
# clean-data branch from step 31000, 20-22 continue it from chunk 18, 23-25 from chunk 21, 26-28 from chunk 25
# (27's arms were not carried on; 29-32, the anneal, were not carried on; 33-35 are session 12's runs from 28a,
# chunk 34b holds the committed weights, 35 and 36 continued it and kept none; 37-38 are session 13's runs from 28a
# with convex flow upsampling, which kept none; 39 is session 14's A/B from 28a (kept none); 40 starts a run from
# scratch (arm a carried on, 41-43 resume it; 41 validated on 4 batches, 40 and 42-43 on 16); 44-49 (session 15)
# continue it from its committed weights (chunk 43's kept step) through the anneal and kept none; 50-55 (session 16)
# restart from those weights: 50, 52, 53 with --max-nonlinearity 2, 51 with 1, 54-55 the control; none adopted;
# 56-60 (session 17) restart from them with the filter: 56/58 and 57/59 two arms (56 and 57 side by side on two
# GPUs, their minutes added as time spent), 60 a third whose last moving average is the committed weights;
# 61-65 (session 18) a run from scratch with the filter from step 0, not adopted)
KEPT_STEP = {1: 2500, 2: 6345, 3: 10000, 4: 15819, 5: 17000, 6: 20000, 7: 29000, 10: 31000, 16: 34000, 17: 36000,
             18: 42937, 19: 46000, 20: 51885, 21: 58000, 23: 64000, 24: 65000, 25: 68000, 26: 72000, 28: 73000,
             34: 75000, 43: 25000, 60: 32000}
# chunks whose arm b was carried on (its log and Middlebury file end in "b")
CARRIED_ARM = {23: "b", 24: "b", 34: "b"}
# chunks validated on 16 batches per set (session 11's anneal, 29-32, session 12's 33-36, session 13's 37-38 and
# session 14's 39, 40, 42 and 43, session 15's 44-49, session 16's 50-55, session 17's 56-60, session 18's 61-65):
# their figures are about 0.4 dB below the 4-batch ones on the same weights, so they are drawn as their own curve
VAL_16_BATCHES = set(range(29, 41)) | set(range(42, 66))


Points = List[Tuple[float, float]]


def chunk_curves(raw: Path) -> Tuple[Points, Points, Points]:
    """(minutes, validation PSNR) points of every chunk in order on 4 batches per set, the same on 16 batches
    (``VAL_16_BATCHES``), and (minutes, Middlebury PSNR) of the kept weights.

    Minutes add up over the chunks in their order (time spent), also where a chunk restarted from earlier
    weights (chunks 12, 13 and 15 from step 31000), so a kept step is looked up in its own chunk's log only.
    """
    offset = 0.0
    val, val16, middlebury = [], [], []
    n = 1
    while (raw / f"train_chunk{n}.jsonl").is_file():
        arm = CARRIED_ARM.get(n, "")
        rows = [json.loads(line) for line in (raw / f"train_chunk{n}{arm}.jsonl").read_text().splitlines() if line]
        timed = [r for r in rows if "minutes" in r]

        def minutes_at(step: int) -> float:
            return offset + min(timed, key=lambda t: abs(t["step"] - step))["minutes"]

        (val16 if n in VAL_16_BATCHES else val).extend((minutes_at(r["step"]), r["val_psnr"])
                                                       for r in rows if "val_psnr" in r)
        path = raw / f"middlebury_chunk{n}{arm}.json"
        if n in KEPT_STEP and path.is_file():
            middlebury.append((minutes_at(KEPT_STEP[n]), json.loads(path.read_text())["psnr"]))
        offset += timed[-1]["minutes"]
        n += 1
    return val, val16, middlebury


def _runs(points: Points, gap: float = 5.0) -> List[Points]:
    """``points`` split where more than ``gap`` minutes pass between neighbours (the other curve's chunks ran
    there), so no line is drawn across time a curve has no figures for."""
    runs: List[Points] = []
    for point in points:
        if runs and point[0] - runs[-1][-1][0] <= gap:
            runs[-1].append(point)
        else:
            runs.append([point])
    return runs


def draw(val: Points, val16: Points, middlebury: Points, out: Path) -> None:
    w, h, left, right, top, bottom = 900, 520, 70, 70, 40, 60
    img = np.full((h, w, 3), 255, np.uint8)
    x_max = max(m for m, _ in val + val16) * 1.05
    lo, hi = 26.0, 37.0

    def px(minutes: float, psnr: float) -> Tuple[int, int]:
        x = left + (w - left - right) * minutes / x_max
        y = top + (h - top - bottom) * (hi - psnr) / (hi - lo)
        return int(round(x)), int(round(y))

    font = cv2.FONT_HERSHEY_SIMPLEX
    for psnr in np.arange(lo, hi + 0.01, 1.0):
        y = px(0, psnr)[1]
        cv2.line(img, (left, y), (w - right, y), (230, 230, 230), 1)
        cv2.putText(img, f"{psnr:.0f}", (left - 35, y + 5), font, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
    tick = 5 if x_max <= 100 else 10 if x_max <= 250 else 25  # labels about 40 px apart or more
    for m in range(0, int(x_max) + 1, tick):
        x = px(m, lo)[0]
        cv2.putText(img, str(m), (x - 6, h - bottom + 20), font, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
    cv2.rectangle(img, (left, top), (w - right, h - bottom), (0, 0, 0), 1)
    target = px(0, 36.5)[1]
    cv2.line(img, (left, target), (w - right, target), (0, 0, 200), 1)
    cv2.putText(img, "target 36.5", (w - right - 150, target - 6), font, 0.45, (0, 0, 200), 1, cv2.LINE_AA)
    dis = px(0, 34.18)[1]
    cv2.line(img, (left, dis), (w - right, dis), (160, 160, 255), 1)
    cv2.putText(img, "DIS + warp 34.18", (left + 10, dis + 16), font, 0.45, (0, 0, 200), 1, cv2.LINE_AA)

    def curve(points: Points, colour: Tuple[int, int, int]) -> None:
        cv2.polylines(img, [np.array([px(m, p) for m, p in run], np.int32) for run in _runs(points)], False, colour,
                      2, cv2.LINE_AA)

    curve(val, (200, 120, 0))
    if val16:
        curve(val16, (200, 0, 200))
        cv2.putText(img, "same, 16 batches per set", (left + 300, px(0, 27.4)[1]), font, 0.5, (200, 0, 200), 1,
                    cv2.LINE_AA)
    mb = sorted(middlebury)
    cv2.polylines(img, [np.array([px(m, p) for m, p in mb], np.int32)], False, (0, 150, 0), 2, cv2.LINE_AA)
    for m, p in mb:
        cv2.circle(img, px(m, p), 4, (0, 150, 0), -1, cv2.LINE_AA)
    cv2.putText(img, "Middlebury PSNR of kept weights", (left + 300, px(0, 32.0)[1]), font, 0.5, (0, 150, 0), 1,
                cv2.LINE_AA)
    cv2.putText(img, "validation PSNR (held-out footage)", (left + 300, px(0, 28.0)[1]), font, 0.5, (200, 120, 0), 1,
                cv2.LINE_AA)
    cv2.putText(img, "training minutes (one H200)", (w // 2 - 100, h - 15), font, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
    cv2.putText(img, "PSNR dB", (5, top - 12), font, 0.5, (0, 0, 0), 1, cv2.LINE_AA)
    if not cv2.imwrite(str(out), img):
        raise OSError(f"could not write {out}")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--raw", type=Path, default=Path("docs/journal/raw"),
                   help="the raw run files: train_chunk*.jsonl and middlebury_chunk*.json")
    p.add_argument("--out", type=Path, default=Path("docs/journal/training_psnr.png"))
    args = p.parse_args(argv)
    draw(*chunk_curves(args.raw), args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
