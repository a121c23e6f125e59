"""Render the sample pair (images/one.png, two.png) and clip (videos/sample.mp4) shipped with the project.

    python images/render_samples.py

A synthetic scene (gradient sky, drifting checkerboard floor, a moving ball, a turning square and
text), so the samples carry no third-party footage. The clip jumps back at frame 12 (a large motion
within the same scene).
"""

from pathlib import Path

import cv2
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
H, W = 270, 480


def scene(t: float) -> np.ndarray:
    """The scene at time t (0 = one.png, 1 = two.png), BGR uint8."""
    yy, xx = np.mgrid[0:H, 0:W].astype(np.float32)
    img = np.zeros((H, W, 3), np.float32)
    img[..., 0] = 0.35 + 0.4 * yy / H
    img[..., 1] = 0.55 - 0.2 * yy / H
    img[..., 2] = 0.85 - 0.5 * yy / H
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


def main() -> None:
    cv2.imwrite(str(ROOT / "images" / "one.png"), scene(0.0))
    cv2.imwrite(str(ROOT / "images" / "two.png"), scene(1.0))
    writer = cv2.VideoWriter(str(ROOT / "videos" / "sample.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 12, (W, H))
    for i in range(24):
        writer.write(scene(i / 4.0 % 3.0))
    writer.release()


if __name__ == "__main__":
    main()
