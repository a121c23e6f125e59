"""Image files <-> float RGB arrays in [0, 1].

Reads png/jpg/bmp/tif(f)/webp, 8- or 16-bit, gray/RGB/RGBA. Alpha is kept aside
and returned separately so that callers can interpolate it too; writing keeps
the bit depth the caller asks for. Outputs are written atomically (temporary
name in the same folder, then rename), so a failed write never leaves a
finished-looking file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

READ_EXTENSIONS = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"}
WRITE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"}


class ImageError(ValueError):
    """A user-facing problem with an image file; the message says what to do."""


def read_image(path: Path) -> Tuple[np.ndarray, Optional[np.ndarray], int]:
    """Return (rgb float32 H x W x 3 in [0, 1], alpha H x W or None, bit depth 8 or 16)."""
    import cv2

    path = Path(path)
    if path.suffix.lower() not in READ_EXTENSIONS:
        raise ImageError(f"{path}: unsupported extension '{path.suffix}' "
                         f"(use one of {', '.join(sorted(READ_EXTENSIONS))})")
    if not path.is_file():
        raise ImageError(f"{path}: no such file")
    data = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if data is None:
        raise ImageError(f"{path}: cannot be read as an image (corrupt or not an image)")
    if data.size == 0:
        raise ImageError(f"{path}: the image is empty")
    if data.dtype == np.uint8:
        depth, scale = 8, 255.0
    elif data.dtype == np.uint16:
        depth, scale = 16, 65535.0
    else:
        raise ImageError(f"{path}: unsupported sample type {data.dtype} (8- or 16-bit images only)")
    alpha = None
    if data.ndim == 2:
        rgb = np.repeat(data[:, :, None], 3, axis=2)
    elif data.shape[2] == 4:
        alpha = data[:, :, 3].astype(np.float32) / scale
        rgb = data[:, :, 2::-1]
    elif data.shape[2] == 3:
        rgb = data[:, :, ::-1]
    else:
        raise ImageError(f"{path}: unsupported channel count {data.shape[2]}")
    return np.ascontiguousarray(rgb, dtype=np.float32) / scale, alpha, depth


def check_writable(path: Path) -> None:
    """Fail early, before any work, if ``path`` cannot be written."""
    path = Path(path)
    if path.suffix.lower() not in WRITE_EXTENSIONS:
        raise ImageError(f"{path}: unsupported output extension '{path.suffix}' "
                         f"(use one of {', '.join(sorted(WRITE_EXTENSIONS))})")
    if not path.parent.is_dir():
        raise ImageError(f"{path}: folder '{path.parent}' does not exist (create it first)")


def write_image(path: Path, rgb: np.ndarray, alpha: Optional[np.ndarray] = None, depth: int = 8) -> None:
    """Write float RGB in [0, 1] (rounded, clipped), atomically."""
    import cv2

    path = Path(path)
    check_writable(path)
    if path.suffix.lower() in (".jpg", ".jpeg", ".webp", ".bmp"):
        depth = 8  # these formats hold 8-bit samples only
    scale, dtype = (65535.0, np.uint16) if depth == 16 else (255.0, np.uint8)
    data = rgb[:, :, ::-1]
    if alpha is not None:
        data = np.concatenate([data, alpha[:, :, None]], axis=2)
    data = np.clip(np.rint(data * scale), 0, scale).astype(dtype)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=path.suffix, dir=str(path.parent))
    os.close(fd)
    try:
        if not cv2.imwrite(tmp, data):
            raise ImageError(f"{path}: the image could not be encoded")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
