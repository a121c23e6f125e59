"""YUV4MPEG2 pipes: ``pipeline.pipe`` on in-memory streams (layouts, rates, cuts, errors)."""

import io
from fractions import Fraction
from typing import List, Tuple

import numpy as np
import pytest

from media.y4m import Y4MError, parse_header
from pipeline.pipe import interpolate_pipe
from pipeline.video import VideoOptions

def _split(stream: bytes) -> Tuple[bytes, List[bytes]]:
    """(header line, frame payloads) of a whole y4m stream."""
    header_line, _, rest = stream.partition(b"\n")
    header = parse_header(header_line + b"\n", "test")
    frames = []
    while rest:
        marker, _, rest = rest.partition(b"\n")
        assert marker.startswith(b"FRAME")
        frames.append(rest[:header.frame_bytes])
        assert len(frames[-1]) == header.frame_bytes
        rest = rest[header.frame_bytes:]
    return header_line, frames


def _stream(frames: List[np.ndarray], colour: str = "C420jpeg", rate: str = "25:1", tags: str = "Ip A1:1") -> bytes:
    """A y4m stream of the given Y, U, V planes per frame (already in the layout's sizes and dtype)."""
    height, width = frames[0][0].shape
    head = f"YUV4MPEG2 W{width} H{height} F{rate} {tags} {colour}\n".encode()
    return head + b"".join(b"FRAME\n" + b"".join(p.tobytes() for p in planes) for planes in frames)


def _planes(value: int, shape: Tuple[int, int], chroma: Tuple[int, int], dtype: str, u: int, v: int):
    return (np.full(shape, value, dtype), np.full(chroma, u, dtype), np.full(chroma, v, dtype))


def _run_pipe(stream: bytes, interpolator, **options) -> Tuple[dict, bytes]:
    sink = io.BytesIO()
    stats = interpolate_pipe(io.BytesIO(stream), sink, interpolator, VideoOptions(**options), progress=False)
    return stats, sink.getvalue()


@pytest.mark.parametrize("colour, chroma, dtype, top", [
    ("C420jpeg", (4, 6), "u1", 255), ("C422", (8, 6), "u1", 255), ("C444", (8, 12), "u1", 255),
    ("C420p10", (4, 6), "<u2", 1023), ("C422p10", (8, 6), "<u2", 1023), ("C444p10", (8, 12), "<u2", 1023),
    ("C444p12", (8, 12), "<u2", 4095)])
def test_each_layout_and_depth_keeps_its_header_and_converts_back_closely(colour, chroma, dtype, blend_interpolator,
                                                                         top):
    """8, 10 and 12 bits at 4:2:0, 4:2:2 and 4:4:4: the header is kept except its rate, originals are bit-exact,
    and an interpolated frame between two frames of one (in-gamut) colour comes back that colour (to 1 code per 8
    bits)."""
    scale = (top + 1) // 256
    frames = [_planes(v * scale, (8, 12), chroma, dtype, 120 * scale, 136 * scale) for v in (60, 60, 120, 120)]
    stats, out = _run_pipe(_stream(frames, colour, tags="Ip A4:3 XCOLORRANGE=LIMITED"), blend_interpolator, factor=2)
    header, payloads = _split(out)
    assert header == f"YUV4MPEG2 W12 H8 F50:1 Ip A4:3 XCOLORRANGE=LIMITED {colour}".encode()
    assert stats["frames_out"] == 8 == len(payloads)
    for i, planes in enumerate(frames):
        assert payloads[2 * i] == b"".join(p.tobytes() for p in planes)
    between = np.frombuffer(payloads[1], dtype).astype(int)  # frames 0 and 1 are equal: t = 0.5 is that frame
    original = np.frombuffer(payloads[0], dtype).astype(int)
    assert np.abs(between - original).max() <= scale


def test_fps_conversion_and_slow_motion_count_as_for_files(blend_interpolator):
    frames = [_planes(16 + 20 * i, (8, 12), (4, 6), "u1", 128, 128) for i in range(10)]
    stats, out = _run_pipe(_stream(frames, rate="25:1"), blend_interpolator, fps=Fraction(60))
    assert _split(out)[0].split()[3] == b"F60:1"
    assert stats["frames_out"] == len(_split(out)[1]) == 24  # 10 frames at 25 fps last 0.4 s: 24 at 60 fps
    stats, out = _run_pipe(_stream(frames, rate="30000:1001"), blend_interpolator, factor=3, slowmo=True)
    assert _split(out)[0].split()[3] == b"F30000:1001" and len(_split(out)[1]) == 30


def test_a_cut_is_copied_not_interpolated(blend_interpolator):
    dark = [_planes(20, (8, 12), (4, 6), "u1", 128, 128) for _ in range(4)]
    bright = [_planes(230, (8, 12), (4, 6), "u1", 128, 128) for _ in range(4)]
    stats, out = _run_pipe(_stream(dark + bright), blend_interpolator, factor=2)
    payloads = _split(out)[1]
    assert stats["cuts"] == 1 and len(payloads) == 16
    originals = [b"".join(p.tobytes() for p in planes) for planes in dark + bright]
    assert payloads[7] in originals  # the frame between the shots is one of them, not a blend
    assert len(blend_interpolator.calls) == 6  # 7 pairs, the one across the cut not interpolated


def test_a_truncated_stream_ends_the_output_at_whole_frames_and_says_so(blend_interpolator):
    frames = [_planes(16 + 20 * i, (8, 12), (4, 6), "u1", 128, 128) for i in range(5)]
    stream = _stream(frames)
    sink = io.BytesIO()
    with pytest.raises(Y4MError, match=r"ended inside frame 4 .* output ends after 8 frames, interpolated from the 4 "):
        interpolate_pipe(io.BytesIO(stream[:-10]), sink, blend_interpolator, VideoOptions(factor=2), progress=False)
    assert len(_split(sink.getvalue())[1]) == 8


@pytest.mark.parametrize("stream, message", [
    (b"", "not a YUV4MPEG2 stream"), (b"RIFF....", "not a YUV4MPEG2 stream"),
    (b"YUV4MPEG2 W12 H8 F25:1 Cmono\n", "Cmono is not supported"),
    (b"YUV4MPEG2 W12 H8 C420\n", "needs a frame size and a frame rate"),
    (b"YUV4MPEG2 W12 H8 F25:1 C420\n", "holds no frames")])
def test_streams_it_cannot_read_are_named(stream, message, blend_interpolator):
    with pytest.raises(Y4MError, match=message):
        _run_pipe(stream, blend_interpolator)
