"""Reading YUV4MPEG2 (.y4m) files frame by frame: 8- and 10-bit (or more), 4:2:0 / 4:2:2 / 4:4:4.

Frames are converted to float RGB in [0, 1] with the BT.601 limited-range matrix,
which is what ffmpeg applies by default when a y4m stream carries no colour space
(the published Xiph protocol converts with ffmpeg).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence, Tuple

import numpy as np


class Y4MError(ValueError):
    pass


def _parse_header(line: bytes, path: Path) -> Tuple[int, int, str, int]:
    fields = line.decode("ascii", "replace").split()
    if not fields or fields[0] != "YUV4MPEG2":
        raise Y4MError(f"{path}: not a YUV4MPEG2 file")
    width = height = None
    colour = "420jpeg"
    for f in fields[1:]:
        if f[0] == "W":
            width = int(f[1:])
        elif f[0] == "H":
            height = int(f[1:])
        elif f[0] == "C":
            colour = f[1:]
    if not width or not height:
        raise Y4MError(f"{path}: header has no frame size")
    # C420jpeg, C420paldv, C420mpeg2: 8-bit; C420p10, C444p12: the number is the bit depth
    match = re.match(r"^(\d{3})(?:p(\d+))?", colour)
    sub = match.group(1) if match else colour
    depth = int(match.group(2)) if match and match.group(2) else 8
    if sub not in ("420", "422", "444"):
        raise Y4MError(f"{path}: unsupported chroma layout C{colour} (4:2:0, 4:2:2 or 4:4:4 only)")
    return width, height, sub, depth


def read_y4m(path: Path, limit: Optional[int] = None) -> Iterator[np.ndarray]:
    """Yield H x W x 3 float32 RGB frames in [0, 1], at most ``limit`` of them."""
    path = Path(path)
    with open(path, "rb") as f:
        width, height, sub, depth = _parse_header(f.readline(), path)
        cw = width // 2 if sub in ("420", "422") else width
        ch = height // 2 if sub == "420" else height
        sample = 2 if depth > 8 else 1
        dtype = np.dtype("<u2") if sample == 2 else np.uint8
        sizes = (width * height, cw * ch, cw * ch)
        count = 0
        while limit is None or count < limit:
            marker = f.readline()
            if not marker:
                return
            if not marker.startswith(b"FRAME"):
                raise Y4MError(f"{path}: frame {count} has no FRAME marker (truncated or corrupt)")
            planes = []
            for n, (w, h) in zip(sizes, ((width, height), (cw, ch), (cw, ch))):
                data = f.read(n * sample)
                if len(data) != n * sample:
                    raise Y4MError(f"{path}: frame {count} is truncated")
                planes.append(np.frombuffer(data, dtype).reshape(h, w).astype(np.float32))
            yield _to_rgb(planes, width, height, depth)
            count += 1


def _to_rgb(planes: Sequence[np.ndarray], width: int, height: int, depth: int) -> np.ndarray:
    import cv2

    y, u, v = planes
    if u.shape != y.shape:
        u = cv2.resize(u, (width, height), interpolation=cv2.INTER_LINEAR)
        v = cv2.resize(v, (width, height), interpolation=cv2.INTER_LINEAR)
    scale = float(1 << (depth - 8))
    y = (y / scale - 16.0) / 219.0
    u = (u / scale - 128.0) / 224.0
    v = (v / scale - 128.0) / 224.0
    r = y + 1.402 * v
    g = y - 0.344136 * u - 0.714136 * v
    b = y + 1.772 * u
    return np.clip(np.stack([r, g, b], axis=2), 0.0, 1.0).astype(np.float32)


def write_y4m(path: Path, frames: Iterable[np.ndarray], fps: int = 60) -> None:
    """Write 8-bit 4:2:0 y4m (BT.601 limited range) from float RGB frames: used by the tests."""
    import cv2

    frames = list(frames)
    h, w = frames[0].shape[:2]
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{w} H{h} F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for rgb in frames:
            r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
            y = 16 + 219 * (0.299 * r + 0.587 * g + 0.114 * b)
            u = 128 + 224 * (-0.168736 * r - 0.331264 * g + 0.5 * b)
            v = 128 + 224 * (0.5 * r - 0.418688 * g - 0.081312 * b)
            u = cv2.resize(u.astype(np.float32), (w // 2, h // 2), interpolation=cv2.INTER_AREA)
            v = cv2.resize(v.astype(np.float32), (w // 2, h // 2), interpolation=cv2.INTER_AREA)
            f.write(b"FRAME\n")
            for plane in (y, u, v):
                f.write(np.clip(np.rint(plane), 0, 255).astype(np.uint8).tobytes())
