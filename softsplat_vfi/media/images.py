"""Image files <-> float RGB arrays in [0, 1].

Reads png/jpg/bmp/tif(f)/webp, 8- or 16-bit, gray/RGB/RGBA. Alpha is kept aside
and returned separately so that callers can interpolate it too; writing keeps
the bit depth the caller asks for. Outputs are written atomically (temporary
name in the same folder, then rename), so a failed write never leaves a
finished-looking file; they get the permissions the user's umask gives new files,
and a file system error is one line naming the path and the cause
(``media.files.OutputError``).
"""

from __future__ import annotations

import zlib
from pathlib import Path
from types import ModuleType
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from .errors import FieldError, Said
from .files import atomic_write, check_folder, check_not_input

READ_EXTENSIONS = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"}
WRITE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp"}


class ImageError(FieldError):
    """A user-facing problem with an image file; the message says what to do (an option to change by its field
    name; ``media.errors``)."""


def read_image(path: Path) -> Tuple[np.ndarray, Optional[np.ndarray], int]:
    """Return (rgb float32 H x W x 3 in [0, 1], alpha H x W or None, bit depth 8 or 16)."""
    rgb, alpha, depth, _ = read_image_channels(path)
    return rgb, alpha, depth


def read_image_channels(path: Path) -> Tuple[np.ndarray, Optional[np.ndarray], int, int]:
    """``read_image``'s (rgb, alpha, bit depth) and the file's channel count as decoded: 1 for a grey image (its
    three RGB channels are equal), 3 for colour, 4 with alpha."""
    import cv2

    path = Path(path)
    if path.is_dir():  # ("unsupported extension ''" before)
        raise ImageError(Said("{path} is a folder, not an image file: name an image in it, or read the folder as "
                              "frames with {frames:={path}} {out:=OUT/%06d.png}", path=path))
    if path.suffix.lower() not in READ_EXTENSIONS:
        raise ImageError(f"{path}: unsupported extension '{path.suffix}' "
                         f"(use one of {', '.join(sorted(READ_EXTENSIONS))})")
    if not path.is_file():
        raise ImageError(f"{path}: no such file")
    try:
        encoded = path.read_bytes()
    except OSError as exc:
        raise ImageError(f"{path}: cannot be read ({exc.strerror})") from None
    problem = _png_problem(encoded) if encoded.startswith(_PNG_SIGNATURE) else ""
    if problem:
        # (said before OpenCV's decoder sees it, which would print libpng's own "libpng error: ..." first)
        raise ImageError(f"{path}: the PNG file is {problem}")
    if encoded.startswith(_JPEG_SIGNATURE) and _jpeg_truncated(encoded):
        # (OpenCV's decoder only says it failed: "corrupt or not an image" would leave the user guessing)
        raise ImageError(f"{path}: the JPEG file is truncated (an interrupted copy or download?)")
    data = _decode(cv2, encoded) if encoded else None
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
    return np.ascontiguousarray(rgb, dtype=np.float32) / scale, alpha, depth, 1 if data.ndim == 2 else data.shape[2]


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def image_size(path: Path) -> Optional[Tuple[int, int]]:
    """(width, height) from the header of a PNG, JPEG or BMP file, read without decoding it (a few bytes: what a
    frame will take in memory is known before it is allocated); None for another format or a header not read."""
    try:
        with open(path, "rb") as f:
            head = f.read(26)
            if head.startswith(_PNG_SIGNATURE) and head[12:16] == b"IHDR":
                return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
            if head.startswith(b"BM"):
                return abs(int.from_bytes(head[18:22], "little", signed=True)), \
                    abs(int.from_bytes(head[22:26], "little", signed=True))
            pos = 2 if head.startswith(_JPEG_SIGNATURE) else -1
            while pos >= 0:  # the JPEG's segments, each FF, its kind and its length, up to a frame header (SOFn)
                f.seek(pos)
                segment = f.read(9)
                if len(segment) < 9 or segment[0] != 0xFF:
                    return None
                if 0xC0 <= segment[1] <= 0xCF and segment[1] not in (0xC4, 0xC8, 0xCC):
                    return int.from_bytes(segment[7:9], "big"), int.from_bytes(segment[5:7], "big")
                pos += 2 + int.from_bytes(segment[2:4], "big")
    except OSError:
        pass
    return None


