"""The repeated-pattern set: rendered scenes whose middle frame is known exactly, where a flow network can bend,
double or wash out a regular pattern.

    python -m bench.patterns --weights weights/network.safetensors weights/fast.safetensors --peer rife-4.26

Every scene is a pattern (grid, fence, stripes, text, tiled floor) at a period of 4 to 40 px, thin or thick lines,
bright on dark or dark on bright, either static or moving by a sub-pixel amount, under a large textured occluder
that moves across it (a hand above a cutting mat). Frames are rendered analytically with 4 x 4 supersampling at
times 0, 0.5 and 1 (and -1 and 2 for our video path, ``--video``), so the middle frame is exact. Per scene: PSNR
of the middle frame, the detail kept (``evaluation.metrics.edge_energy`` of the output over the truth's), and PSNR over
the *far* pixels, those more than ``FAR`` px from the occluder in all three frames: where the pattern is static
there, any error is a bent, doubled or dotted line.

Conventions: H x W x 3 float32 RGB in [0, 1]; positions in pixels, x then y.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from engine.options import add_flags
from evaluation.methods import HOLD_STILL, hold_still_label
from evaluation.metrics import detail_kept
from evaluation.peers import PEERS, load_peer

FAR = 24  # px from the occluder, in every frame, for the far pixels
SAMPLES = 4  # supersampling per axis
FAMILIES = ("grid", "fence", "stripes", "text", "tiles")
PERIODS = (4, 6, 8, 12, 16, 25, 40)


@dataclass(frozen=True)
class Scene:
    """One pattern scene: ``family`` at ``period`` px, ``thin`` or thick lines, ``bright`` lines on a dark ground
    (else dark on bright), the pattern moving by ``shift`` px (x, y) over the pair, the occluder by ``occluder``."""

    family: str
    period: float
    thin: bool
    bright: bool
    shift: tuple
    occluder: tuple = (36.0, 10.0)
    size: tuple = (240, 320)  # height, width

    @property
    def name(self) -> str:
        moving = "static" if self.shift == (0.0, 0.0) else f"moving{self.shift[0]:g}x{self.shift[1]:g}"
        return (f"{self.family}-p{self.period:g}-{'thin' if self.thin else 'thick'}-"
                f"{'bright' if self.bright else 'dark'}-{moving}")


def _pattern(scene: Scene, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Line coverage in [0, 1] of the pattern at continuous positions (x, y) (already shifted)."""
    p = scene.period
    width = max(1.0, p / 8) if scene.thin else p / 2

    def lines(u: np.ndarray) -> np.ndarray:
        return (np.mod(u, p) < width).astype(np.float32)

    if scene.family == "grid":
        return np.maximum(lines(x), lines(y))
    if scene.family == "fence":
        return np.maximum(lines(x), lines(y / 4))  # pickets, and a rail every four periods
    if scene.family == "stripes":
        return lines(x * 0.8 + y * 0.6)  # diagonal
    if scene.family == "tiles":  # tiles in two tones with grout lines
        tone = (np.mod(np.floor(x / p) + np.floor(y / p), 2) * 0.35).astype(np.float32)
        return np.maximum(lines(x), np.maximum(lines(y), tone))
    if scene.family == "text":  # rows of glyph-like strokes: a bitmap font of 5 x 7 cells per character
        cell = max(p / 6, 1.0)
        cx, cy = np.floor(x / cell), np.floor(y / cell)
        glyph = np.floor(cx / 6) * 7 + np.floor(cy / 9) * 13
        col, row = np.mod(cx, 6), np.mod(cy, 9)
        inside = (col < 5) & (row < 7)
        bits = np.mod(np.floor(glyph * 2654435761 / 2 ** (col * 7 + row) % 1e9), 2) > 0
        return (inside & bits).astype(np.float32)
    raise ValueError(f"unknown pattern family {scene.family!r}: choose one of {', '.join(FAMILIES)}")


