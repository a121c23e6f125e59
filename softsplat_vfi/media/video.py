"""Video files through the ffmpeg program: probing, decoding, encoding and muxing.

ffmpeg comes from the ``imageio-ffmpeg`` package (its bundled binary), or from PATH.
Every call passes an argument list, never a shell string. Decoded frames cross the pipe
as raw RGB: uint8 (rgb24) for 8-bit sources, uint16 (rgb48le) for deeper ones, so 10-bit
video stays 10-bit. Frames to encode cross it in the encoder's own planar Y'CbCr where
``media.yuv`` makes it (4:2:0, 4:2:2 or 4:4:4, the source's matrix), else as RGB that
ffmpeg converts.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import functools
import logging
import math
import os
import queue
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import IO, Callable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from .errors import FieldError, Said
from .files import errno_in, ffmpeg_os_error, os_error, remove_quietly
from .yuv import planar_layout, rgb_to_yuv

log = logging.getLogger(__name__)


class VideoError(FieldError):
    """A user-facing problem with a video file or with ffmpeg; the message says what to do (an option to change by
    its field name: ``codec``, ``pix_fmt``, ``audio_codec``; ``media.errors``)."""


def parse_rate(text: Union[str, float, Fraction]) -> Fraction:
    """'59.94' -> 60000/1001, '23.976' -> 24000/1001, '30000/1001', '60' -> 60."""
    try:
        rate = Fraction(str(text))
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"not a frame rate: {text!r} (use e.g. 60, 59.94 or 60000/1001)") from None
    if rate <= 0:
        raise ValueError(f"frame rate must be positive, got {text!r}")
    if "." in str(text):
        # decimal NTSC spellings (23.976, 29.97, 59.94) mean n * 1000/1001
        ntsc = Fraction(round(rate * Fraction(1001, 1000)) * 1000, 1001)
        if abs(ntsc - rate) < Fraction(1, 200) and ntsc.denominator == 1001:
            return ntsc
    return rate


def ffmpeg_exe() -> str:
    try:
        import imageio_ffmpeg

        return imageio_ffmpeg.get_ffmpeg_exe()
    except Exception:
        found = shutil.which("ffmpeg")
        if found is None:
            raise VideoError("ffmpeg is needed for video: pip install imageio-ffmpeg (bundles it) or install "
                             "ffmpeg") from None
        return found


def _first_lines(stderr: str, count: int) -> List[str]:
    """ffmpeg's first ``count`` non-empty error lines: they name the cause, the ones after it ("Nothing was
    written ...") its effects."""
    return [line.strip() for line in stderr.splitlines() if line.strip()][:count]


def _without_prefix(line: str) -> str:
    """An ffmpeg error line without what it starts with: "[h264 @ 0x...]", "[in#0/matroska,webm @ 0x...]", or
    "[vist#0:0/h264 @ 0x...] [dec:h264 @ 0x...]"."""
    return re.sub(r"^(?:\[[^]]*\]\s*)+", "", line).strip()