def _png_problem(data: bytes) -> str:
    """What is wrong with a PNG file's chunks (length, type, data, CRC each, up to IEND), "" where nothing is:
    cut short, or a critical chunk (the header, palette or picture data) whose data fails its checksum (damaged on
    a disk or in a transfer; libpng too refuses those, ancillary chunks it passes over)."""
    view = memoryview(data)
    pos = len(_PNG_SIGNATURE)
    while pos + 12 <= len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind = data[pos + 4:pos + 8]
        end = pos + 12 + length
        if end > len(data):
            break
        critical = kind[:1].isupper()
        if critical and zlib.crc32(view[pos + 4:end - 4]) != int.from_bytes(data[end - 4:end], "big"):
            return f"damaged: its {kind.decode('latin-1')} chunk fails its checksum (a bad copy, or a failing disk?)"
        if kind == b"IEND":
            return ""
        pos = end
    return "truncated (an interrupted copy or download?)"


_JPEG_SIGNATURE = b"\xff\xd8\xff"


def _jpeg_truncated(data: bytes) -> bool:
    """Whether a JPEG file ends before its picture does: no end-of-image marker (FF D9) after its last
    start-of-scan (FF DA). Coded picture data never holds those two bytes (an FF in it is followed by 00), and an
    Exif thumbnail's own markers come before the main picture's last scan, so its end marker does not count."""
    return data.rfind(b"\xff\xd9") < data.rfind(b"\xff\xda")


def _decode(cv2: ModuleType, encoded: bytes) -> Optional[np.ndarray]:
    """``cv2.imdecode``, None where it fails, without OpenCV's own log lines ("[ERROR:0@0.01] ... TIFF_Error"),
    which came before the one-line error that says the same."""
    level = cv2.utils.logging.getLogLevel()
    cv2.utils.logging.setLogLevel(cv2.utils.logging.LOG_LEVEL_SILENT)
    try:
        return cv2.imdecode(np.frombuffer(encoded, np.uint8), cv2.IMREAD_UNCHANGED)
    finally:
        cv2.utils.logging.setLogLevel(level)


def _check_extension(path: Path) -> None:
    if path.suffix.lower() not in WRITE_EXTENSIONS:
        raise ImageError(f"{path}: unsupported output extension '{path.suffix}' "
                         f"(use one of {', '.join(sorted(WRITE_EXTENSIONS))})")


def check_writable(path: Path) -> None:
    """Fail early, before any work, if ``path`` cannot be written (extension, folder, the folder takes files)."""
    path = Path(path)
    if str(path) == "-":
        raise ImageError(Said("{out:=-}: images are written to files: name one, such as mid.png (standard output "
                              "takes only a YUV4MPEG2 stream of frames)"))
    if path.is_dir():  # (found only when the finished frame was written, before; then as its extension '')
        raise ImageError(f"{path} is a folder: name an image file in it, such as {path / 'mid.png'}")
    _check_extension(path)
    if not path.parent.is_dir():
        raise ImageError(f"{path}: folder '{path.parent}' does not exist (create it first)")
    check_folder(path.parent)


def check_image_outputs(outputs: Sequence[Path], inputs: Iterable[Path], width: int, height: int,
                        depth: int = 8, space_check: bool = True) -> None:
    """Before interpolating: no output is an input, and every output's folder takes files and has room for
    them, measured on the inputs: an output takes about what an input of its format takes (the same content,
    encoded alike); outputs of a format no input has are not counted (the write says if the disk is full).
    Raises OutputError (a ValueError) with one line naming the cause. ``width``, ``height``, ``depth``: the
    outputs' (kept for callers; the room comes from the inputs' sizes)."""
    outputs = [Path(p) for p in outputs]
    inputs = [Path(p) for p in inputs]
    check_not_input(outputs, inputs)
    sizes: Dict[str, List[int]] = {}
    for path in inputs:
        try:
            sizes.setdefault(path.suffix.lower(), []).append(path.stat().st_size)
        except OSError:
            pass
    for folder in dict.fromkeys(p.parent for p in outputs):
        mine = [p for p in outputs if p.parent == folder]
        for path in mine:
            _check_extension(path)
        like = [sizes.get(p.suffix.lower(), []) for p in mine]
        need = sum(max(found) for found in like if found) if space_check else 0
        check_folder(folder, need)


