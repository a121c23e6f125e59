"""Render the sample pair (images/one.png, two.png) and clip (videos/sample.mp4) shipped with the project.

    python images/render_samples.py                      # the pair and the clip
    python images/render_samples.py --middle truth.png   # also the pair's true middle frame (t = 0.5)
    python images/render_samples.py --quickstart mid.png # docs/quickstart.png: one.png, mid.png, two.png side by side

Synthetic scenes, so the samples carry no third-party footage: a gradient sky, a moving ball, a turning square
and text over a floor. The pair's floor is pebbles at scattered positions and its square stays above the floor:
motion a two-frame method can follow (the network's middle frame of the pair: ``python run.py --one
images/one.png --two images/two.png --out mid.png``). The clip's floor is a checkerboard, whose repeating pattern
makes its motion ambiguous, and the clip jumps back at frame 12 (a large motion within the same scene): it is the
pipeline's test material (tests/test_robustness.py), kept as it was first rendered.
"""

import argparse
from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
H, W = 270, 480
SUB = 4  # cv2 drawing with 4 fractional bits: the pair's shapes move by fractions of a pixel
GOLDEN = (5 ** 0.5 - 1) / 2


def _sky() -> np.ndarray:
    """A vertical gradient, H x W x 3 BGR float in [0, 1]."""
    yy = np.mgrid[0:H, 0:W][0].astype(np.float32)
    img = np.zeros((H, W, 3), np.float32)
    img[..., 0] = 0.35 + 0.4 * yy / H
    img[..., 1] = 0.55 - 0.2 * yy / H
    img[..., 2] = 0.85 - 0.5 * yy / H
    return img


def scene(t: float) -> np.ndarray:
    """The clip's scene at time t, BGR uint8: a checkerboard floor drifting 12 px, whole-pixel shapes."""
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    img = _sky()
    floor = yy > 0.6 * H
    check = (((xx + 12 * t) // 24 + (yy // 24)) % 2).astype(np.float32)
    img[floor] = (0.25 + 0.35 * check[floor])[:, None] * np.array([0.9, 0.8, 0.6], np.float32)
    img = (img * 255).astype(np.uint8).copy()
    cx, cy = int(120 + 40 * t), int(110 + 8 * t)
    cv2.circle(img, (cx, cy), 38, (40, 60, 220), -1, cv2.LINE_AA)
    cv2.circle(img, (cx - 12, cy - 12), 10, (230, 230, 250), -1, cv2.LINE_AA)
    pts = np.array([[330, 80], [400, 100], [380, 170], [310, 150]], np.float32)
    angle = np.deg2rad(-12 * t)
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]], np.float32)
    centre = pts.mean(0)
    pts = (pts - centre) @ rot.T + centre + np.array([-30 * t, 15 * t], np.float32)
    cv2.fillPoly(img, [pts.astype(np.int32)], (60, 180, 70), cv2.LINE_AA)
    cv2.putText(img, "softsplat", (int(180 - 20 * t), 240), cv2.FONT_HERSHEY_SIMPLEX, 1.0, (250, 250, 250), 2,
                cv2.LINE_AA)
    return img


def _fixed(x: float) -> int:
    return int(round(x * (1 << SUB)))