class _ErrorLines:
    """ffmpeg's stderr (``-loglevel error``: its error lines), read on a thread as it comes. A pipe that nobody reads
    fills at 64 KiB, and ffmpeg, blocked writing its next line, stops: a damaged input logs a line or more per bad
    packet. The first ``KEPT`` lines are kept, the rest only counted (``count``; "Last message repeated N times"
    counts N), so memory stays bounded; ``os_error``: whether a line names an operating-system cause (``errno_in``:
    a full disk).

    Only error lines: ffmpeg's threads (demuxer, decoder, filters, muxer) share its log, and a line that one of them
    writes in pieces (showinfo's, the banner's) takes another's line into it, which then loses its "[h264 @ 0x...]
    [error]" and reads as the first one's (F82); error lines are written whole."""

    KEPT = 20

    def __init__(self, stream: IO[bytes], name: str) -> None:
        self.lines: List[str] = []
        self.count = 0
        self.os_error = False
        self._thread = threading.Thread(target=self._read, args=(stream,), name=name, daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        for raw in iter(functools.partial(stream.readline, 4096), b""):
            line = raw.decode("utf-8", "replace").strip()
            repeated = re.fullmatch(r"(?:\[\w+\] )?Last message repeated (\d+) times?", line)
            if repeated:
                self.count += int(repeated.group(1))
                continue
            if line:
                self.count += 1
                if len(self.lines) < self.KEPT:
                    self.lines.append(line)
                if errno_in(line) is not None:
                    self.os_error = True

    def join(self) -> None:
        """Wait until ffmpeg's stderr is closed (it has exited, or been killed) and every line of it read."""
        self._thread.join()

    def first(self, count: int = 3, bare: bool = False) -> str:
        """The first ``count`` lines, joined (``bare``: without their "[h264 @ 0x...]"): they name the cause, the
        ones after it its effects."""
        return " / ".join(_without_prefix(line) if bare else line for line in self.lines[:count])[:600]


class _FrameTimes:
    """Each decoded frame's presentation time as ffmpeg has it, from the file of ``ARGS``' ``-stats_enc_pre``: a
    line per frame, its time base and pts, which ffmpeg writes and flushes before it encodes the frame, so before
    the frame's bytes come out of its stdout (``next_time`` reads the line of the frame just read). A file of its
    own, not ffmpeg's log: a decoder's error line that came in the middle of a line showinfo logged in pieces lost
    its "[error]" there (F82)."""

    ARGS = ("-stats_enc_pre_fmt", "{tb} {pts}")
    WAIT = 10.0  # the longest a frame's line is waited for while ffmpeg runs (seconds; it is there already)
    _NO_PTS = -(2 ** 63)  # (AV_NOPTS_VALUE)

    def __init__(self, path: Path, running: Callable[[], bool]) -> None:
        self.path, self._running = path, running
        self._file: Optional[IO[bytes]] = None
        self._partial = b""

    @classmethod
    def args(cls, path: Path) -> List[str]:
        """ffmpeg's output options that write the file ``path``."""
        return ["-stats_enc_pre", f"file:{path}", *cls.ARGS]

    def _line(self) -> Optional[bytes]:
        end = time.monotonic() + self.WAIT
        while True:
            ended = not self._running()  # (before the read: what it wrote before it ended is read then)
            if self._file is None:
                with contextlib.suppress(OSError):
                    self._file = open(self.path, "rb")
            if self._file is not None:
                self._partial += self._file.readline()
                if self._partial.endswith(b"\n"):
                    line, self._partial = self._partial, b""
                    return line
            if ended or time.monotonic() > end:
                return None
            time.sleep(0.001)

    def next_time(self) -> Optional[Fraction]:
        """The presentation time (seconds, as ffmpeg counts them: from the file's start, or from a seek's point)
        of the next frame; None where its line gave none or there was none."""
        line = self._line()
        try:
            base, pts = line.split() if line else (None, None)
            if base is None or int(pts) == self._NO_PTS:
                return None
            return int(pts) * Fraction(base.decode())
        except (ValueError, ZeroDivisionError):
            return None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


def _run(args: Sequence[str], what: str) -> subprocess.CompletedProcess:
    """ffmpeg with ``args`` (callers pass ``-loglevel error``, so its stderr holds errors only); a failure raises
    a VideoError naming ``what`` and ffmpeg's first error lines, the cause rather than its effects."""
    proc = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", *args], capture_output=True)
    if proc.returncode != 0:
        cause = _first_lines(proc.stderr.decode("utf-8", "replace"), 3) or [f"ffmpeg exit status {proc.returncode}"]
        raise VideoError(f"{what} failed: {' | '.join(cause)}")
    return proc


NO_COLOR_TAGS = ("unknown", "unknown", "unknown")  # (matrix, primaries, transfer) of a file that names none


@dataclass
class VideoInfo:
    path: Path
    width: int
    height: int
    pts: List[Fraction]  # presentation time of every frame, seconds from the first, sorted
    rate: Fraction  # frames per second (exact for constant-rate video)
    bit_depth: int
    has_audio: bool
    has_subtitles: bool
    problem: str = ""  # what ffmpeg reported while reading the packets, e.g. "File ended prematurely"
    # pixel aspect (non-square for anamorphic video), of the frames as decoded, i.e. upright
    sample_aspect: Fraction = Fraction(1)
    rotation: int = 0  # the stream's display rotation in degrees; decoding applies it, so frames come upright
    # when the first frame shows, counted from the file's start (which is the earliest stream's start: > 0 when
    # the audio starts before the video); muxing keeps it, so sound and picture stay in sync
    start: Fraction = Fraction(0)
    # colour tags (matrix, primaries, transfer), "unknown" where the file has none: HD from phones and cameras says
    # bt709, HDR says bt2020nc / bt2020 / smpte2084 or arib-std-b67; the output is encoded and tagged the same way
    color: Tuple[str, str, str] = NO_COLOR_TAGS
    # "top first" or "bottom first" for interlaced video (DV, broadcast): decoding deinterlaces it, since two fields
    # from different times in one frame would show as combs and mislead the flow
    interlaced: str = ""
    # the frames carry transparency (png or qtrle in .mov, ProRes 4444, VP8/VP9 with alpha): image output keeps it,
    # video output (H.264/H.265) cannot
    alpha: bool = False
    alpha_decoder: str = ""  # the decoder that keeps it where ffmpeg's default one drops it (libvpx for VP8/VP9)
    # the file's index of the video stream that is interpolated (ffmpeg's "-map 0:N"): the largest moving-picture
    # stream, as ffmpeg itself picks, never a cover picture, wherever the file stores it
    stream: int = 0
    # cover pictures (attached pics: mp4 cover art, mkv image attachments): (stream index, codec), copied to the
    # output where its container holds them
    covers: Tuple[Tuple[int, str], ...] = ()
    other_videos: int = 0  # further moving-picture video streams, not interpolated and not copied
    attachments: int = 0  # other mkv attachments (fonts of styled subtitles), copied into mkv output
    # interlaced video read one frame per field (``at_field_rate``): twice the frames, each field filled in from the
    # fields around it, so every moment the camera took is kept
    field_rate: bool = False
    # the start timecode of camera and broadcast files (mov/mp4 tmcd track, mkv tag), "HH:MM:SS:FF" (";" before
    # the frames for drop-frame), at the video's own rate; "" if none
    timecode: str = ""
    # data streams other than the start timecode (camera telemetry such as GoPro's GPMF, KLV, private data): not
    # copied (Matroska takes none, and what mp4/mov take depends on the data's tag), and named in the run's report
    data_streams: int = 0

    @property
    def frames(self) -> int:
        return len(self.pts)

    @property
    def duration(self) -> Fraction:
        return self.pts[-1] + 1 / self.rate if self.pts else Fraction(0)

    @property
    def variable_rate(self) -> bool:
        """Whether some frame lies off the grid of ``rate`` (by more than a quarter frame): true variable-rate video.
        Frames missing from a constant-rate clip (``missing``) leave gaps on the grid, not this."""
        return any(abs(t * self.rate - round(t * self.rate)) > Fraction(1, 4) for t in self.pts)

    @property
    def missing(self) -> int:
        """Places of the rate's grid between the first and the last frame that hold no frame (a clip cut with
        ``-c copy``, a damaged or truncated file): the output's frames there are interpolated at their times. 0 for
        variable-rate video."""
        if self.variable_rate or not self.pts:
            return 0
        return int(round(self.pts[-1] * self.rate)) + 1 - len(self.pts)


# the YUV matrices that ffmpeg's scale filter can encode with, by the colorspace tag that names them
_SCALE_MATRIX = {"bt709": "bt709", "smpte170m": "bt601", "bt470bg": "bt601", "bt2020nc": "bt2020",
                 "bt2020c": "bt2020", "smpte240m": "smpte240m", "fcc": "fcc"}


def rgb_conversion_filter(matrix_tag: str, pix_fmt: str) -> Optional[str]:
    """The scale filter by which ffmpeg converts RGB to ``pix_fmt`` with the matrix a source tagged ``matrix_tag``
    names, limited range; None where the tag names none ffmpeg's scale filter has (ffmpeg's default then: bt601)."""
    matrix = _SCALE_MATRIX.get(matrix_tag)
    return f"scale=out_color_matrix={matrix}:out_range=tv,format={pix_fmt}" if matrix else None


def _color_tags(stream: str) -> Tuple[str, str, str]:
    """(matrix, primaries, transfer) from the banner's video line, e.g. "yuv420p(tv, bt709, progressive)" (one name:
    all three) or "yuv420p10le(tv, bt2020nc/bt2020/smpte2084, progressive)"; "unknown" where not given."""
    details = re.search(r"\b(?:yuv|nv|p0)[a-z0-9]*\(([^)]*)\)", stream)
    for token in (details.group(1).split(", ") if details else []):
        parts = token.strip().split("/")
        if len(parts) == 3:
            return parts[0], parts[1], parts[2]
        if token.strip() in ("bt709", "smpte170m", "smpte240m"):  # the names all three tags share
            return (token.strip(),) * 3
    return NO_COLOR_TAGS


def snap_to_grid(stamps: List[Fraction], rate: Fraction, tolerance: Fraction) -> List[Fraction]:
    """Frame times within ``tolerance`` of a multiple of 1/rate moved onto it; the others (true variable-rate
    times) kept. Containers that store milliseconds (mkv) put 29.97 or 12 fps frames up to 0.5 ms off their true
    times: snapped back, the original frames are copied to the output instead of interpolated at t = 0.99.
    Unchanged if snapping would put two frames at one time."""
    grid = [Fraction(round(t * rate)) / rate for t in stamps]
    snapped = [g if abs(t - g) <= tolerance else t for t, g in zip(stamps, grid)]
    return snapped if all(a < b for a, b in zip(snapped[:-1], snapped[1:])) else list(stamps)


def grid_rate(stamps: Sequence[Fraction], rates: Sequence[Fraction], tolerance: Fraction) -> Optional[Fraction]:
    """The lowest of ``rates`` (the stream's declared ones) on whose grid every frame time of ``stamps`` (from 0,
    sorted) sits within ``tolerance`` (at most a quarter frame), where the frames fill more than half of the grid's
    places: a constant-rate clip with frames missing, not variable-rate video. None where no rate is one."""
    for rate in sorted(rates):
        places = round(stamps[-1] * rate) + 1
        close = min(tolerance, 1 / (4 * rate))
        if 2 * len(stamps) > places and all(abs(t - Fraction(round(t * rate)) / rate) <= close for t in stamps):
            return rate
    return None


def _codec(stream_line: str) -> str:
    """The codec named first in a banner's stream description ("h264 (High) ..." -> "h264")."""
    return stream_line.split(None, 1)[0].rstrip(",")


def _mp4_cut_short(path: Path) -> bool:
    """Whether an MP4/MOV-family file (first box ``ftyp``) has a top-level box that runs past the end of the file.

    ffmpeg says "moov atom not found" for such a file and for any file that is not a video at all; a box cut off
    is what a copy, download or recording that stopped leaves behind (the index, ``moov``, is often written last).
    Boxes: a 32-bit big-endian size (1: a 64-bit size follows the type; 0: to the end of the file) and a 4-byte type.
    """
    try:
        with open(path, "rb") as f:
            end = os.fstat(f.fileno()).st_size
            pos = 0
            while pos + 8 <= end:
                f.seek(pos)
                head = f.read(16)
                size, kind = int.from_bytes(head[:4], "big"), head[4:8]
                if pos == 0 and kind != b"ftyp":
                    return False
                if size == 1:
                    size = int.from_bytes(head[8:16], "big") if len(head) == 16 else 0
                if size < 8:
                    return False  # 0: the box runs to the end of the file; 1-7: not a box (damaged rather than cut)
                if pos + size > end:
                    return True
                pos += size
            return 0 < pos < end  # a few bytes past the last whole box: a box header cut off
    except OSError:
        return False


def probe(path: Path) -> VideoInfo:
    """Stream facts from ffmpeg's banner and per-packet timestamps (no decoding)."""
    path = Path(path)
    if not path.is_file():
        raise VideoError(f"{path}: no such file")
    banner = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-i", str(path)], capture_output=True)
    text = banner.stderr.decode("utf-8", "replace")
    streams = list(re.finditer(r"Stream #\d+:(\d+)\S*: Video: (.*)", text))
    covers = [m for m in streams if "(attached pic)" in m.group(2)]
    moving = [m for m in streams if m not in covers]
    if not moving:
        if not covers and _mp4_cut_short(path):
            raise VideoError(f"{path}: the file is cut short (an interrupted copy, download or recording?): "
                             f"its video cannot be read")
        what = ("only a cover picture" if covers else "audio only" if re.search(r"Stream #\d+:\d+\S*: Audio:", text)
                else "corrupt or not a video")
        raise VideoError(f"{path}: no video stream found ({what})")

    def size_of(m: re.Match) -> Tuple[int, int]:  # (0, 0) where the banner names none
        found = re.search(r", (\d{2,5})x(\d{2,5})", m.group(2))
        return (int(found.group(1)), int(found.group(2))) if found else (0, 0)

    # the first of the largest (ffmpeg's own default also goes by size); never a cover
    video = max(moving, key=lambda m: math.prod(size_of(m)))
    index = int(video.group(1))
    video_line = video.group(2)
    width, height = size_of(video)
    if not width:
        raise VideoError(f"{path}: cannot read the frame size")
    sar = re.search(r"\[SAR (\d+):(\d+)", video_line)
    sample_aspect = Fraction(int(sar.group(1)), int(sar.group(2))) if sar and int(sar.group(1)) * int(sar.group(2)) \
        else Fraction(1)
    # phone video: coded sideways with a display rotation, which ffmpeg applies while decoding (its default), so
    # the frames arrive upright and a quarter turn swaps their size and pixel aspect
    block = text[video.end():].split("Stream #", 1)[0]
    turn = re.search(r"rotation of (-?[\d.]+) degrees", block)
    rotation = int(round(float(turn.group(1)))) % 360 if turn else 0
    if rotation % 180 == 90:
        width, height, sample_aspect = height, width, 1 / sample_aspect
    fmt = re.search(r"\b(yuv|rgb|gbr|gray|nv|bgr|p0)[a-z0-9]*", video_line)
    depth_match = re.search(r"(?:p|le|be)?(10|12|16)(?:le|be)", fmt.group(0)) if fmt else None
    bit_depth = int(depth_match.group(1)) if depth_match else 8
    color = _color_tags(video_line)
    fields = re.search(r"\b(top|bottom) (?:coded )?first", video_line)
    # transparency: an alpha pixel format, or VP8/VP9 whose alpha sits beside the picture (alpha_mode 1), which
    # only libvpx's decoders return
    side_alpha = re.search(r"alpha_mode\s*:\s*1", block) is not None
    codec = _codec(video_line)
    alpha = side_alpha or re.search(r"\b(?:yuva|rgba|bgra|argb|abgr|gbrap|ya8|ya16)\w*", video_line) is not None
    alpha_decoder = {"vp9": "libvpx-vp9", "vp8": "libvpx"}.get(codec, "") if side_alpha else ""
    proc = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-i", str(path),
                           "-map", f"0:{index}", "-c", "copy", "-f", "framemd5", "-"], capture_output=True)
    if proc.returncode != 0:
        last = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        raise VideoError(f"{path}: cannot read its packets (corrupt?): {' '.join(last)}")
    lines = proc.stdout.decode("ascii", "replace").splitlines()
    tb_line = next((line for line in lines if line.startswith("#tb 0:")), None)
    if tb_line is None:
        raise VideoError(f"{path}: no time base in the stream")
    time_base = Fraction(tb_line.split(":", 1)[1].strip())
    # framemd5 rows: stream, dts, pts, duration, size, hash
    pts = sorted(int(line.split(",")[2]) for line in lines if line and not line.startswith("#"))
    # packets before the file's start: an edit list's leading ones (mp4 and mov cut with -c copy off a key frame),
    # which the decoder decodes as references and shows none of; 36 such of a 96-frame clip made the output
    # 1.5 s longer than the video and its audio
    shown = [p for p in pts if p >= 0]
    pts = shown if shown else pts
    stamps = [(p - pts[0]) * time_base for p in pts] if pts else []
    start = pts[0] * time_base if pts else Fraction(0)  # framemd5 counts from the file's start
    # the banner's rates: the stream's average ("fps") and the one its timestamps are on ("tbr")
    declared = [parse_rate(value) for value in re.findall(r", ([\d.]+) (?:fps|tbr)", video_line)]
    nominal = declared[0] if declared else None
    if len(stamps) >= 2 and stamps[-1] > 0:
        # the mean spacing; the banner's (rounded, NTSC-aware) rate wins when it agrees, since
        # some containers (mkv) round timestamps to milliseconds; where frames are missing (a cut with -c copy, a
        # truncated file), the declared rate whose grid they sit on: 10 fps with a frame missing is not 9
        mean = (len(stamps) - 1) / stamps[-1]
        if nominal and abs(nominal - mean) < mean / 100:
            rate = nominal
        else:
            rate = grid_rate(stamps, declared, time_base) or mean.limit_denominator(1001)
    else:
        rate = nominal or Fraction(25)
    stamps = snap_to_grid(stamps, rate, min(time_base, 1 / (4 * rate)))
    # errors ffmpeg got past (a truncated file, a damaged packet): the readable part is used, and said so
    problem = " ".join(_without_prefix(line)
                       for line in proc.stderr.decode("utf-8", "replace").strip().splitlines()[-2:])
    cover_list = tuple((int(m.group(1)), _codec(m.group(2))) for m in covers)
    timecode = re.search(r"(?i)\btimecode\s*:\s*(\d{2}:\d{2}:\d{2}[:;.]\d{2,3})", text)
    return VideoInfo(path, width, height, stamps, rate, bit_depth, "Audio:" in text, "Subtitle:" in text, problem,
                     sample_aspect, rotation, start, color, f"{fields.group(1)} first" if fields else "", alpha,
                     alpha_decoder, index, cover_list, len(moving) - 1,
                     len(re.findall(r"Stream #\d+:\d+\S*: Attachment:", text)),
                     timecode=timecode.group(1) if timecode else "",
                     data_streams=len([m for m in re.finditer(r"Stream #\d+:\d+\S*: Data: (.*)", text)
                                       if "tmcd" not in m.group(1)]))


