"""Synthetic pairs with an exact middle frame, where a flow network can fail in ways footage rarely shows.

    python -m scripts.diagnose.patterns --weights weights/network.safetensors weights/fast.safetensors [--classical]

Each pattern moves rigidly by a whole number of pixels, so the middle frame is known exactly:
- ``sine``: a high-contrast stripe pattern, 56.5 px between stripes in red, over a vertical stripe pattern in green
  and a ramp in blue; shifted 2 px. Its stripes repeat, so a flow one period off matches almost as well as the
  true one (the ambiguity of fences, tiles and gratings).
- ``sine-6px``: the same shifted 6 px.
- ``blinds``: fine horizontal stripes 8 px apart (window blinds, railings) moving 2 px down, a quarter period, so
  one motion explains them; the shipped networks get it wrong (README, limits; why is not measured: at the flow
  pyramid's coarse levels such stripes alias).
- ``shapes``: flat, saturated shapes (a disc, a box, a bar) over a flat background, moving 8 px apart: cartoon-like.
- ``noise``: smooth random texture (blurred noise), shifted 2 px: the easy case.

Ours runs as run.py runs it with the same flags (evaluation/methods.py), whole frames. For each pattern and weights
file: the mean absolute error of the middle frame (8-px border left out, values in
[0, 1]), its largest error, and how many pixels are off by more than 0.1 in some channel (visible blotches).
"""

from __future__ import annotations

import argparse
import sys
from typing import Dict, List, Optional, Tuple

import numpy as np

from evaluation.methods import Benchmark, add_engine_flags, methods_of
from softsplat_vfi.engine.options import show_notes

Triple = Tuple[np.ndarray, np.ndarray, np.ndarray]


def _sine(shift: int, height: int = 200, width: int = 300) -> Triple:
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)

    def frame(dx: float) -> np.ndarray:
        x = xx - dx
        return np.stack([(np.sin(x / 9) + 1) / 2, (np.cos(yy / 11) + 1) / 2, (x + yy) / 500], axis=2)

    return frame(0), frame(shift / 2), frame(shift)


def _blinds(period: float = 8.0, shift: int = 2, height: int = 200, width: int = 300) -> Triple:
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)

    def frame(dy: float) -> np.ndarray:
        stripes = (np.sin(2 * np.pi * (yy - dy) / period) + 1) / 2 * 0.8 + 0.1
        return np.stack([stripes, stripes * 0.9 + 0.05, stripes * 0.8 + 0.1 * xx / width], axis=2)

    return frame(0), frame(shift / 2), frame(shift)


def _shapes(height: int = 256, width: int = 384) -> Triple:
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)

    def frame(dx: float) -> np.ndarray:
        img = np.empty((height, width, 3), np.float32)
        img[:] = (0.9, 0.9, 0.85)
        img[(xx - 120 - dx) ** 2 + (yy - 100) ** 2 < 50 ** 2] = (1.0, 0.0, 0.0)
        img[(np.abs(xx - 260 + dx) < 40) & (np.abs(yy - 160) < 30)] = (0.0, 0.0, 1.0)
        img[(np.abs(xx - 200) < 100) & (np.abs(yy - 230 - dx / 2) < 12)] = (1.0, 0.9, 0.0)
        return img

    return frame(0), frame(4), frame(8)


def _noise(height: int = 200, width: int = 300) -> Triple:
    import cv2

    texture = cv2.GaussianBlur(np.random.default_rng(0).random((height, width + 4, 3)).astype(np.float32), (0, 0), 3)
    texture = (texture - texture.min()) / (texture.max() - texture.min())
    return texture[:, :width], texture[:, 1:width + 1], texture[:, 2:width + 2]


def patterns() -> Dict[str, Triple]:
    """The patterns by name: (first frame, exact middle frame, second frame), H x W x 3 float32 in [0, 1]."""
    return {"sine": _sine(2), "sine-6px": _sine(6), "blinds": _blinds(), "shapes": _shapes(), "noise": _noise()}


def errors(out: np.ndarray, mid: np.ndarray, border: int = 8) -> Dict[str, float]:
    """Mean and largest absolute error, and the count of pixels off by more than 0.1 in some channel."""
    diff = np.abs(out - mid)[border:-border, border:-border]
    return {"mean": float(diff.mean()), "max": float(diff.max()), "blotch_px": int((diff.max(2) > 0.1).sum())}


def _row(name: str, outputs: List[np.ndarray], mids: List[np.ndarray]) -> str:
    cells = []
    for out, mid in zip(outputs, mids):
        e = errors(out, mid)
        cells.append(f"{e['mean']:.4f} / {e['max']:.2f} / {e['blotch_px']}")
    return f"| {name} | " + " | ".join(cells) + " |"


# whole frames; otherwise ours at the user's defaults (evaluation/methods.py)
DIAGNOSE_PATTERNS = Benchmark("diagnose.patterns", engine=(("tile", 0),), note="t = 0.5")


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_engine_flags(p, several=True, required=True)
    p.add_argument("--classical", action="store_true", help="a row for the classical baseline (DIS flow + warping)")
    args = p.parse_args(argv)
    show_notes()  # the library's notes on stderr while this tool runs
    from training.holdout import Classical

    methods = [build() for _, build in methods_of(args, DIAGNOSE_PATTERNS, args.weights, ())]
    for method in methods:
        print(DIAGNOSE_PATTERNS.header(method))
    cases = patterns()
    mids = [mid for _, mid, _ in cases.values()]
    print("| weights | " + " | ".join(f"{name}: mean / max / px > 0.1" for name in cases) + " |")
    print("|---" * (len(cases) + 1) + "|")
    for method in methods:
        print(_row(method.label, [method.interpolate(one, two, 0.5) for one, _, two in cases.values()], mids))
    if args.classical:
        baseline = Classical()
        print(_row("classical: DIS flow + warping", [baseline.interpolate(one, two, 0.5) for one, _, two in
                                                     cases.values()], mids))
    return 0


if __name__ == "__main__":
    sys.exit(main())
