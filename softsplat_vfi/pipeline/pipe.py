"""Interpolation between pipes: a YUV4MPEG2 stream in, a YUV4MPEG2 stream out (``run.py --video - --out -``).

    ffmpeg -i in.mkv -f yuv4mpegpipe - | python run.py --video - --factor 2 --out - | ffmpeg -i - out.mkv

The frames go through the file jobs' own schedule (``pipeline.video.stream_frames``: de-duplication, cut detection,
quadratic paths), with the rate, size, pixel aspect, chroma layout, bit depth and range of the input's header; only
the header's frame rate changes. Output frame j is shown at j / rate, as in a file. Input frames that the output
copies are written as their original bytes (bit-exact); interpolated ones are converted from 16-bit RGB
(``media.y4m``). The input is decoded and converted in a thread ahead of the interpolator, and the output
converted and written in one behind it (``pipeline.prefetch``), as in the file jobs: the thread that calls the network
only calls it. Nothing is written anywhere but the output stream, so there is no work folder and no resume; the
input's length is known only at its end, so the output's last frames (the hold after the last input frame) are
decided then.
"""

from __future__ import annotations

import collections
import itertools
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from typing import BinaryIO, Deque, Iterator, Optional, Tuple

import numpy as np

from ..media.progress import Progress
from ..media.video import VideoError
from ..media.y4m import Y4MError, Y4MHeader, parse_header, rgb16_to_yuv, yuv_to_rgb16
from ..media.yuv import run_opencv_on_callers_threads

from .prefetch import WriteBehind
from .schedule import make_plan
from .video import (WRITE_DEPTH, Interpolator, OutputFrame, VideoOptions, drain_after_slow_pairs, frame_made,
                    stream_frames)

# how many recent input frames keep their original bytes for a bit-exact copy: more than the schedule holds at once
# (the prefetch's 4 anchors, the pair, its neighbours and the one ahead)
_ORIGINALS = 16
# the longest header or frame line read (ffmpeg's are under 100 bytes)
_LINE = 4096
# a stream's length before its end is known: the plan's count until then (the loop stops at the real one)
_OPEN_ENDED = Fraction(10**9)


class PipeClosed(OSError):
    """The reader of the output stream went away (``BrokenPipeError`` while writing)."""


@dataclass
class _Reader:
    """The input stream's frames as 16-bit RGB, keeping the last few frames' original bytes; it stops at the end of
    the stream or at a frame cut short, which it records in ``problem``."""

    source: BinaryIO
    header: Y4MHeader
    count: int = 0
    ended: bool = False
    problem: str = ""
    originals: Deque[Tuple[np.ndarray, bytes]] = field(default_factory=lambda: collections.deque(maxlen=_ORIGINALS))

    def frames(self) -> Iterator[np.ndarray]:
        size = self.header.frame_bytes
        try:
            while True:
                marker = self.source.readline(_LINE)
                if not marker:
                    return
                if not marker.startswith(b"FRAME"):
                    self.problem = f"frame {self.count} has no FRAME marker (not a y4m stream from there on)"
                    return
                data = self.source.read(size)
                if len(data) != size:
                    self.problem = (f"the stream ended inside frame {self.count} ({len(data)} of its {size} bytes): "
                                    f"was the program writing it stopped?")
                    return
                rgb = yuv_to_rgb16(data, self.header)
                self.originals.append((rgb, data))
                self.count += 1
                yield rgb
        finally:
            self.ended = True

    def original(self, frame: np.ndarray) -> bytes:
        """The bytes ``frame`` was decoded from, if it is a recent input frame itself; else b"". (The frames are
        decoded in the prefetch thread, which appends to ``originals`` meanwhile: a snapshot is searched, as
        iterating the deque itself raises when an append comes between two steps.)"""
        return next((data for rgb, data in tuple(self.originals) if rgb is frame), b"")


def _write(sink: BinaryIO, data: bytes) -> None:
    try:
        sink.write(data)
        sink.flush()
    except BrokenPipeError:
        raise PipeClosed("the output pipe was closed by the program reading it (nothing more could be written)") \
            from None