def at_field_rate(info: VideoInfo) -> VideoInfo:
    """``info`` of interlaced video as read one frame per field: twice the rate, each frame's second field half a
    frame after its first (``read_frames`` then deinterlaces every frame into two)."""
    if not info.interlaced:
        raise ValueError(f"{info.path}: progressive video has no fields to read one by one")
    half = 1 / (2 * info.rate)
    return replace(info, pts=[p + d for p in info.pts for d in (Fraction(0), half)], rate=2 * info.rate,
                   field_rate=True)


def audio_args(codec: str = "copy", slow: int = 1, bitrate: str = "") -> List[str]:
    """ffmpeg output options for the source's audio: none for a stream copy (``codec`` "copy"), else re-encoded
    with ffmpeg's ``codec`` encoder (aac, libopus, flac, ...) at ``bitrate`` (ffmpeg's "192k" form; "" leaves the
    encoder's default), slowed ``slow`` times with its pitch kept (atempo) where ``slow`` > 1, which only a
    re-encode can do."""
    if bitrate and not re.fullmatch(r"\d+(\.\d+)?[kKM]?", bitrate):
        raise FieldError(Said("{audio_bitrate} {value!r}: give bits per second as ffmpeg takes them, e.g. 192k",
                              value=bitrate))
    if codec == "copy":
        if slow > 1:
            raise FieldError(Said("slowed audio is re-encoded: name an audio encoder with {audio_codec}, e.g. aac or "
                                  "libopus"))
        if bitrate:
            raise FieldError(Said("{audio_bitrate} applies to re-encoded audio: name an encoder with {audio_codec}, "
                                  "e.g. aac or libopus"))
        return []
    args = ["-c:a", codec] + (["-b:a", bitrate] if bitrate else [])
    if slow > 1:
        tempos, rest = [], 1.0 / slow
        while rest < 0.5:  # atempo takes 0.5-100 per instance: 1/8 is three halvings
            tempos.append(0.5)
            rest /= 0.5
        tempos.append(rest)
        args += ["-af", ",".join(f"atempo={tempo:.9g}" for tempo in tempos)]
    return args


