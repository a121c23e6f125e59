"""YUV4MPEG2 (.y4m) files and streams, frame by frame: 8- and 10-bit (or more), 4:2:0 / 4:2:2 / 4:4:4.

``read_y4m`` converts frames to float RGB in [0, 1] with the BT.601 limited-range
matrix, which is what ffmpeg applies by default when a y4m stream carries no colour
space (the published Xiph protocol converts with ffmpeg). Streams (``parse_header``,
``yuv_to_rgb16``, ``rgb16_to_yuv``: run.py's pipes) go to 16-bit RGB and back with one
matrix by frame size (BT.709 for HD, else BT.601) and the range the header names.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence, Tuple

import numpy as np

from .yuv import MATRICES, YuvLayout, rgb_to_yuv, sample_ranges


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
    """float32 Y, Cb, Cr planes (chroma at its own size) as H x W x 3 float32 RGB in [0, 1]: BT.601 limited range
    (``_rgb_matrix``), in one ``cv2.transform`` pass."""
    import cv2

    y, u, v = planes
    if u.shape != y.shape:
        u = cv2.resize(u, (width, height), interpolation=cv2.INTER_LINEAR)
        v = cv2.resize(v, (width, height), interpolation=cv2.INTER_LINEAR)
    kr, kb = MATRICES["bt601"]
    matrix = _rgb_matrix(kr, kb, sample_ranges(depth, False), float(1 << (depth - 1)), 1.0)
    rgb = cv2.transform(cv2.merge([y, u, v]), matrix)
    return np.clip(rgb, 0.0, 1.0, out=rgb)


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


# --- streams (run.py --video - --out -): headers kept, original frames passed through, RGB for interpolation ---


@dataclass(frozen=True)
class Y4MHeader:
    """A YUV4MPEG2 stream header. ``tags`` are its fields other than W, H and F, kept verbatim (interlacing I, pixel
    aspect A, chroma C, extensions X such as XCOLORRANGE), so the output describes its frames as the input did."""

    width: int
    height: int
    rate: Fraction
    sub: str  # "420", "422" or "444"
    depth: int  # bits per sample: 8, or 9-16 (little-endian 16-bit samples, as ffmpeg writes C420p10 and the like)
    full_range: bool
    interlacing: str  # "p" (progressive), "t", "b", "m" or "?"
    tags: Tuple[str, ...]

    @property
    def layout(self) -> YuvLayout:
        return YuvLayout(self.width, self.height, self.sub, self.depth, self.full_range, self.matrix)

    @property
    def chroma_size(self) -> Tuple[int, int]:
        """(width, height) of each chroma plane (odd sizes round up, as ffmpeg's do)."""
        return self.layout.chroma_size

    @property
    def frame_bytes(self) -> int:
        cw, ch = self.chroma_size
        return (self.width * self.height + 2 * cw * ch) * (2 if self.depth > 8 else 1)

    @property
    def matrix(self) -> str:
        """y4m names no matrix, so the stream's size picks one as players do (HD: BT.709, SD: BT.601). Reading and
        writing use the same matrix, so what it changes is only which RGB the network sees."""
        return "bt709" if self.width >= 1280 or self.height >= 720 else "bt601"

    def line(self, rate: Optional[Fraction] = None) -> bytes:
        """The header line, at ``rate`` (default: its own)."""
        rate = self.rate if rate is None else rate
        fields = [f"W{self.width}", f"H{self.height}", f"F{rate.numerator}:{rate.denominator}", *self.tags]
        return ("YUV4MPEG2 " + " ".join(fields) + "\n").encode("ascii")


def parse_header(line: bytes, name: str) -> Y4MHeader:
    """The header of a stream (``name`` in errors); Y4MError naming the fix for one this reader cannot take."""
    if not line:
        raise Y4MError(f"{name}: empty, not a YUV4MPEG2 stream (nothing came: send one with ffmpeg -i IN -f "
                       f"yuv4mpegpipe -)")
    if not line.startswith(b"YUV4MPEG2"):
        raise Y4MError(f"{name}: not a YUV4MPEG2 stream (send one with ffmpeg -i IN -f yuv4mpegpipe -)")
    if not line.endswith(b"\n"):
        raise Y4MError(f"{name}: the stream ended inside its header")
    width = height = 0
    rate = None
    tags = []
    colour, interlacing, full_range = "420jpeg", "p", False
    for field in line.decode("ascii", "replace").split()[1:]:
        key, value = field[0], field[1:]
        try:
            if key == "W":
                width = int(value)
            elif key == "H":
                height = int(value)
            elif key == "F":
                num, den = value.split(":")
                rate = Fraction(int(num), int(den))
        except (ValueError, ZeroDivisionError):
            raise Y4MError(f"{name}: header field {field!r} is not a number") from None
        if key in "WHF":
            continue
        tags.append(field)
        if key == "C":
            colour = value
        elif key == "I":
            interlacing = value
        elif field == "XCOLORRANGE=FULL":
            full_range = True
    if width <= 0 or height <= 0 or rate is None or rate <= 0:
        raise Y4MError(f"{name}: the header needs a frame size and a frame rate (W, H, F): got {line.strip()!r}")
    match = re.fullmatch(r"(420|422|444)(?:jpeg|mpeg2|paldv)?(?:p(\d+))?", colour)
    depth = int(match.group(2)) if match and match.group(2) else 8
    if match is None or not 8 <= depth <= 16:
        raise Y4MError(f"{name}: chroma layout C{colour} is not supported: send 4:2:0, 4:2:2 or 4:4:4 at 8 to 16 "
                       f"bits (ffmpeg -pix_fmt yuv420p, or yuv420p10le with -strict -1)")
    return Y4MHeader(width, height, rate, match.group(1), depth, full_range, interlacing, tuple(tags))


def frame_planes(data: bytes, header: Y4MHeader) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Y, Cb and Cr planes of one frame's bytes, as integer arrays (uint8, or uint16 beyond 8 bits)."""
    dtype = np.dtype("<u2") if header.depth > 8 else np.dtype(np.uint8)
    cw, ch = header.chroma_size
    luma = header.width * header.height
    buffer = np.frombuffer(data, dtype)
    y = buffer[:luma].reshape(header.height, header.width)
    u = buffer[luma:luma + cw * ch].reshape(ch, cw)
    v = buffer[luma + cw * ch:luma + 2 * cw * ch].reshape(ch, cw)
    return y, u, v


def _rgb_matrix(kr: float, kb: float, ranges: Tuple[float, float, float], mid: float, top: float) -> np.ndarray:
    """The float32 3 x 4 matrix taking (Y, Cb, Cr, 1) to RGB in [0, top], for samples whose black, luma span and
    chroma span are ``ranges`` and whose chroma zero is ``mid``: with y = (Y - black) / span and u, v = (Cb, Cr -
    mid) / chroma span, r = y + 2(1 - kr) v, b = y + 2(1 - kb) u, g = (y - kr r - kb b) / (1 - kr - kb)."""
    black, span, cspan = ranges
    red = np.array([1.0, 0.0, 2.0 * (1.0 - kr)])  # of (y, u, v) in [0, 1] and [-0.5, 0.5]
    blue = np.array([1.0, 2.0 * (1.0 - kb), 0.0])
    green = (np.array([1.0, 0.0, 0.0]) - kr * red - kb * blue) / (1.0 - kr - kb)
    rows = np.stack([red, green, blue])
    matrix = np.empty((3, 4))
    matrix[:, :3] = top * rows / np.array([span, cspan, cspan])
    matrix[:, 3] = -top * rows @ np.array([black / span, mid / cspan, mid / cspan])
    return matrix.astype(np.float32)


@functools.lru_cache(maxsize=16)
def _rgb_from_yuv(header: Y4MHeader) -> np.ndarray:
    """``_rgb_matrix`` for a stream's samples scaled to 16 bits, to RGB in 0..65535."""
    scale = float(1 << (16 - header.depth))
    ranges = tuple(scale * r for r in sample_ranges(header.depth, header.full_range))
    return _rgb_matrix(*MATRICES[header.matrix], ranges, scale * (1 << (header.depth - 1)), 65535.0)


def yuv_to_rgb16(data: bytes, header: Y4MHeader) -> np.ndarray:
    """One frame's bytes as an H x W x 3 uint16 RGB array (16 bits whatever the stream's depth, so that rounding to
    RGB loses nothing the network would see). Chroma is upsampled bilinearly. OpenCV does the arithmetic
    (``cv2.transform``: one pass, rounded and saturated), on samples scaled to 16 bits."""
    import cv2

    shift = 16 - header.depth
    y, u, v = (plane.astype(np.uint16) << shift for plane in frame_planes(data, header))
    if u.shape != y.shape:
        u = cv2.resize(u, (header.width, header.height), interpolation=cv2.INTER_LINEAR)
        v = cv2.resize(v, (header.width, header.height), interpolation=cv2.INTER_LINEAR)
    return cv2.transform(cv2.merge([y, u, v]), _rgb_from_yuv(header))


def rgb16_to_yuv(frame: np.ndarray, header: Y4MHeader) -> bytes:
    """An H x W x 3 uint16 RGB frame as one frame's bytes of ``header``'s layout (``media.yuv.rgb_to_yuv``: chroma
    averaged down)."""
    return b"".join(plane.tobytes() for plane in rgb_to_yuv(frame, header.layout))