def open_stream(source: BinaryIO, options: VideoOptions, name: str = "standard input") -> Y4MHeader:
    """The stream's header, read from ``source`` and checked with ``options`` before any frame is read (run.py:
    before torch loads): Y4MError for a stream this cannot read, or, where ``source`` can be peeked at (a pipe),
    one that holds no frame; ValueError for options a stream cannot take (--fields, a --factor beyond the plan's
    bound)."""
    if options.field_rate:
        raise VideoError("--fields needs the file reader's deinterlacer: deinterlace before the pipe (ffmpeg -vf "
                         "bwdif=send_field) and send progressive frames")
    header = parse_header(source.readline(_LINE), name)  # (anything but y4m need not be read whole)
    make_plan(_OPEN_ENDED / header.rate, header.rate, options.factor, options.fps, options.slowmo)
    ahead = source.peek(len(b"FRAME")) if hasattr(source, "peek") else None  # (waits for bytes, reads none)
    if ahead == b"":
        raise Y4MError(f"{name}: the stream holds no frames")
    if ahead is not None and len(ahead) >= len(b"FRAME") and not ahead.startswith(b"FRAME"):
        raise Y4MError(f"{name}: frame 0 has no FRAME marker (not a y4m stream after its header)")
    if header.interlacing in ("t", "b", "m"):
        print(f"note: {name} is marked interlaced (I{header.interlacing}): its frames are interpolated as they are; "
              f"deinterlace before the pipe (ffmpeg -vf bwdif) for clean motion", file=sys.stderr)
    return header


def interpolate_pipe(source: BinaryIO, sink: BinaryIO, interpolate: Interpolator, options: VideoOptions,
                     progress: bool = True, name: str = "standard input",
                     header: Optional[Y4MHeader] = None) -> dict:
    """Read a YUV4MPEG2 stream from ``source``, write the interpolated stream to ``sink``; returns counts for the
    report line. ``header``: the stream's, where ``open_stream`` has read it already. Y4MError (a ValueError) for a
    stream this cannot read, PipeClosed when the output's reader leaves; a stream cut short ends the output at the
    last whole frame and raises Y4MError afterwards."""
    if header is None:
        header = open_stream(source, options, name)
    run_opencv_on_callers_threads()  # (reading and writing run in threads of their own)
    plan = make_plan(_OPEN_ENDED / header.rate, header.rate, options.factor, options.fps, options.slowmo)
    reader = _Reader(source, header)
    stamps = (Fraction(i) / header.rate for i in itertools.count())
    stats: dict = {"cuts": 0, "interpolated": 0}
    _write(sink, header.line(plan.rate_out))
    written = 0

    def write(item: Tuple[bytes, OutputFrame]) -> None:
        """One output frame onto the stream, behind the interpolator: an input frame's original bytes, or the frame
        converted (waited for here if it is still being made)."""
        nonlocal written
        data, frame = item
        _write(sink, b"FRAME\n" + (data or rgb16_to_yuv(frame_made(frame), header)))
        written += 1
        bar.update(1)

    with Progress(None, "pipe", disable=not progress) as bar:  # a log gets plain lines, never \r-joined ones
        behind: WriteBehind[Tuple[bytes, OutputFrame]] = WriteBehind(write, depth=WRITE_DEPTH, name="pipe-writer")
        frames = stream_frames(reader.frames(), stamps, plan, interpolate, options, stats, later=True,
                               before_pair=drain_after_slow_pairs(behind))
        try:
            for j, frame in frames:
                # the output's length, known once the input has ended: as for a file of the frames read
                if reader.ended and j >= make_plan(reader.count / header.rate, header.rate, options.factor,
                                                   options.fps, options.slowmo).count:
                    break
                # an input frame's bytes are looked up here, while it is among the reader's recent ones
                behind.put((b"" if callable(frame) else reader.original(frame), frame))
            behind.finish()
        except BaseException:
            behind.stop()  # the frames made before the failure are written, as when writing came first
            raise
        finally:
            frames.close()
    if reader.count == 0 and not reader.problem:
        raise Y4MError(f"{name}: the stream holds no frames")
    if reader.problem:
        raise Y4MError(f"{name}: {reader.problem}; the output ends after {written} frames, interpolated from the "
                       f"{reader.count} whole frames read")
    stats.update(frames_in=reader.count, frames_out=written, rate_in=str(header.rate), rate_out=str(plan.rate_out))
    return stats
