"""RGB frames to planar Y'CbCr, as encoders take them: the one conversion of the output frames, for the video
writer (``media.video.FrameWriter``) and the y4m pipes (``media.y4m.rgb16_to_yuv``).

Each plane group is one ``cv2.transform`` of the frame in float32, rounded and saturated once (``YuvLayout``'s
samples); chroma comes from the RGB averaged over each block of the subsampling (``cv2.resize``), the
same as averaging full-resolution chroma, as both steps are linear. The planes are within one step of the exact
float64 conversion, and ffmpeg's own conversion to 4:2:0 (swscale) agrees with them within one step on natural
footage (tests/test_yuv.py).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

# Kr, Kb of each matrix (the names of ffmpeg's scale filter)
MATRICES = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722), "bt2020": (0.2627, 0.0593),
            "smpte240m": (0.212, 0.087), "fcc": (0.30, 0.11)}

# a source's matrix tag (its frames' colorspace, as ffmpeg names it) -> the matrix its output is converted with;
# untagged frames take ffmpeg's default, bt601. bt2020c (constant luminance) is no matrix: ffmpeg converts it.
MATRIX_OF_TAG = {"unknown": "bt601", "bt709": "bt709", "smpte170m": "bt601", "bt470bg": "bt601",
                 "bt2020nc": "bt2020", "smpte240m": "smpte240m", "fcc": "fcc"}


@dataclass(frozen=True)
class YuvLayout:
    """Planar Y'CbCr frames: ``sub`` "420", "422" or "444"; ``depth`` bits per sample (8, or 9-16 in
    little-endian 16-bit words); ``matrix`` a key of MATRICES."""

    width: int
    height: int
    sub: str
    depth: int
    full_range: bool
    matrix: str

    @property
    def chroma_size(self) -> Tuple[int, int]:
        """(width, height) of each chroma plane (odd sizes round up, as ffmpeg's do)."""
        width = -(-self.width // 2) if self.sub in ("420", "422") else self.width
        height = -(-self.height // 2) if self.sub == "420" else self.height
        return width, height

    @property
    def dtype(self) -> np.dtype:
        return np.dtype("<u2") if self.depth > 8 else np.dtype(np.uint8)


def planar_layout(pix_fmt: str, width: int, height: int, matrix_tag: str) -> Optional[YuvLayout]:
    """The limited-range layout of ffmpeg's pixel format ``pix_fmt`` (yuv420p, yuv422p10le, ...) for frames
    whose source is tagged ``matrix_tag``, where ``rgb_to_yuv`` makes it; None where ffmpeg converts instead: other
    formats (RGB, semi-planar nv12 and p010), other matrices, and sizes that the subsampling does not divide (the
    encoder's own error then says so)."""
    match = re.fullmatch(r"yuv(420|422|444)p(?:(9|10|12|14|16)le)?", pix_fmt)
    if match is None or matrix_tag not in MATRIX_OF_TAG:
        return None
    sub = match.group(1)
    if (sub != "444" and width % 2) or (sub == "420" and height % 2):
        return None
    return YuvLayout(width, height, sub, int(match.group(2) or 8), False, MATRIX_OF_TAG[matrix_tag])


def sample_ranges(depth: int, full_range: bool) -> Tuple[float, float, float]:
    """(black, luma span, chroma span) in sample values of ``depth`` bits: 16, 219 and 224 at 8 bits in limited
    range, scaled by 2 ** (depth - 8) beyond; 0 and the top twice in full range."""
    if full_range:
        top = float((1 << depth) - 1)
        return 0.0, top, top
    scale = float(1 << (depth - 8))
    return 16.0 * scale, 219.0 * scale, 224.0 * scale


@functools.lru_cache(maxsize=32)
def yuv_from_rgb(matrix: str, depth: int, full_range: bool, top: float) -> np.ndarray:
    """The float32 3 x 4 matrix taking (R, G, B, 1), R, G and B in 0..``top``, to (Y, Cb, Cr) in sample values
    of ``depth`` bits, unrounded."""
    kr, kb = MATRICES[matrix]
    black, span, cspan = sample_ranges(depth, full_range)
    mid = float(1 << (depth - 1))
    luma = np.array([kr, 1.0 - kr - kb, kb])
    u = (np.array([0.0, 0.0, 1.0]) - luma) / (2.0 * (1.0 - kb))
    v = (np.array([1.0, 0.0, 0.0]) - luma) / (2.0 * (1.0 - kr))
    result = np.empty((3, 4))
    result[:, :3] = np.stack([span * luma, cspan * u, cspan * v]) / top
    result[:, 3] = (black, mid, mid)
    return result.astype(np.float32)


def run_opencv_on_callers_threads() -> None:
    """Make OpenCV run each call on its caller's thread alone (``cv2.setNumThreads(1)``, process-wide). The video
    pipeline calls it as a job starts (``pipeline.video.encode_segments``, ``pipeline.video._write_images`` for image
    outputs, ``pipeline.pipe.interpolate_pipe``): its own
    threads (reading with the thumbnails, the writer's conversions) run side by side, and OpenCV's pool beside
    x264's threads cost a core for nothing (at 1080p on one H200's host, x264 veryfast fed by the writer 211-221 ->
    255-257 output frames/s on a synthetic clip, the conversion alone 2.0 -> 1.0 cores at the same rate; on the
    2-core CPU machine a 1080p thumbnail 2.7 -> 1.6 ms of CPU at the same wall time: F75)."""
    import cv2

    cv2.setNumThreads(1)


def _samples(values: np.ndarray, layout: YuvLayout) -> np.ndarray:
    """Float samples rounded to the nearest and saturated to the layout's depth, in its dtype."""
    import cv2

    if layout.depth == 8:
        return cv2.convertScaleAbs(values)  # (the values are never negative: the offsets keep them above 0)
    return np.clip(values + 0.5, 0, (1 << layout.depth) - 1).astype(layout.dtype)


def rgb_to_yuv(frame: np.ndarray, layout: YuvLayout) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Y, Cb and Cr planes of an H x W x 3 (or x 4: alpha left out) uint8 or uint16 RGB frame, each a
    contiguous array of ``layout``'s dtype."""
    import cv2

    rgb = np.asarray(frame[:, :, :3], np.float32)
    matrix = yuv_from_rgb(layout.matrix, layout.depth, layout.full_range,
                          65535.0 if frame.dtype == np.uint16 else 255.0)
    size = layout.chroma_size
    if size == (layout.width, layout.height):  # 4:4:4: one transform makes the three planes
        planes = _samples(cv2.transform(rgb, matrix), layout)
        return tuple(np.ascontiguousarray(planes[:, :, k]) for k in range(3))
    luma = _samples(cv2.transform(rgb, matrix[:1]), layout)
    # bilinear at exactly half a side samples the middle of each block, its average, at half INTER_AREA's time;
    # odd sides (chroma rounded up) take INTER_AREA
    halves = all(2 * c in (s, 2 * s) for c, s in zip(size, (layout.width, layout.height)))
    small = cv2.resize(rgb, size, interpolation=cv2.INTER_LINEAR if halves else cv2.INTER_AREA)
    # all three rows: OpenCV's 3-to-3 transform is several times faster than its 3-to-2 one
    chroma = _samples(cv2.transform(small, matrix), layout)
    return luma, np.ascontiguousarray(chroma[:, :, 1]), np.ascontiguousarray(chroma[:, :, 2])