def pair_scene(t: float) -> np.ndarray:
    """The pair's scene at time t (0 = one.png, 1 = two.png), BGR uint8. In pixels from t = 0 to 1: the floor
    drifts 12 left, the ball moves 40 right and 8 down, the square 30 left while turning 12 degrees, the text 20
    left."""
    img = _sky()
    top = int(0.6 * H)
    depth = (np.arange(H - top, dtype=np.float32) / (H - top))[:, None, None]
    img[top:] = np.array([0.30, 0.42, 0.45], np.float32) + 0.05 * depth
    img = (img * 255).astype(np.uint8)
    floor = img[top:].copy()
    # pebbles at scattered (low-discrepancy) positions, larger towards the front: no repeating pattern to mistake
    for i in range(140):
        x = (i * GOLDEN % 1.0) * (W + 80) - 40 - 12 * t
        depth_i = i * 0.7548776662 % 1.0
        y = 6 + depth_i * (H - top)
        r = (4 + 9 * depth_i) * (0.7 + 0.6 * (i * 0.5698403 % 1.0))
        shade = 0.55 + 0.45 * (i * 0.3819660 % 1.0)
        cv2.ellipse(floor, (_fixed(x), _fixed(y)), (_fixed(1.6 * r), _fixed(r)), 0, 0, 360,
                    (120 * shade, 150 * shade, 170 * shade), -1, cv2.LINE_AA, SUB)
    img[top:] = floor
    cx, cy = 120 + 40 * t, 110 + 8 * t
    cv2.circle(img, (_fixed(cx), _fixed(cy)), _fixed(38), (40, 60, 220), -1, cv2.LINE_AA, SUB)
    cv2.circle(img, (_fixed(cx - 12), _fixed(cy - 12)), _fixed(10), (230, 230, 250), -1, cv2.LINE_AA, SUB)
    pts = np.array([[330, 80], [400, 100], [380, 170], [310, 150]], np.float32)
    angle = np.deg2rad(-12 * t)
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]], np.float32)
    centre = pts.mean(0)
    pts = (pts - centre) @ rot.T + centre + np.array([-30 * t, 0], np.float32)
    cv2.fillPoly(img, [np.round(pts * (1 << SUB)).astype(np.int32)], (60, 180, 70), cv2.LINE_AA, SUB)
    cv2.putText(img, "softsplat", (int(round(180 - 20 * t)), 240), cv2.FONT_HERSHEY_SIMPLEX, 1.0,
                (250, 250, 250), 2, cv2.LINE_AA)
    return img


def quickstart(mid: Path, out: Path, scale: float = 0.6, gap: int = 6, label: int = 22) -> None:
    """one.png, the interpolated ``mid`` and two.png side by side, scaled down, each under a label."""
    names = ("one.png (t = 0)", "mid.png (t = 0.5, interpolated)", "two.png (t = 1)")
    frames = [cv2.imread(str(p)) for p in (ROOT / "images" / "one.png", mid, ROOT / "images" / "two.png")]
    if any(f is None for f in frames):
        raise SystemExit(f"error: cannot read {mid} or the sample pair")
    w, h = round(W * scale), round(H * scale)
    canvas = np.full((label + h, 3 * w + 2 * gap, 3), 255, np.uint8)
    for i, (name, frame) in enumerate(zip(names, frames)):
        x = i * (w + gap)
        canvas[label:, x:x + w] = cv2.resize(frame, (w, h), interpolation=cv2.INTER_AREA)
        cv2.putText(canvas, name, (x + 2, label - 7), cv2.FONT_HERSHEY_SIMPLEX, 0.42, (20, 20, 20), 1, cv2.LINE_AA)
    cv2.imwrite(str(out), canvas)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--middle", type=Path, help="also write the pair's true middle frame (t = 0.5) here")
    p.add_argument("--quickstart", type=Path, metavar="MID",
                   help="only compose docs/quickstart.png from the pair and MID, the frame interpolated between them")
    args = p.parse_args()
    if args.quickstart:
        quickstart(args.quickstart, ROOT / "docs" / "quickstart.png")
        return
    cv2.imwrite(str(ROOT / "images" / "one.png"), pair_scene(0.0))
    cv2.imwrite(str(ROOT / "images" / "two.png"), pair_scene(1.0))
    if args.middle:
        cv2.imwrite(str(args.middle), pair_scene(0.5))
    writer = cv2.VideoWriter(str(ROOT / "videos" / "sample.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 12, (W, H))
    for i in range(24):
        writer.write(scene(i / 4.0 % 3.0))
    writer.release()


if __name__ == "__main__":
    main()
