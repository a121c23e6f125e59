"""RGB to planar Y'CbCr (media.yuv) and the video writer that sends it to the encoder (media.video.FrameWriter).

``rgb_to_yuv`` against an exact float64 conversion written here from the textbook formulas and against ffmpeg's
own (swscale); ``planar_layout``'s choice of where the conversion is ours; and FrameWriter end to end with
lossless x264: the decoded planes are the conversion's, bit for bit, the stream is tagged, the pipe is widened, a
conversion that raises stops the job and removes its file, and ``copy=True`` frames may be changed at once."""

import subprocess
import sys
import threading
import time
from fractions import Fraction
from pathlib import Path
from typing import List, Optional, Tuple

import cv2
import numpy as np
import pytest

import softsplat_vfi.media.video as video
from softsplat_vfi.media.video import NO_COLOR_TAGS, PIPE_BYTES, FrameWriter, ffmpeg_exe
from softsplat_vfi.media.yuv import MATRICES, YuvLayout, planar_layout, rgb_to_yuv

Planes = Tuple[np.ndarray, np.ndarray, np.ndarray]

# block of full-resolution chroma that each chroma sample averages: (rows, columns)
BLOCKS = {"420": (2, 2), "422": (1, 2), "444": (1, 1)}


def _smooth(width: int, height: int, seed: int, dtype=np.uint8) -> np.ndarray:
    """A smooth random H x W x 3 RGB field: low-resolution noise upscaled with bicubic interpolation."""
    top = np.iinfo(dtype).max
    noise = np.random.default_rng(seed).uniform(0, top, (max(2, height // 16), max(2, width // 16), 3))
    field = cv2.resize(noise.astype(np.float32), (width, height), interpolation=cv2.INTER_CUBIC)
    return np.clip(np.rint(field), 0, top).astype(dtype)


def _reference(frame: np.ndarray, layout: YuvLayout) -> Planes:
    """The exact conversion in float64, from the textbook formulas (not from media.yuv's helpers): E'Y = Kr R +
    (1 - Kr - Kb) G + Kb B on R, G, B in 0..1, Cb = (B - E'Y) / (2 (1 - Kb)), Cr = (R - E'Y) / (2 (1 - Kr)); in
    limited range Y = 16 + 219 E'Y and C = 128 + 224 C (times 2 ** (depth - 8)), in full range Y = top E'Y and C =
    2 ** (depth - 1) + top C; chroma averaged over each block of the subsampling, then every sample rounded to the
    nearest and clipped."""
    top_in = 65535.0 if frame.dtype == np.uint16 else 255.0
    r, g, b = (frame[:, :, c].astype(np.float64) / top_in for c in range(3))
    kr, kb = MATRICES[layout.matrix]
    luma = kr * r + (1.0 - kr - kb) * g + kb * b
    cb = (b - luma) / (2.0 * (1.0 - kb))
    cr = (r - luma) / (2.0 * (1.0 - kr))
    top = float((1 << layout.depth) - 1)
    mid = float(1 << (layout.depth - 1))
    if layout.full_range:
        black, span, cspan = 0.0, top, top
    else:
        scale = float(1 << (layout.depth - 8))
        black, span, cspan = 16.0 * scale, 219.0 * scale, 224.0 * scale
    rows, cols = BLOCKS[layout.sub]
    height, width = luma.shape

    def blocks(plane: np.ndarray) -> np.ndarray:
        return plane.reshape(height // rows, rows, width // cols, cols).mean(axis=(1, 3))

    def samples(values: np.ndarray) -> np.ndarray:
        return np.clip(np.floor(values + 0.5), 0, top)

    return (samples(black + span * luma), samples(mid + cspan * blocks(cb)), samples(mid + cspan * blocks(cr)))


def _random_frame(width: int, height: int, dtype, seed: int) -> np.ndarray:
    """Uniform noise over the whole range, with a few pure primaries, black and white (the extremes, where full
    range saturates)."""
    top = np.iinfo(dtype).max
    frame = np.random.default_rng(seed).integers(0, top, (height, width, 3), dtype=dtype, endpoint=True)
    corners = [(0, 0, 0), (top, top, top), (top, 0, 0), (0, top, 0), (0, 0, top), (top, top, 0)]
    for j, colour in enumerate(corners):
        frame[2 * j:2 * j + 2, :2] = colour  # a whole 2 x 2 block, so each extreme reaches the chroma too
    return frame


CONVERSIONS = [(sub, depth, dtype, matrix, False)
               for sub in ("420", "422", "444") for depth in (8, 10) for dtype in (np.uint8, np.uint16)
               for matrix in ("bt709", "bt601")]
CONVERSIONS += [("420", 8, np.uint8, "bt709", True), ("422", 10, np.uint16, "bt601", True)]


@pytest.mark.parametrize("sub, depth, dtype, matrix, full_range", CONVERSIONS,
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_rgb_to_yuv_is_within_one_step_of_the_exact_conversion(sub, depth, dtype, matrix, full_range):
    """Every plane within one step of the float64 conversion and at most 1% of samples off at all (float32
    rounding only), for each subsampling, depth, input type and matrix; the planes' shapes (H x W, chroma of
    ``chroma_size``), dtypes (uint8, little-endian uint16 beyond 8 bits) and contiguity are what encoders read."""
    width, height = 96, 64
    layout = YuvLayout(width, height, sub, depth, full_range, matrix)
    frame = _random_frame(width, height, dtype, seed=depth + len(matrix))
    planes = rgb_to_yuv(frame, layout)
    expected_shapes = [(height, width)] + [tuple(reversed(layout.chroma_size))] * 2
    for name, plane, exact, shape in zip("Y Cb Cr".split(), planes, _reference(frame, layout), expected_shapes):
        assert plane.shape == shape, name
        assert plane.dtype == (np.dtype(np.uint8) if depth == 8 else np.dtype("<u2")), name
        assert plane.flags.c_contiguous, name
        diff = np.abs(plane.astype(np.float64) - exact)
        assert diff.max() <= 1, (name, diff.max())
        assert np.count_nonzero(diff) <= 0.01 * diff.size, (name, np.count_nonzero(diff), diff.size)
    if not full_range:  # limited range keeps its headroom: nothing reaches the ends of the word
        assert planes[0].min() >= 16 << (depth - 8) and planes[0].max() <= 235 << (depth - 8)


def test_rgb_to_yuv_leaves_alpha_out():
    """An RGBA frame converts as its RGB does: the fourth channel is ignored, not mixed in."""
    layout = YuvLayout(96, 64, "420", 8, False, "bt709")
    rgb = _random_frame(96, 64, np.uint8, seed=3)
    alpha = np.random.default_rng(4).integers(0, 256, (64, 96, 1), dtype=np.uint8)
    for with_alpha, plain in zip(rgb_to_yuv(np.concatenate([rgb, alpha], axis=2), layout), rgb_to_yuv(rgb, layout)):
        np.testing.assert_array_equal(with_alpha, plain)


def _split(data: bytes, width: int, height: int, chroma: Tuple[int, int]) -> List[Planes]:
    """8-bit planar frames (raw bytes, one after another) as (Y, Cb, Cr) arrays."""
    cw, ch = chroma
    size = width * height + 2 * cw * ch
    assert len(data) % size == 0, (len(data), size)
    frames = []
    for start in range(0, len(data), size):
        buf = np.frombuffer(data, np.uint8, size, start)
        frames.append((buf[:width * height].reshape(height, width),
                       buf[width * height:width * height + cw * ch].reshape(ch, cw),
                       buf[width * height + cw * ch:].reshape(ch, cw)))
    return frames


@pytest.mark.parametrize("matrix, args", [
    ("bt709", ["-vf", "scale=out_color_matrix=bt709:out_range=tv,format=yuv420p"]),
    ("bt601", ["-pix_fmt", "yuv420p"]),
])
def test_rgb_to_yuv_agrees_with_ffmpeg(matrix, args):
    """ffmpeg's own RGB to 4:2:0 conversion (swscale: what the writer used before, and still uses where
    ``planar_layout`` gives None) agrees on a smooth frame: every plane within one step, mean difference < 0.2."""
    width, height = 256, 144
    frame = _smooth(width, height, seed=11)
    proc = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-f", "rawvideo",
                           "-pix_fmt", "rgb24", "-s", f"{width}x{height}", "-i", "-", *args, "-f", "rawvideo", "-"],
                          input=frame.tobytes(), capture_output=True, check=True)
    [theirs] = _split(proc.stdout, width, height, (width // 2, height // 2))
    ours = rgb_to_yuv(frame, YuvLayout(width, height, "420", 8, False, matrix))
    for name, a, b in zip("Y Cb Cr".split(), ours, theirs):
        diff = np.abs(a.astype(np.int16) - b.astype(np.int16))
        assert diff.max() <= 1, (name, diff.max())
        assert diff.mean() < 0.2, (name, diff.mean())


def test_planar_layout_takes_planar_yuv_only():
    """The conversion is ours for planar yuv4xxp formats of the named matrices at sizes the subsampling divides;
    ffmpeg's (None) for RGB, semi-planar formats, constant-luminance bt2020 and odd sizes that 4:2:0 / 4:2:2
    cannot hold."""
    layout = planar_layout("yuv420p", 128, 72, "bt709")
    assert layout == YuvLayout(128, 72, "420", 8, False, "bt709")
    assert layout.chroma_size == (64, 36) and layout.dtype == np.uint8
    layout = planar_layout("yuv422p10le", 128, 72, "unknown")
    assert (layout.sub, layout.depth, layout.matrix, layout.full_range) == ("422", 10, "bt601", False)
    assert layout.chroma_size == (64, 72) and layout.dtype == np.dtype("<u2")
    layout = planar_layout("yuv444p16le", 128, 72, "smpte170m")
    assert (layout.sub, layout.depth, layout.matrix, layout.full_range) == ("444", 16, "bt601", False)
    assert layout.chroma_size == (128, 72)
    assert planar_layout("yuv420p", 128, 72, "bt2020nc").matrix == "bt2020"
    for pix_fmt in ("rgb24", "nv12", "p010le", "gbrp", "yuvj420p", "yuv420p10be"):
        assert planar_layout(pix_fmt, 128, 72, "bt709") is None, pix_fmt
    assert planar_layout("yuv420p", 128, 72, "bt2020c") is None
    assert planar_layout("yuv420p", 127, 72, "bt709") is None
    assert planar_layout("yuv422p", 127, 72, "bt709") is None
    assert planar_layout("yuv420p", 128, 71, "bt709") is None
    assert planar_layout("yuv422p", 128, 71, "bt709").chroma_size == (64, 71)
    assert planar_layout("yuv444p", 127, 71, "bt709").chroma_size == (127, 71)


def _decode(path: Path, pix_fmt: str, width: int, height: int, chroma: Tuple[int, int]) -> List[Planes]:
    """Every frame of ``path`` as 8-bit planes of ``pix_fmt`` (the stream's own format: no conversion)."""
    proc = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-i", str(path),
                           "-f", "rawvideo", "-pix_fmt", pix_fmt, "-"], capture_output=True, check=True)
    return _split(proc.stdout, width, height, chroma)


def _video_line(path: Path) -> str:
    """The video stream's line of ffmpeg's banner for ``path``."""
    banner = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-i", str(path)],
                            capture_output=True, text=True).stderr
    return next(line for line in banner.splitlines() if "Video:" in line)


def _writer(path: Path, pix_fmt: str, color: Tuple[str, str, str] = NO_COLOR_TAGS) -> FrameWriter:
    """A lossless (x264 at crf 0) 128 x 72 writer."""
    return FrameWriter(path, 128, 72, Fraction(25), crf=0, pix_fmt=pix_fmt, preset="veryfast", color=color)


@pytest.mark.parametrize("color, tag", [(("bt709", "bt709", "bt709"), "bt709"), (NO_COLOR_TAGS, "unknown")],
                         ids=["bt709", "untagged"])
def test_frame_writer_encodes_the_conversion_bit_for_bit(tmp_path, color, tag):
    """Frames sent through FrameWriter as yuv420p are, after lossless x264 and decoding, exactly
    ``rgb_to_yuv`` of each frame with the source's matrix (bt709; bt601 for an untagged source), in order; the
    stream is tagged bt709 and limited range where the source was bt709, and carries no matrix tag (nor full
    range) where it was untagged."""
    path = tmp_path / "out.mp4"
    frames = [_smooth(128, 72, seed=20 + j) for j in range(4)]
    writer = _writer(path, "yuv420p", color)
    for frame in frames:
        writer.write(frame)
    writer.close()
    layout = planar_layout("yuv420p", 128, 72, tag)
    assert layout.matrix == ("bt709" if tag == "bt709" else "bt601")
    decoded = _decode(path, "yuv420p", 128, 72, layout.chroma_size)
    assert len(decoded) == len(frames)
    for j, (frame, planes) in enumerate(zip(frames, decoded)):
        for name, got, want in zip("Y Cb Cr".split(), planes, rgb_to_yuv(frame, layout)):
            np.testing.assert_array_equal(got, want, err_msg=f"frame {j} {name}")
    line = _video_line(path)
    if tag == "bt709":
        assert "yuv420p(tv, bt709" in line, line
    else:  # x264 writes no signal type without colour tags: limited range by the H.264 default, as ffmpeg's own
        assert "bt709" not in line and "(pc" not in line and "yuv420p(" in line, line


def _pipe_max() -> Optional[int]:
    """The largest pipe an unprivileged process may ask for, in bytes; None where the system does not say."""
    try:
        return int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except (OSError, ValueError):
        return None


def test_frame_writer_widens_the_encoder_pipe(tmp_path):
    """The encoder's stdin pipe holds PIPE_BYTES (Linux's default of 64 KiB took a 1080p frame in ~95 writes)."""
    if not sys.platform.startswith("linux"):
        pytest.skip("pipe sizes are set with fcntl F_SETPIPE_SZ on Linux only")
    limit = _pipe_max()
    if limit is None or limit < PIPE_BYTES:
        pytest.skip(f"/proc/sys/fs/pipe-max-size ({limit}) is below PIPE_BYTES: the writer keeps the default pipe")
    import fcntl

    writer = _writer(tmp_path / "out.mp4", "yuv420p")
    try:
        size = fcntl.fcntl(writer.proc.stdin.fileno(), getattr(fcntl, "F_GETPIPE_SZ", 1032))
        writer.write(_smooth(128, 72, seed=1))
    finally:
        writer.close()
    assert size == PIPE_BYTES
    assert (tmp_path / "out.mp4").stat().st_size > 0


def test_a_conversion_that_raises_stops_the_writer_and_removes_its_file(tmp_path, monkeypatch):
    """An exception in a converting thread reaches the caller (at a later write or at close) as itself, and the
    encoder's unfinished file is removed. The first frames convert, so the file exists before the failure."""
    real = video.rgb_to_yuv
    failing = threading.Event()

    def convert(frame, layout):
        if failing.is_set():
            raise RuntimeError("boom")
        return real(frame, layout)

    monkeypatch.setattr(video, "rgb_to_yuv", convert)
    path = tmp_path / "out.mp4"
    writer = _writer(path, "yuv420p")
    frame = _smooth(128, 72, seed=2)
    for _ in range(3):
        writer.write(frame)
    deadline = time.monotonic() + 20
    while not path.exists() and time.monotonic() < deadline:  # ffmpeg opens its output at the first frame
        time.sleep(0.02)
    assert path.exists()
    failing.set()
    with pytest.raises(RuntimeError, match="boom"):
        for _ in range(20):
            writer.write(frame)
            time.sleep(0.01)
        writer.close()
    assert not path.exists()
    assert writer.proc.poll() is not None  # the encoder was stopped, not left running


def test_a_copied_frame_may_be_changed_right_after_write(tmp_path, monkeypatch):
    """With ``copy=True`` (the default) the caller may reuse its array at once: zeroing it right after write()
    leaves that frame's encoding alone, even with the conversion delayed until after the zeroing."""
    real = video.rgb_to_yuv

    def slow(frame, layout):
        time.sleep(0.2)  # the caller has overwritten its array by now
        return real(frame, layout)

    monkeypatch.setattr(video, "rgb_to_yuv", slow)
    path = tmp_path / "out.mp4"
    buffer = _smooth(128, 72, seed=5)
    original = buffer.copy()
    writer = _writer(path, "yuv444p")
    writer.write(buffer, copy=True)
    buffer[:] = 0
    writer.write(buffer, copy=True)
    writer.close()
    layout = planar_layout("yuv444p", 128, 72, "unknown")
    first, second = _decode(path, "yuv444p", 128, 72, layout.chroma_size)
    for name, got, want in zip("Y Cb Cr".split(), first, real(original, layout)):
        np.testing.assert_array_equal(got, want, err_msg=name)
    for name, got, want in zip("Y Cb Cr".split(), second, real(np.zeros_like(original), layout)):
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_a_video_job_runs_opencv_on_its_callers_threads(tmp_path, blend_interpolator):
    """OpenCV's own thread pool is set to one thread when a video job starts (pipeline.video.encode_segments): the
    job's threads read, test for cuts and convert side by side, and the pool beside x264 cost a core (F75)."""
    from softsplat_vfi.pipeline.video import VideoOptions, interpolate_video

    clip = tmp_path / "in.mp4"
    subprocess.run([video.ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
                    "testsrc2=size=64x48:rate=12", "-frames:v", "4", "-pix_fmt", "yuv420p", str(clip)], check=True)
    cv2.setNumThreads(3)
    try:
        interpolate_video(clip, tmp_path / "out.mp4", blend_interpolator, VideoOptions(factor=2), progress=False)
        assert cv2.getNumThreads() == 1 and (tmp_path / "out.mp4").is_file()
    finally:
        cv2.setNumThreads(1)  # (conftest's setting for every test)


def test_an_image_sequence_job_runs_opencv_on_its_callers_threads(tmp_path, blend_interpolator):
    """Likewise for image outputs (pipeline.video._write_images): its reading thread's thumbnails and its image
    encoders' threads run side by side."""
    from softsplat_vfi.pipeline.video import VideoOptions, interpolate_video

    clip = tmp_path / "in.mp4"
    subprocess.run([video.ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i",
                    "testsrc2=size=64x48:rate=12", "-frames:v", "4", "-pix_fmt", "yuv420p", str(clip)], check=True)
    cv2.setNumThreads(3)
    try:
        interpolate_video(clip, str(tmp_path / "out_%03d.png"), blend_interpolator, VideoOptions(factor=2),
                          progress=False)
        assert cv2.getNumThreads() == 1 and (tmp_path / "out_001.png").is_file()
    finally:
        cv2.setNumThreads(1)  # (conftest's setting for every test)
