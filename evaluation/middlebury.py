"""Middlebury interpolation (the published protocol): for every ``<Sequence>/frame10.png, frame11.png,
frame10i11.png`` the middle frame is made at native resolution (``method.interpolate``, t = 0.5), rounded to uint8 and
scored with PSNR, scikit-image's SSIM (data_range 255) and the detail kept against frame10i11
(``evaluation.metrics.uint8_scores``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List

import numpy as np

from evaluation.methods import Benchmark, Method

# whole frames, as the published protocol scores them; otherwise the user's defaults
MIDDLEBURY = Benchmark("Middlebury", engine=(("tile", 0),), note="uint8 output, t = 0.5")


def find_sequences(data: Path) -> List[Path]:
    """The <Sequence>/ folders of ``data`` that hold a frame10i11.png, in order (ValueError naming --data if none)."""
    sequences = sorted(p for p in data.iterdir() if (p / "frame10i11.png").is_file()) if data.is_dir() else []
    if not sequences:
        raise ValueError(f"no <Sequence>/frame10i11.png under {data}: pass --data pointing at the Middlebury folder")
    return sequences


def evaluate(method: Method, data: Path, progress: bool = True) -> Dict:
    """Per-sequence and mean PSNR, SSIM and detail kept of ``method`` on a Middlebury-style folder."""
    from evaluation.metrics import to_integer, uint8_scores
    from softsplat_vfi.media.images import read_image

    rows = []
    for seq in find_sequences(data):
        one, _, _ = read_image(seq / "frame10.png")
        two, _, _ = read_image(seq / "frame11.png")
        truth = to_integer(read_image(seq / "frame10i11.png")[0])
        start = time.time()
        mid = method.interpolate(one, two, 0.5)
        seconds = time.time() - start
        psnr, ssim, detail = uint8_scores(mid, truth)
        rows.append({"sequence": seq.name, "psnr": psnr, "ssim": ssim, "detail": detail, "seconds": seconds})
        if progress:
            print(f"{seq.name:12s} PSNR {psnr:6.2f}  SSIM {ssim:.4f}  detail {detail:.3f}  ({seconds:.2f}s)",
                  flush=True)
    return {"sequences": rows, **{key: float(np.mean([r[key] for r in rows])) for key in ("psnr", "ssim", "detail")}}