def check_audio_fits(source: Path, out: Path, audio: Sequence[str] = ()) -> None:
    """Raise VideoError, naming the fix, if ``out``'s container cannot take the source's audio as ``audio``
    (``audio_args``: a stream copy by default) gives it (TrueHD in mov, AAC in webm, say), or the encoder is
    unknown: a tenth of a second muxed into a scratch file beside ``out``, before any frame is worked on, instead
    of at the end of a long job."""
    # (one per process: torchrun; hidden, random: never a file of the user's)
    scratch = out.with_name(f".audio-check-{os.getpid()}-{secrets.token_hex(4)}{out.suffix}")
    copy = not audio
    try:
        _run(["-y", "-loglevel", "error", "-i", str(source), "-map", "0:a", "-c", "copy", *audio, "-t", "0.1",
              str(scratch)], f"{'copying' if copy else 'encoding'} the audio of {source} into {out.suffix}")
    except VideoError as exc:
        failed = ffmpeg_os_error(str(exc), out.parent, "write into")  # the folder, not the audio
        if failed is not None:
            raise failed from None
        webm = out.suffix.lower() == ".webm"
        if copy:
            why = Said("the audio of {source} does not fit {suffix}: use .mkv, which holds it, or {audio_codec:="
                       + ("libopus" if webm else "aac") + "} to re-encode it", source=source, suffix=out.suffix)
        else:
            encoder = audio[list(audio).index("-c:a") + 1] if "-c:a" in audio else "that encoder"
            why = Said("the audio of {source} encoded with {encoder} does not fit {suffix} (or ffmpeg lacks that "
                       "encoder): use another {audio_codec}{which}", source=source, encoder=encoder, suffix=out.suffix,
                       which=", libopus or libvorbis for .webm" if webm else ", e.g. aac")
        # the cause first; ffmpeg's own first line after it, without its "[muxer @ 0x...]" prefix
        said = re.sub(r"\[[^]]*@ 0x[0-9a-f]+\]\s*", "", str(exc).split(" failed: ", 1)[-1].split(" | ")[0])
        raise VideoError(Said(why.template + " (nothing was interpolated yet; ffmpeg: {said})", **why.values,
                              said=said)) from exc
    finally:
        scratch.unlink(missing_ok=True)


def rescale_timecode(timecode: str, rate: Fraction, rate_out: Fraction) -> str:
    """The start timecode ``timecode`` (at the source's ``rate``) for output at ``rate_out``: hours, minutes and
    seconds kept, the frame field scaled (the frame on show at that moment); drop-frame (";") only where the output
    rate is NTSC's 29.97 or 59.94 family, which counts that way."""
    hours, minutes, seconds, frames = re.split(r"[:;.]", timecode)
    drop = bool(re.search(r"[;.]", timecode)) and rate_out.denominator == 1001 and round(rate_out) % 30 == 0
    scaled = int(int(frames) * Fraction(round(rate_out)) / max(1, round(rate)))
    return f"{hours}:{minutes}:{seconds}{';' if drop else ':'}{scaled:02d}"


def read_frames(info: VideoInfo, alpha: bool = False) -> Iterator[np.ndarray]:
    """Decode every frame in presentation order as H x W x 3 uint8 (or uint16) RGB, one at a time; with ``alpha``
    and a source that has it (``info.alpha``), H x W x 4 RGBA. After the last one ffmpeg's outcome is judged
    (``_judge_decoding``): a VideoError where it failed, a logged warning where it got past errors or lost frames.
    A caller that stops reading early stops ffmpeg, and hears nothing."""
    with contextlib.closing(_decoded(info, alpha)) as decoded:  # (closed with this one: ffmpeg stopped at once)
        for frame, _ in decoded:
            yield frame


def read_timed_frames(info: VideoInfo, alpha: bool = False, first: int = 0) -> Iterator[Tuple[np.ndarray, Fraction]]:
    """``read_frames``' frames, each with its presentation time of ``info.pts`` (seconds from the first frame): the
    time of the packet it was decoded from, found by ffmpeg's own timestamp of the frame. Where a damaged input
    loses frames (a decoder gives no picture for a packet), their times are left out, so that the frames after them
    keep theirs (a video job then makes the frames there from the frames around them, as where a file's packets are
    missing) instead of each moving as many frames earlier as were lost before it. A frame without a timestamp,
    or with one at or before the last frame's, takes the next time; frames after the last packet's time are
    decoded but not given. ``first``: the frames from ``info.pts[first]`` on, ffmpeg seeking to just before it
    (a part of a job: the same frames as decoded from the start)."""
    with contextlib.closing(_decoded(info, alpha, first)) as decoded:
        for frame, index in decoded:
            if index < len(info.pts):
                yield frame, info.pts[index]