def _occluder_texture(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """A smooth skin-like texture, in object coordinates."""
    return np.stack([0.75 + 0.1 * np.sin(x / 7) * np.cos(y / 5), 0.55 + 0.08 * np.sin((x + y) / 9),
                     0.45 + 0.06 * np.cos(x / 4 - y / 11)], axis=-1).astype(np.float32)


def occluder_mask(scene: Scene, x: np.ndarray, y: np.ndarray, t: float) -> np.ndarray:
    """Coverage of the occluder (an ellipse with a finger-like bar) at time t, in image coordinates."""
    h, w = scene.size
    ox, oy = w * 0.3 + scene.occluder[0] * t, h * 0.55 + scene.occluder[1] * t
    u, v = x - ox, y - oy
    palm = (u / (w * 0.12)) ** 2 + (v / (h * 0.18)) ** 2 < 1
    finger = (np.abs(v + h * 0.12) < h * 0.035) & (u > 0) & (u < w * 0.25)
    return (palm | finger).astype(np.float32)


# every scene of the set at times -1, 0, 0.5, 1 and 2 (``--video``): a smaller LRU cache, cycled through in order by
# each method, would hit nothing and render every frame again for every method
_CACHED_FRAMES = 5 * 2 * len(FAMILIES) * len(PERIODS)


@functools.lru_cache(maxsize=_CACHED_FRAMES)
def render(scene: Scene, t: float) -> np.ndarray:
    """The frame at time ``t`` (0 and 1: the pair), supersampled (cached: every method scores the same frames; treat the
    array as read-only)."""
    h, w = scene.size
    offsets = (np.arange(SAMPLES) + 0.5) / SAMPLES - 0.5
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    x = (xx[..., None, None] + offsets[None, None, None, :]).astype(np.float32)
    y = (yy[..., None, None] + offsets[None, None, :, None]).astype(np.float32)
    x, y = np.broadcast_arrays(x, y)
    sx, sy = scene.shift[0] * t, scene.shift[1] * t
    cover = _pattern(scene, x - sx + 3.3, y - sy + 2.7)
    low, high = (0.12, 0.92) if scene.bright else (0.92, 0.12)
    base = np.array([0.25, 0.55, 0.35], np.float32) * 0.6 + 0.2  # a green cutting mat's tint
    ground = low + (high - low) * cover
    colour = ground[..., None] * base / base.mean()
    mask = occluder_mask(scene, x, y, t)[..., None]
    ox, oy = scene.occluder[0] * t, scene.occluder[1] * t
    colour = colour * (1 - mask) + _occluder_texture(x - ox, y - oy) * mask
    return np.clip(colour.mean(axis=(2, 3)), 0, 1).astype(np.float32)


def far_mask(scene: Scene) -> np.ndarray:
    """H x W bool: pixels more than ``FAR`` px from the occluder at times 0, 0.5 and 1."""
    import cv2

    h, w = scene.size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    near = np.zeros((h, w), np.uint8)
    for t in (0.0, 0.5, 1.0):
        near |= (occluder_mask(scene, xx, yy, t) > 0).astype(np.uint8)
    distance = cv2.distanceTransform(1 - near, cv2.DIST_L2, 5)
    return distance > FAR


def scenes(quick: bool = False) -> List[Scene]:
    """The set: every family at every period, thin and thick lines alternating, bright and dark alternating, static
    and moving by a sub-pixel amount; ``quick``: the static thin grid at 25 px alone (the failure users saw)."""
    if quick:
        return [Scene("grid", 25, True, True, (0.0, 0.0), size=(360, 640))]
    out = []
    for i, family in enumerate(FAMILIES):
        for j, period in enumerate(PERIODS):
            thin, bright = (i + j) % 2 == 0, j % 2 == 0
            out.append(Scene(family, period, thin, bright, (0.0, 0.0)))
            out.append(Scene(family, period, thin, not bright, (2.5, 1.25)))
    return out


def psnr(out: np.ndarray, truth: np.ndarray, mask: Optional[np.ndarray] = None) -> float:
    """PSNR on uint8-rounded frames, over ``mask`` (H x W bool) where given."""
    a, b = (np.rint(np.clip(x, 0, 1) * 255).astype(np.float64) for x in (out, truth))
    err = (a - b) ** 2
    mse = err[mask].mean() if mask is not None else err.mean()
    return float(10 * np.log10(255.0 ** 2 / max(mse, 1e-10)))


def detail(out: np.ndarray, truth: np.ndarray) -> float:
    """The output's mean absolute Laplacian over the truth's (``evaluation.metrics.detail_kept``)."""
    return detail_kept(*(torch.from_numpy(np.ascontiguousarray(x)).permute(2, 0, 1)[None] for x in (out, truth)))


# the frames at times -1 and 2, for our video path (quadratic paths through the frames beside the pair); None: the
# pair alone. The peers always run on the pair alone, as RIFE tools do.
Neighbours = Optional[Tuple[np.ndarray, np.ndarray]]
Interpolate = Callable[[np.ndarray, np.ndarray, Neighbours], np.ndarray]


def score(interpolate: Interpolate, chosen: Sequence[Scene], video: bool = False) -> List[Dict]:
    """Per scene: PSNR, far PSNR and detail of ``interpolate(one, two, neighbours)`` (the middle frame);
    ``video``: with the frames at times -1 and 2 as the neighbours."""
    rows = []
    for scene in chosen:
        one, truth, two = (render(scene, t) for t in (0.0, 0.5, 1.0))
        out = interpolate(one, two, (render(scene, -1.0), render(scene, 2.0)) if video else None)
        rows.append({"scene": scene.name, "family": scene.family, "period": scene.period,
                     "static": scene.shift == (0.0, 0.0), "psnr": psnr(out, truth),
                     "far_psnr": psnr(out, truth, far_mask(scene)), "detail": detail(out, truth)})
    return rows


def summarise(rows: Sequence[Dict]) -> Dict[str, float]:
    """Means over the set, and over static and moving scenes."""
    out: Dict[str, float] = {}
    for label, keep in (("", lambda r: True), ("_static", lambda r: r["static"]),
                        ("_moving", lambda r: not r["static"])):
        chosen = [r for r in rows if keep(r)]
        for key in ("psnr", "far_psnr", "detail"):
            out[f"{key}{label}"] = float(np.mean([r[key] for r in chosen])) if chosen else float("nan")
    out["worst_far_psnr"] = float(min(r["far_psnr"] for r in rows))
    return out


def _ours(weights: Path, device: str, hold_still: bool = True, compile: bool = False) -> Interpolate:
    from engine import Interpolator, InterpolatorOptions

    interp = Interpolator(InterpolatorOptions(weights=weights, device=device, tile=0, compile=compile))
    if hasattr(interp.network, "hold_still"):
        interp.network.hold_still = hold_still

    def run(one: np.ndarray, two: np.ndarray, neighbours: Neighbours) -> np.ndarray:
        if neighbours is None:
            return interp(one, two, [0.5])[0]
        # run.py --video's path, on 16-bit frames (the engine's integer path; 8 bits would round the truth away)
        before, one, two, after = (np.rint(x * 65535).astype(np.uint16) for x in (neighbours[0], one, two,
                                                                                  neighbours[1]))
        out = interp.interpolate_integer_with_neighbours(one, two, [0.5], (before, 1.0), (after, 1.0))[0]
        return out.astype(np.float32) / 65535

    return run


def _peer(name: str, device: str) -> Interpolate:
    from engine.interpolator import resolve_device

    peer = load_peer(name, resolve_device(device))
    return lambda one, two, _neighbours: peer.frames(one, two)[0]


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Scores on the repeated-pattern set (exact middle frames).",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--weights", type=Path, nargs="*", default=[], help="our weights files to score")
    p.add_argument("--peer", nargs="*", default=[], choices=list(PEERS),
                   help="RIFE releases to score beside them (evaluation/peers.py)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--quick", action="store_true", help="the static 25 px grid alone")
    p.add_argument("--video", action="store_true",
                   help="our networks along run.py --video's quadratic paths, through the frames at times -1 and 2 "
                        "(the peers on the pair alone, as RIFE tools run)")
    p.add_argument("--hold-still", choices=list(HOLD_STILL), default="on",
                   help="our networks with still, textured neighbourhoods held at zero flow (the default), without, "
                        "or both")
    add_flags(p, only=("compile",))
    p.add_argument("--json", type=Path, default=None, help="write per-scene rows here")
    args = p.parse_args(argv)
    chosen = scenes(args.quick)
    methods = [(hold_still_label(str(w), hold, args.hold_still),
                lambda w=w, hold=hold: _ours(w, args.device, hold, args.compile))
               for w in args.weights for hold in HOLD_STILL[args.hold_still]]
    methods += [(name, lambda name=name: _peer(name, args.device)) for name in args.peer]
    if not methods:
        p.error("name --weights or --peer")
    report = {}
    for label, make in methods:
        try:
            rows = score(make(), chosen, args.video)
        except ValueError as exc:  # a missing wheel or weights file names its fix
            print(f"error: {exc}", file=sys.stderr)
            return 2
        report[label] = {"summary": summarise(rows), "scenes": rows}
        s = report[label]["summary"]
        print(f"{label}: PSNR {s['psnr']:.2f} (static {s['psnr_static']:.2f}, moving {s['psnr_moving']:.2f}), "
              f"far PSNR {s['far_psnr']:.2f} (worst {s['worst_far_psnr']:.2f}), detail {s['detail']:.3f} "
              f"on {len(rows)} scenes", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