# formats that hold 8-bit samples only
_EIGHT_BIT = (".jpg", ".jpeg", ".webp", ".bmp")


def write_image(path: Path, rgb: np.ndarray, alpha: Optional[np.ndarray] = None, depth: int = 8) -> None:
    """Write float RGB in [0, 1] (H x W x 3, or H x W grey without alpha; rounded, clipped), atomically, with the
    permissions the umask gives new files. A file system failure raises OutputError naming the path and the
    cause; nothing is left under its name."""
    path = Path(path)
    _check_extension(path)
    if path.suffix.lower() in _EIGHT_BIT:
        depth = 8
    scale, dtype = (65535.0, np.uint16) if depth == 16 else (255.0, np.uint8)
    data = rgb if rgb.ndim == 2 else rgb[:, :, ::-1]
    if alpha is not None:
        data = np.concatenate([data, alpha[:, :, None]], axis=2)
    _encode_and_write(path, np.clip(np.rint(data * scale), 0, scale).astype(dtype))


def write_frame(path: Path, frame: np.ndarray, keep_alpha: bool = True) -> None:
    """Write an integer frame (H x W x 3 RGB, or x 4 with alpha; uint8 or uint16) as ``write_image`` writes it on
    [0, 1] at the frame's depth (alpha where ``keep_alpha``): the same bytes, without converting to float and back
    where the file holds the frame's depth."""
    path = Path(path)
    alpha = frame.shape[2] == 4 and keep_alpha
    if frame.dtype == np.uint16 and path.suffix.lower() in _EIGHT_BIT:  # to 8 bits: write_image's rounding
        values = frame.astype(np.float32) / 65535.0
        write_image(path, values[:, :, :3], values[:, :, 3] if alpha else None)
        return
    _check_extension(path)
    _encode_and_write(path, np.ascontiguousarray(frame[:, :, [2, 1, 0, 3] if alpha else [2, 1, 0]]))


def _encode_and_write(path: Path, data: np.ndarray) -> None:
    """``data`` (BGR or BGRA, as OpenCV takes it) encoded in memory as ``path``'s format, then written by Python: a
    failed write has an errno (OpenCV's imwrite says only False)."""
    import cv2

    ok, encoded = cv2.imencode(path.suffix, data)
    if not ok:
        raise ImageError(f"{path}: the image could not be encoded as {path.suffix}")
    atomic_write(path, encoded.tobytes())


def as_dtype(frame: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A frame on ``dtype``'s integer scale as that dtype (rounded and clipped unless it is one already)."""
    frame = np.asarray(frame)
    if frame.dtype == dtype:
        return frame
    return np.clip(np.rint(frame), 0, np.iinfo(dtype).max).astype(dtype)


def mix_alpha_linearly(interpolate_colour: Callable[[np.ndarray, np.ndarray, Sequence[float]], List[np.ndarray]],
                       one: np.ndarray, two: np.ndarray, times: Sequence[float]) -> List[np.ndarray]:
    """H x W x 4 integer frames (RGB + alpha) at each t: the colour from ``interpolate_colour`` (H x W x 3 frames
    in, frames on the same integer scale out), the alpha the two frames' alpha mixed linearly in time."""
    colour = interpolate_colour(np.ascontiguousarray(one[:, :, :3]), np.ascontiguousarray(two[:, :, :3]), times)
    a, b = one[:, :, 3:].astype(np.float32), two[:, :, 3:].astype(np.float32)
    return [np.concatenate([as_dtype(c, one.dtype), as_dtype((1.0 - t) * a + t * b, one.dtype)], axis=2)
            for t, c in zip(times, colour)]