def _decoded(info: VideoInfo, alpha: bool, first: int = 0) -> Iterator[Tuple[np.ndarray, int]]:
    """(frame, the index in ``info.pts`` of the packet it came from) for every decoded frame from ``first`` on
    (``read_frames``, ``read_timed_frames``)."""
    deep = info.bit_depth > 8
    channels = 4 if alpha and info.alpha else 3
    pix = {3: "rgb48le" if deep else "rgb24", 4: "rgba64le" if deep else "rgba"}[channels]
    decoder = ["-c:v", info.alpha_decoder] if channels == 4 and info.alpha_decoder else []
    frame_bytes = info.width * info.height * channels * (2 if deep else 1)
    # interlaced frames: each field filled in from the fields around it (bwdif), one frame per frame, or per field
    # (every frame then, so that the count is exactly twice the frames')
    mode = "send_field:deint=all" if info.field_rate else "send_frame:deint=interlaced"
    filters = ["-vf", f"bwdif=mode={mode}"] if info.interlaced else []
    # from frame ``first``: ffmpeg seeks to halfway between it and the frame before (counted from the file's start),
    # decodes from the key frame before and shows the frames from there on, timed from there
    # (read one frame per field, at the frame's first field: a seek shows whole frames)
    first -= first % 2 if info.field_rate else 0
    seek = "" if first <= 0 else f"{float(info.start + (info.pts[first - 1] + info.pts[first]) / 2):.6f}"
    # each frame's timestamp: a line of its own in a file beside (its log holds only errors)
    folder = Path(tempfile.mkdtemp(prefix="softsplat-frame-times-"))
    try:
        proc = subprocess.Popen([ffmpeg_exe(), "-hide_banner", "-nostdin", "-nostats", "-loglevel", "error",
                                 *decoder, *(["-ss", seek] if seek else []), "-i", str(info.path), "-map",
                                 f"0:{info.stream}", *filters, "-fps_mode", "passthrough",
                                 # (the raw output in the frames' own time base: in the encoder's default, 1/rate,
                                 # two frames of an mkv's millisecond times after a seek met on one tick, and its
                                 # muxer logged each as an error)
                                 "-enc_time_base", "filter", *_FrameTimes.args(folder / "times.txt"),
                                 "-f", "rawvideo", "-pix_fmt", pix, "-"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    times = _FrameTimes(folder / "times.txt", lambda: proc.poll() is None)
    # its log read as it comes: a damaged input logs a line or more per bad packet, and at 64 KiB unread ffmpeg
    # would stop, waiting to write the next, and this read with it
    errors = _ErrorLines(proc.stderr, "frame-reader-errors")
    offset = Fraction(seek) if seek else Fraction(0)
    # ``expected``: the packet after the last frame's (the frame lost first: the first packet skipped)
    decoded, expected, first_lost = 0, max(first, 0), None
    try:
        while True:
            data = proc.stdout.read(frame_bytes)
            if len(data) < frame_bytes:
                break
            decoded += 1
            time = times.next_time()
            index = _packet_index(info, None if time is None else time + offset, expected, anywhere=decoded == 1)
            if first_lost is None and index > expected:
                first_lost = expected
            expected = index + 1
            frame = np.frombuffer(data, dtype="<u2" if deep else np.uint8)
            yield frame.reshape(info.height, info.width, channels), index
        # (not reached where the caller stops reading early: the kill below is then ours, and says nothing)
        code = proc.wait()
        errors.join()
        if first_lost is None and expected < info.frames:
            first_lost = expected
        _judge_decoding(info, code, errors, decoded, info.pts[first_lost] if first_lost is not None else None,
                        first)
    finally:
        proc.stdout.close()
        proc.kill()
        proc.wait()
        errors.join()
        proc.stderr.close()
        times.close()
        shutil.rmtree(folder, ignore_errors=True)


def _packet_index(info: VideoInfo, time: Optional[Fraction], expected: int, anywhere: bool = False) -> int:
    """The index in ``info.pts`` of the frame that ffmpeg timed at ``time`` (seconds from the file's start, as
    ``info.start``): the nearest, or ``expected`` (the one after the last frame's) where it has no time or the
    nearest is before ``expected``; with ``anywhere`` (a decode's first frame) the nearest wherever it is."""
    if time is None:
        return expected
    relative = time - info.start
    after = bisect.bisect_left(info.pts, relative)
    nearest = min((i for i in (after - 1, after) if 0 <= i < len(info.pts)),
                  key=lambda i: abs(info.pts[i] - relative), default=expected)
    return nearest if anywhere or nearest >= expected else expected


def _judge_decoding(info: VideoInfo, code: int, errors: _ErrorLines, decoded: int,
                    first_lost: Optional[Fraction] = None, first: int = 0) -> None:
    """After ``read_frames``' last frame: a VideoError where ffmpeg failed (its frames so far are not the video,
    and a caller that holds the last one would fill the rest with it); a warning, logged (the command line's
    ``note:``), where it went on past errors (damaged packets, their pictures concealed) or decoded fewer frames
    than the file's packets (``info.frames``, those from ``first`` on; ``first_lost``: the time of the first frame
    lost): the frames are kept. Errors that ``probe`` met already (``info.problem``: a truncated file's "File ended
    prematurely"), with every frame there, are said there and not again."""
    said = errors.first(bare=True)
    frames = info.frames - first
    since = f" from {float(info.pts[first]):.3f} s" if first else ""
    if code != 0:
        # (69: ffmpeg's -max_error_rate, by default 2/3 of the frames, was passed)
        status = f"killed by signal {-code}" if code < 0 else \
            "exit status 69: too many of its frames failed to decode" if code == 69 else f"exit status {code}"
        raise VideoError(f"cannot decode {info.path}: ffmpeg stopped after {decoded} of its {frames} frames{since} "
                         f"({status})"
                         + (f": {said}" if said else ""))
    short = frames - decoded
    known = errors.count == len(errors.lines) and all(_without_prefix(line) in info.problem for line in errors.lines)
    if short <= 0 and (errors.count == 0 or known):
        return
    count = f"{errors.count} error{'s' * (errors.count != 1)}"
    if short > 0:
        at = f", the first at {float(first_lost):.3f} s" if first_lost is not None else ""
        log.warning("%s: ffmpeg decoded %d of the %d frames its packets hold%s, %d frame%s lost%s%s", info.path,
                    decoded, frames, since, short, "s" * (short != 1), at,
                    f" (it logged {count}; the first: {said})" if errors.count else "")
    else:
        log.warning("%s: ffmpeg got past %s decoding it (damaged data: the frames there may show blocks or smears, "
                    "as a player shows them); the first: %s", info.path, count, said)


# x264's preset names (run.py --preset) as each encoder's own speed setting, fastest first: SVT-AV1's --preset,
# libaom's and libvpx's -cpu-used, NVENC's p1-p7
PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow")
_SPEED = {"libsvtav1": (12, 11, 10, 9, 8, 8, 6, 4, 2), "libaom-av1": (8, 8, 7, 6, 6, 5, 4, 3, 2),
          "libvpx-vp9": (5, 5, 4, 3, 3, 2, 1, 0, 0), "libvpx": (5, 5, 4, 3, 3, 2, 1, 0, 0),
          "nvenc": (1, 1, 2, 3, 3, 4, 5, 6, 7)}


# the top of each constant-quality encoder's --crf scale (NVENC's -cq: 51 as well)
_CRF_TOP = {"libx264": 51, "libx265": 51, "libx264rgb": 51,
            "libsvtav1": 63, "libaom-av1": 63, "libvpx-vp9": 63, "libvpx": 63}


def encoder_quality_args(codec: str, crf: int, preset: str) -> Optional[List[str]]:
    """ffmpeg options that give ``codec`` constant quality ``crf`` (on the encoder's own scale: 0-51 for x264, x265
    and NVENC, 0-63 for VP8, VP9 and AV1; lower is better) at the speed of x264's ``preset``; None for encoders
    without such a setting (ProRes, FFV1, PNG, ...), which then run with their own defaults.

    Without these, VP9 and AV1 encoders ignore --crf and fall back to a default bitrate or quality: at --crf 18 a
    960x540 clip came out 3-4 dB below x264's (37.1 dB libvpx-vp9, 36.0 libsvtav1, against 40.3).
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}: use one of {', '.join(PRESETS)}")
    level = PRESETS.index(preset)
    top = _CRF_TOP.get(codec, 51 if codec.endswith("_nvenc") else None)  # None: no constant-quality setting
    if top is not None and not 0 <= crf <= top:
        raise FieldError(Said("{crf} {value} is outside {codec_name}'s scale: use 0-{top} (lower is better; 18 is the "
                              "default)", value=crf, codec_name=codec, top=top))
    if codec in ("libx264", "libx265", "libx264rgb"):
        return ["-crf", str(crf), "-preset", preset]
    if codec == "libsvtav1":
        return ["-crf", str(crf), "-preset", str(_SPEED[codec][level])]
    if codec in ("libaom-av1", "libvpx-vp9"):  # constant quality needs the bitrate cap off
        return ["-crf", str(crf), "-b:v", "0", "-cpu-used", str(_SPEED[codec][level]), "-row-mt", "1"]
    if codec == "libvpx":  # VP8 takes -b:v as the cap of its constant quality (0 would mean its default bitrate)
        return ["-crf", str(max(crf, 4)), "-b:v", "100M", "-cpu-used", str(_SPEED[codec][level])]
    if codec.endswith("_nvenc"):
        # NVENC reads -cq 0 as "automatic": the nearest real setting is 1
        return ["-rc", "vbr", "-cq", str(max(crf, 1)), "-b:v", "0", "-preset", f"p{_SPEED['nvenc'][level]}"]
    return None


# encoders that keep every bit (or nearly: ProRes, DNxHD): their files are far larger than constant-quality ones
_INTRA = ("prores", "dnxhd", "ffv1", "png", "qtrle", "huffyuv", "ffvhuff", "utvideo", "rawvideo", "magicyuv")


@functools.lru_cache(maxsize=None)
def encoder_pix_fmts(codec: str) -> Tuple[str, ...]:
    """The pixel formats ffmpeg's ``codec`` encoder takes (empty where ffmpeg does not list them)."""
    try:
        text = subprocess.run([ffmpeg_exe(), "-hide_banner", "-h", f"encoder={codec}"], capture_output=True,
                              text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if f"Codec '{codec}' is not recognized" in text or not text.strip():
        raise VideoError(f"ffmpeg has no encoder {codec!r}: see `ffmpeg -encoders` for the ones it has")
    match = re.search(r"Supported pixel formats:\s*([^\n]+)", text)
    return tuple(match.group(1).split()) if match else ()


def output_pix_fmt(codec: str, pix_fmt: Optional[str], width: int, height: int, deep: bool) -> str:
    """``pix_fmt`` if given (checked against what ``codec`` takes), else the default: 4:2:0 (4:4:4 for odd sizes,
    which 4:2:0 cannot hold), 10-bit for 10-bit sources, or the nearest the encoder takes (ProRes: 4:2:2
    10-bit; RGB-only encoders: RGB)."""
    supported = encoder_pix_fmts(codec)
    if pix_fmt is not None:
        if supported and pix_fmt not in supported:
            raise VideoError(Said("{codec_name} cannot encode {value}: use {pix_fmt} {formats}", codec_name=codec,
                                  value=pix_fmt, formats=", ".join(supported[:8])))
        return pix_fmt
    if width % 2 == 0 and height % 2 == 0:
        layouts = ["yuv420p", "yuv422p", "yuv444p"]
    else:  # 4:2:0 cannot hold odd sizes: full chroma rather than cropping or padding
        layouts = ["yuv444p"] + (["yuv422p"] if width % 2 == 0 else [])
    bits = ("10le", "", "12le", "16le") if deep else ("", "10le", "12le", "16le")
    candidates = [layout + b for b in bits for layout in layouts]
    if deep and width % 2 == 0 and height % 2 == 0:
        candidates.insert(1, "p010le")  # NVENC's 10-bit 4:2:0
    candidates += ["rgb48le", "rgb24"] if deep else ["rgb24", "rgb48le"]
    if not supported:
        return candidates[0]
    chosen = next((c for c in candidates if c in supported), None)
    if chosen is None:
        if width % 2 or height % 2:  # e.g. SVT-AV1, which takes 4:2:0 only
            raise VideoError(Said("{codec_name} takes only {formats}, which needs an even width and height; this "
                                  "video is {width}x{height}: use {codec:=libx264} or libvpx-vp9, which keep odd "
                                  "sizes", codec_name=codec, formats=", ".join(supported[:4]), width=width,
                                  height=height))
        chosen = supported[0]
    return chosen


@functools.lru_cache(maxsize=None)
def _encode_error(codec: str, pix_fmt: str, suffix: str) -> str:
    """"" if ffmpeg encodes two small frames with ``codec`` into a ``suffix`` file, else its first error line
    (256 x 256: above the smallest frame hardware encoders take)."""
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-f", "lavfi",
                               "-i", "color=gray:s=256x256:r=25", "-frames:v", "2", "-c:v", codec, "-pix_fmt", pix_fmt,
                               "-y", str(Path(tmp) / f"check{suffix}")], capture_output=True, text=True, timeout=120)
    if proc.returncode == 0:
        return ""
    return " ".join(_first_lines(proc.stderr, 1)) or f"ffmpeg exit status {proc.returncode}"


_CONTAINERS = (".mp4", ".mov", ".mkv")


def segment_suffix(codec: str, pix_fmt: str) -> str:
    """The container of a job's segments for ``codec``: mp4 (exact timestamps), else mov (ProRes, QuickTime
    Animation), else mkv; VideoError where the encoder runs into none (e.g. NVENC without an NVIDIA encoder)."""
    for suffix in _CONTAINERS:
        if not _encode_error(codec, pix_fmt, suffix):
            return suffix
    raise VideoError(f"ffmpeg cannot encode with {codec} ({pix_fmt}) here: {_encode_error(codec, pix_fmt, '.mp4')}")


def check_codec_fits(codec: str, pix_fmt: str, out: Path) -> None:
    """Raise VideoError, naming the fix, before any frame is worked on, if ``codec`` cannot encode here or
    ``out``'s container cannot hold it (ProRes in mp4, say)."""
    segment_suffix(codec, pix_fmt)
    error = _encode_error(codec, pix_fmt, out.suffix.lower())
    if error:
        fits = [suffix for suffix in _CONTAINERS if not _encode_error(codec, pix_fmt, suffix)]
        webm = " (.webm holds VP8, VP9 and AV1: {codec:=libvpx-vp9} or libsvtav1)" if out.suffix.lower() == ".webm" \
            else ""
        raise VideoError(Said("{suffix} cannot hold {codec_name} video ({error}): use {fits}" + webm + " (nothing "
                              "was interpolated yet)", suffix=out.suffix, codec_name=codec, error=error,
                              fits=" or ".join(fits)))


def default_codec(out: Path) -> str:
    """The encoder when none is asked for: VP9 for .webm (which holds no H.264), else x264."""
    return "libvpx-vp9" if out.suffix.lower() == ".webm" else "libx264"


# threads that convert the frames to encode into the encoder's Y'CbCr (media.yuv: 5-9 ms of one core of the
# 2-core CPU machine for a 1080p frame), so that the conversion keeps up with the network beside x264's threads
CONVERT_THREADS = 2
# the encoder's pipe, in bytes: Linux's default of 64 KiB took a 1080p frame in about 95 writes, and a 1 MiB pipe
# carried 40% more frames (F74); at most /proc/sys/fs/pipe-max-size (1 MiB unless raised)
PIPE_BYTES = 1 << 20


def widen_pipe(stream: IO[bytes]) -> None:
    """Give the pipe behind ``stream`` PIPE_BYTES where the system lets it (Linux); else leave it as it is."""
    try:
        import fcntl

        fcntl.fcntl(stream.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):  # not Linux, or a smaller pipe-max-size: the default pipe
        pass


class FrameWriter:
    """Encodes RGB frames piped to ffmpeg into a video file (no audio). Where the encoder takes planar Y'CbCr
    (``media.yuv.planar_layout``), the frames are converted here, by CONVERT_THREADS threads, and cross the pipe
    at half the bytes of RGB at 4:2:0; else ffmpeg converts the RGB it is sent."""

    def __init__(self, path: Path, width: int, height: int, rate: Fraction, bit_depth: int = 8,
                 codec: str = "libx264", crf: int = 18, pix_fmt: Optional[str] = None,
                 preset: str = "medium", sample_aspect: Fraction = Fraction(1),
                 color: Tuple[str, str, str] = NO_COLOR_TAGS) -> None:
        deep = bit_depth > 8
        self.dtype = np.dtype("<u2") if deep else np.dtype(np.uint8)
        pix_fmt = output_pix_fmt(codec, pix_fmt, width, height, deep)
        matrix, primaries, transfer = color if pix_fmt.startswith(("yuv", "nv", "p0", "p2")) else NO_COLOR_TAGS
        self._layout = planar_layout(pix_fmt, width, height, matrix)
        sent = pix_fmt if self._layout is not None else "rgb48le" if deep else "rgb24"
        args = [ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-y",
                "-f", "rawvideo", "-pix_fmt", sent, "-s", f"{width}x{height}",
                "-r", f"{rate.numerator}/{rate.denominator}", "-i", "-",
                "-c:v", codec, "-pix_fmt", pix_fmt]
        args += encoder_quality_args(codec, crf, preset) or []
        filters = []
        if sample_aspect != 1:  # anamorphic input: keep its pixel aspect, or players would show it squeezed
            ratio = f"{sample_aspect.numerator}/{sample_aspect.denominator}"
            filters.append(f"setsar=r={ratio}:max=65535")  # exact (the filter's default max of 100 rounds it)
        conversion = rgb_conversion_filter(matrix, pix_fmt) if self._layout is None else None
        if conversion:  # RGB back to YUV with the source's matrix (ffmpeg's default is bt601)
            filters.append(conversion)
        # tagged like the source, so players decode it as they decoded the source (on the frames: the encoder takes
        # the tags from them)
        tags = [f"{name}={tag}" for name, tag in (("colorspace", matrix), ("color_primaries", primaries),
                                                  ("color_trc", transfer)) if tag != "unknown"]
        if tags or self._layout is not None:  # (frames sent as Y'CbCr are limited range: said so, as swscale does)
            filters.append("setparams=" + ":".join(tags + ["range=tv"]))
        if filters:
            args += ["-vf", ",".join(filters)]
        args.append(str(path))
        self.path = path
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        widen_pipe(self.proc.stdin)
        self._converters = ThreadPoolExecutor(CONVERT_THREADS, thread_name_prefix="frame-writer-convert") \
            if self._layout is not None else None
        # a thread feeds the pipe, so the caller goes on while ffmpeg takes a frame (bounded: 4 queued), each frame
        # as the buffers of a Future (made by the converting threads, or at once)
        self._queue: queue.Queue = queue.Queue(maxsize=4)
        self._broken = False
        self._failed: Optional[BaseException] = None  # a conversion that raised
        self._feeder = threading.Thread(target=self._feed, name="frame-writer", daemon=True)
        self._feeder.start()
        # another reads ffmpeg's errors as they come: a failed write to the file (disk full, say) stops the job at
        # the next frame, where ffmpeg itself would go on reading frames it can no longer write
        self._next_space_check = 0.0
        self._errors = _ErrorLines(self.proc.stderr, "frame-writer-errors")

    # ffmpeg writes its file in 32 KB blocks, and holds up to a segment of small frames before the first: a disk
    # that filled meanwhile shows only when it writes. A folder with less than this free stops the job at once.
    MIN_FREE = 64 * 1024

    def _check_space(self) -> None:
        self._next_space_check = time.monotonic() + 1.0
        try:
            free = shutil.disk_usage(self.path.parent).free
        except OSError:
            return  # not asked here (a network share, a folder removed): ffmpeg's writes will tell
        if free < self.MIN_FREE:
            self.abort()
            raise os_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), self.path)

    def _feed(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._broken:
                continue  # keep draining so that write() never blocks on a dead encoder
            try:
                buffers = item.result()
            except Exception as exc:  # a bug in the conversion: raised on the caller's thread at its next call
                self._failed, self._broken = exc, True
                continue
            try:
                for data in buffers:
                    self.proc.stdin.write(data)
            except (BrokenPipeError, ValueError, OSError):
                self._broken = True

    def write(self, frame: np.ndarray, copy: bool = True) -> None:
        """Queue ``frame`` (H x W x 3) for the encoder. It is converted and written later, by other threads: ``copy``
        False skips the copy that lets the caller change the frame after (a caller whose frames are never changed:
        the bytes are the same, without a copy of each frame on the caller's thread)."""
        if self._broken or self._errors.os_error:
            raise self._stopped()
        if time.monotonic() >= self._next_space_check:
            self._check_space()
        data = np.ascontiguousarray(frame, dtype=self.dtype)
        if copy and data is frame:
            data = data.copy()
        if self._converters is not None:
            item = self._converters.submit(rgb_to_yuv, data, self._layout)
        else:
            item = Future()
            item.set_result((data.reshape(-1).view(np.uint8),))
        self._queue.put(item)

    def _stopped(self) -> BaseException:
        if self._failed is not None:
            self.abort()
            return self._failed
        return self._failure("ffmpeg stopped while writing")

    def _failure(self, what: str) -> VideoError:
        """OutputError naming the cause where ffmpeg's errors name an operating-system one, else VideoError."""
        text = self._stderr()
        return ffmpeg_os_error(text, self.path) or VideoError(f"{what} {self.path}: {text}")

    def _stderr(self) -> str:
        self.proc.kill()
        self.proc.wait()
        self._errors.join()
        return self._errors.first()

    def close(self) -> None:
        self._queue.put(None)
        self._feeder.join()
        self._shut_converters()
        if self._broken or self._errors.os_error:
            raise self._stopped()
        self.proc.stdin.close()
        code = self.proc.wait()
        self._errors.join()  # every error line ffmpeg wrote is read before the outcome is judged
        if code != 0 or self._errors.os_error:
            raise self._failure("ffmpeg could not encode")

    def abort(self) -> None:
        """Stop the encoder and remove its unfinished file (on a full disk it held the space a rerun needs)."""
        self.proc.kill()
        self._queue.put(None)
        self._feeder.join()
        self._shut_converters()
        self.proc.wait()
        self._errors.join()
        remove_quietly(self.path)

    def _shut_converters(self) -> None:
        if self._converters is not None:
            self._converters.shutdown(wait=True, cancel_futures=True)


_KEPT = "rerun the same command to resume: the encoded segments are kept"

# image codecs of cover pictures that go into mkv attachments as they are (others are converted to png)
_COVER_FILES = {"mjpeg": ("image/jpeg", "jpg"), "png": ("image/png", "png")}


def _extract_covers(source: Path, out: Path, covers: Sequence[Tuple[int, str]]) -> List[Tuple[Path, str]]:
    """The source's cover pictures as image files beside ``out`` (to attach to mkv), each with its mime type."""
    files: List[Tuple[Path, str]] = []
    try:
        for j, (index, codec) in enumerate(covers):
            mime, ext = _COVER_FILES.get(codec, ("image/png", "png"))
            picture = out.with_name(f"{out.name}.cover{j}.{ext}")
            files.append((picture, mime))
            _run(["-y", "-loglevel", "error", "-i", str(source), "-map", f"0:{index}", "-frames:v", "1",
                  *(["-c", "copy"] if codec in _COVER_FILES else ["-c:v", "png"]), "-f", "image2", str(picture)],
                 f"reading the cover picture of {source}")
    except VideoError:
        for picture, _ in files:
            picture.unlink(missing_ok=True)
        raise
    return files


def _attach(pictures: List[Tuple[Path, str]], first: int) -> List[str]:
    """ffmpeg arguments attaching image files to mkv output, numbered from attachment stream ``first`` on (those
    before are the copied ones), named cover.jpg (then cover_2.jpg, ...) as players look for."""
    args = []
    for j, (picture, mime) in enumerate(pictures):
        name = f"cover{'' if j == 0 else f'_{j + 1}'}{picture.suffix}"
        args += ["-attach", str(picture), f"-metadata:s:t:{first + j}", f"mimetype={mime}",
                 f"-metadata:s:t:{first + j}", f"filename={name}"]
    return args


def reorder_delay(path: Path) -> int:
    """How many frames the decode order of ``path``'s video runs ahead of its presentation (B-frames: x264 at
    its default settings 2, intra-only codecs 0), from its first packet; 0 where it cannot be read."""
    proc = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-i", str(path),
                           "-map", "0:v:0", "-c", "copy", "-frames:v", "1", "-f", "framecrc", "-"],
                          capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if not line.startswith("#") and len(fields) >= 4 and fields[3].lstrip("-").isdigit() and int(fields[3]) > 0:
            return max(0, round((int(fields[2]) - int(fields[1])) / int(fields[3])))
    return 0


