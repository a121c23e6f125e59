"""Session 58's probes for rule X (docs/quality.md), kept in one commit and removed in the next.

    python -m bench.probe_still_guard regions                      # where the static pattern scenes lose (F38)
    python -m bench.probe_still_guard run x|current MODULE ARGS... # a module's main with the candidate guard or not

``run x bench.patterns --weights weights/network.safetensors --device cpu`` and ``run x training.holdout --data
F F2 --device cpu --flow-scale auto [--motion quadratic] --weights weights/network.safetensors`` are rule X's runs.
"""

import runpy
import sys

import cv2
import numpy as np
import torch

import model.network as network
import model.warp as warp
from bench import patterns

_CURRENT = warp.still_weight


def candidate(one: torch.Tensor, two: torch.Tensor) -> torch.Tensor:
    """Rule X: flat 7-px neighbourhoods judged over 21 px; textured ones as before."""
    textured = _CURRENT(one, two, shift=1e9) > 0
    return torch.where(textured, _CURRENT(one, two), _CURRENT(one, two, window=21))


def regions(scene: patterns.Scene) -> dict:
    """Masks: the occluder at t = 0.5, the band it swept (covered at 0 or 1, not 0.5), within FAR px of it, far."""
    h, w = scene.size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    m = {t: patterns.occluder_mask(scene, xx, yy, t) > 0 for t in (0.0, 0.5, 1.0)}
    covered = m[0.0] | m[0.5] | m[1.0]
    distance = cv2.distanceTransform((1 - covered).astype(np.uint8), cv2.DIST_L2, 5)
    return {"occluder": m[0.5], "swept": (m[0.0] | m[1.0]) & ~m[0.5], "near": ~covered & (distance <= patterns.FAR),
            "far": distance > patterns.FAR}


def region_errors() -> None:
    methods = {"ours": patterns._ours("weights/network.safetensors", "cpu"),
               "rife-4.26": patterns._peer("rife-4.26", "cpu")}
    for label, static in (("static", True), ("moving", False)):
        sse = {k: {} for k in methods}
        pixels: dict = {}
        for scene in (s for s in patterns.scenes() if (s.shift == (0.0, 0.0)) == static):
            one, truth, two = (patterns.render(scene, t) for t in (0.0, 0.5, 1.0))
            masks = regions(scene)
            for name, method in methods.items():
                out = method(one, two)
                a, b = (np.rint(np.clip(x, 0, 1) * 255) for x in (out, truth))
                for r, mask in masks.items():
                    sse[name][r] = sse[name].get(r, 0.0) + float(((a - b) ** 2).mean(-1)[mask].sum())
            for r, mask in masks.items():
                pixels[r] = pixels.get(r, 0) + int(mask.sum())
        total = sum(pixels.values())
        for r in pixels:
            print(label, r, f"pixels {pixels[r] / total:.3f}", " ".join(
                f"{k} MSE {sse[k][r] / pixels[r]:.1f} (share of its error {sse[k][r] / sum(sse[k].values()):.2f})"
                for k in methods))


if __name__ == "__main__":
    if sys.argv[1] == "regions":
        region_errors()
    else:
        if sys.argv[2] == "x":
            network.still_weight = candidate
        module = sys.argv[3]
        sys.argv = [module] + sys.argv[4:]
        runpy.run_module(module, run_name="__main__")
