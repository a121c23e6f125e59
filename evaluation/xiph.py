"""Xiph (the SoftSplat paper's protocol): eight Netflix 4K clips from media.xiph.org, their first 100 frames; every
even frame is made from its two neighbours (``method.interpolate``, t = 0.5) and scored on uint8 (PSNR, scikit-image's
SSIM, the detail kept: ``evaluation.metrics.uint8_scores``). Two variants: "resized" (frames resized to 2048 x 1080
with INTER_AREA) and "cropped" (the centre 2048 x 1080). A clip is a ``<clip>.y4m`` file or a ``<clip>/`` folder of
frames (png, sorted by name). Nothing is fetched: ``SOURCE`` names the clips.

Importing this module does not import torch (a tool checks its data first).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from evaluation.methods import Benchmark, Method

CLIPS = ("BoxingPractice", "Crosswalk", "DrivingPOV", "FoodMarket", "FoodMarket2", "RitualDance",
         "SquareAndTimelapse", "Tango")
SOURCE = ("the first 100 frames of media.xiph.org/video/derf/ElFuente/Netflix_<clip>_4096x2160_60fps_10bit_420.y4m "
          f"for <clip> in {', '.join(CLIPS)}")
VARIANTS = ("resized", "cropped")
# whole frames, as the paper's protocol scores them; otherwise the user's defaults
XIPH = Benchmark("Xiph", engine=(("tile", 0),), note="uint8 output, t = 0.5")


def find_clips(data: Path, names: Optional[Sequence[str]] = None) -> List[Path]:
    """The clips of ``data`` (``names``, or every ``<clip>.y4m`` and ``<clip>/`` there), as paths; a ValueError says
    which is missing and where the clips come from."""
    if not data.is_dir():
        raise ValueError(f"{data} does not exist: pass --data, a folder of <clip>.y4m files or <clip>/ frame folders "
                         f"({SOURCE}; nothing is downloaded)")
    names = names or sorted({p.stem for p in data.iterdir() if p.suffix == ".y4m" or p.is_dir()})
    sources = []
    for name in names:
        y4m, folder = data / f"{name}.y4m", data / name
        if not (y4m.is_file() or folder.is_dir()):
            raise ValueError(f"clip {name} not found in {data} (as {name}.y4m or {name}/)")
        sources.append(y4m if y4m.is_file() else folder)
    if not sources:
        raise ValueError(f"no clips in {data}: expected <clip>.y4m files or <clip>/ folders")
    return sources


def frames_of(source: Path, limit: int) -> Iterator[np.ndarray]:
    """The first ``limit`` frames of a clip, H x W x 3 float RGB in [0, 1]."""
    from softsplat_vfi.media.images import read_image
    from softsplat_vfi.media.y4m import read_y4m

    if source.suffix == ".y4m":
        yield from read_y4m(source, limit)
        return
    files = sorted(p for p in source.iterdir() if p.suffix.lower() in (".png", ".tif", ".tiff", ".bmp"))
    for path in files[:limit]:
        yield read_image(path)[0]


def variant(frame: np.ndarray, kind: str, size: Tuple[int, int]) -> np.ndarray:
    """The frame resized to ``size`` (W, H) with INTER_AREA, or its centre crop of that size."""
    import cv2

    w, h = size
    if kind == "resized":
        return cv2.resize(frame, (w, h), interpolation=cv2.INTER_AREA)
    fh, fw = frame.shape[:2]
    if fh < h or fw < w:
        raise ValueError(f"a {fw}x{fh} frame is smaller than the {w}x{h} crop")
    top, left = (fh - h) // 2, (fw - w) // 2
    return frame[top:top + h, left:left + w]


def evaluate_clip(method: Method, source: Path, kinds: Sequence[str], size: Tuple[int, int],
                  limit: int) -> Dict[str, Dict]:
    """Mean PSNR, SSIM and detail kept of ``method`` on one clip, per variant."""
    from evaluation.metrics import to_integer, uint8_scores

    scores: Dict[str, List[Tuple[float, float, float]]] = {k: [] for k in kinds}
    window: List[Dict[str, np.ndarray]] = []
    for index, frame in enumerate(frames_of(source, limit)):
        window.append({k: variant(frame, k, size) for k in kinds})
        window = window[-3:]
        # frame index-1 is even and has both neighbours: interpolate it from them
        if len(window) == 3 and (index - 1) % 2 == 0:
            for k in kinds:
                mid = method.interpolate(window[0][k], window[2][k], 0.5)
                scores[k].append(uint8_scores(mid, to_integer(window[1][k])))
    if not scores[kinds[0]]:
        raise ValueError(f"{source}: fewer than 3 frames, nothing to interpolate")
    return {k: {**{m: float(np.mean([s[i] for s in v])) for i, m in enumerate(("psnr", "ssim", "detail"))},
                "frames": len(v)} for k, v in scores.items()}