def concat_and_mux(parts: Sequence[Path], source: Path, out: Path, with_audio: bool, with_subtitles: bool,
                   video_start: Fraction = Fraction(0), with_chapters: bool = True,
                   covers: Sequence[Tuple[int, str]] = (), attachments: int = 0, timecode: str = "",
                   audio: Sequence[str] = (), name: Optional[Path] = None, delay: int = 0,
                   durations: Sequence[Fraction] = ()) -> List[str]:
    """Join encoded segments (stream copy) and copy the source's audio (or treat it as ``audio``, options from
    ``audio_args``: re-encoded, slowed), subtitles, chapters and file metadata
    (title, creation time, location) alongside; the video starts ``video_start`` seconds after the audio and
    subtitles, as in the source (VideoInfo.start). Chapters only where times are kept (not for slow motion).
    Cover pictures (``VideoInfo.covers``) go along where the container holds them (mp4/m4v as attached pictures,
    mkv as image attachments), and into mkv the source's other attachments (``attachments``, a count: fonts of
    styled subtitles). ``timecode`` (at the output's rate, ``rescale_timecode``) is written as the start timecode
    (a tmcd track in mp4/mov, a tag in mkv). Returns what was left out: "subtitles", "cover pictures",
    "attachments" or "timecode". ``name`` is the path errors name where ``out`` is its temporary name: a
    file-system failure raises OutputError naming it and the cause, other failures a VideoError.

    ``durations``: each part's exact length in seconds, for parts of one constant rate (mp4 or mov segments):
    the listing states them, and the frames' times are laid on the rate's grid. The concat demuxer otherwise
    starts each part where the last one's length in its container's movie header ends, in milliseconds: at 60
    frames/s a part of 11 frames (183.33 ms, stored as 183) moved the next one 5 ticks early (251 of 1/15360
    s instead of 256). ``delay``: then the segments' largest ``reorder_delay``, for parts whose delays differ (a
    segment of one or two frames has no B-frames, so none): the concat demuxer put such a part's successor's
    decoding times before its own, the muxer nudged them forward a tick at a time, and the stream's declared
    duration came out short by the difference (80 frames at 40/s declared 1.950 s, avg_frame_rate 1600/39). The
    decoding times are laid out again as the frames' times less ``delay`` frames, which is valid in every
    part."""
    suffix = out.suffix.lower()
    listing = out.with_name(out.name + ".concat.txt")
    # quoted for the concat demuxer: a quote inside a name (an output called "Mom's birthday.mp4") closes the
    # quotes, gets a backslash, and opens them again
    lengths = [f"duration {round(d * 1_000_000)}us\n" for d in durations] if durations else [""] * len(parts)
    listing.write_text("".join("file '" + p.resolve().as_posix().replace("'", "'\\''") + "'\n" + length
                               for p, length in zip(parts, lengths)), encoding="utf-8")
    pictures: List[Tuple[Path, str]] = []
    try:
        base = ["-y", "-loglevel", "error"]
        if video_start > 0 and (with_audio or with_subtitles):
            base += ["-itsoffset", f"{float(video_start):.6f}"]
        base += ["-f", "concat", "-safe", "0", "-i", str(listing), "-i", str(source)]
        maps = ["-map", "0:v", "-map_metadata", "1", "-map_chapters", "1" if with_chapters else "-1"]
        if durations:  # each time the nearest of the grid (what is left of the microseconds above), from the first
            maps += ["-bsf:v", f"setts=pts=STARTPTS+round((PTS-STARTPTS)/DURATION)*DURATION:"
                               f"dts=STARTPTS+(N-{delay})*DURATION"]
        if with_audio:
            maps += ["-map", "1:a?"]
        present = [name for name, there in (("subtitles", with_subtitles), ("cover pictures", bool(covers)),
                                            ("attachments", bool(attachments)), ("timecode", bool(timecode))) if there]
        fits = {"subtitles": True, "cover pictures": suffix in (".mp4", ".m4v", ".mkv"),
                "attachments": suffix == ".mkv", "timecode": True}
        wanted = [name for name in present if fits[name]]
        if "cover pictures" in wanted and suffix == ".mkv":
            try:
                pictures = _extract_covers(source, out, covers)
            except VideoError:  # an unreadable cover costs the cover, not the video
                wanted.remove("cover pictures")

        def extra_args(kept: List[str]) -> List[str]:
            args = ["-map", "1:s?"] if "subtitles" in kept else []
            if "timecode" in kept:
                args += ["-timecode", timecode]
            if "attachments" in kept:
                args += ["-map", "1:t"]
            if "cover pictures" in kept:
                args += [a for index, _ in covers for a in ("-map", f"1:{index}")] if suffix != ".mkv" else \
                    _attach(pictures, attachments if "attachments" in kept else 0)
            return args

        # all that fits; where the muxer still refuses (srt subtitles in mp4, say), without subtitles, then
        # video and audio alone
        tries = [wanted, [n for n in wanted if n != "subtitles"], []]
        tries = [t for n, t in enumerate(tries) if t not in tries[:n]]
        for kept in tries:
            try:
                _run(base + maps + extra_args(kept) + ["-c", "copy", *audio, str(out)], f"writing {out}")
                return [name for name in present if name not in kept]
            except VideoError as exc:
                # video and audio alone failed too, or the file system did (no stream left out helps a full disk)
                if kept is tries[-1] or errno_in(str(exc)) is not None:
                    raise
        return present  # (not reached: the last try returns or raises)
    except VideoError as exc:
        out.unlink(missing_ok=True)
        # advice for the cause found only: a file-system error, or (with audio) a muxer that refused the audio
        failed = ffmpeg_os_error(str(exc), name or out, resume=_KEPT)
        if failed is not None:
            raise failed from None
        if with_audio:
            raise VideoError(exc.followed_by(" -- the source's audio may not fit this container: rerun with the "
                                             "same name but .mkv (the encoded video is kept and reused)")) from exc
        raise VideoError(exc.followed_by(f" -- {_KEPT}")) from exc
    finally:
        listing.unlink(missing_ok=True)
        for picture, _ in pictures:
            picture.unlink(missing_ok=True)
