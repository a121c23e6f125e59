"""Video (and frame-sequence) interpolation as a streaming, resumable job.

Frames are decoded, interpolated and encoded one anchor pair at a time, so memory
does not grow with the video. The output is encoded in segments under
``<out name>.work/`` (``movie.mp4.work``: outputs that share a stem never share state),
held by an exclusive lock (``pipeline.jobs``) so that a second job on the same output
refuses while the first runs; an interrupted job rerun with the same command keeps the
finished segments. A segment holds ``segment_seconds`` of video, or fewer frames where the
device type and the frame size say those take more than ``segment_work_seconds`` (a minute:
``segment_frames``), so an interrupt costs about a minute at most on any device; frame counts
alone decide, so the same command gives the same bytes on a fast machine and a loaded one.
Each segment's name says which output frames it holds.
The final file is assembled under a temporary name in the work folder (segments
joined, the source's audio and subtitles copied unchanged) and renamed when complete.

Nothing the job did not make is deleted or overwritten: the input is only ever read,
an output that is the input is refused, and the work folder is recognised as the
job's by the marker file it writes there (``job.json``); a folder of that name
without it is left alone and the job refused. Before any frame is interpolated, the
output folder must take files; the room the job needs is measured on its first frames
written (``_room_for_the_rest``; ``VideoOptions.space_check``). A file-system failure
during the job is one line (``media.files.OutputError``) naming the path and the
cause, with the finished segments kept for a resume.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass, fields
from fractions import Fraction
from pathlib import Path
from typing import (Any, Callable, Deque, Iterable, Iterator, List, NamedTuple, Optional, Protocol, Sequence, Tuple,
                    Type, Union, runtime_checkable)

import numpy as np

from ..media.declare import frames_fields, option
from ..media.errors import FieldError, Said
from ..media.files import (OutputError, atomic_write, check_folder, check_not_input, check_replaceable, human_size,
                           made_here, mark_made, os_error, same_file)
from ..media.images import as_dtype, mix_alpha_linearly
from ..media.progress import Progress
from ..media.yuv import run_opencv_on_callers_threads
from ..media.video import (PRESETS, FrameWriter, VideoError, VideoInfo, at_field_rate, audio_args,
                           check_audio_fits, check_codec_fits, concat_and_mux, default_codec, output_pix_fmt,
                           parse_rate, probe, read_timed_frames, reorder_delay, rescale_timecode, segment_suffix)

from .jobs import LOCK_NAME, Interrupted, OutputLock, work_folder
from .prefetch import WriteBehind, prefetch
from .schedule import (MAX_IMAGES, MAX_VIDEO_FRAMES, Plan, is_cut, make_plan, source_between, thumb_change, thumbnail)


MOTIONS = ("quadratic", "linear")


@dataclass(frozen=True)
class VideoOptions:
    """How a video or frame-sequence job runs. Every field is declared once below (``media.declare.option``), with
    its default, its help and its command-line flags (``engine.options.add_flags(parser, options=VideoOptions)``,
    read back by ``video_options_from_args``), and whether it changes the frames (a resumed job whose frame options
    differ starts over: ``_frame_options``)."""

    factor: Optional[int] = option(None, "output frames per input frame (default 2)",
                                   flags=[(("--factor",), dict(type=int))])
    # (the flag's text is a rate for parse_rate: video_options_from_args)
    fps: Optional[Fraction] = option(None, "output frame rate instead of --factor, e.g. 59.94 or 60000/1001",
                                     flags=[(("--fps",), {})])
    slowmo: bool = option(
        False, "keep the frame rate, play --factor times slower (drops the audio unless --audio-codec names an "
               "encoder: then the audio is slowed with the picture, its pitch kept)",
        flags=[(("--slowmo",), dict(action="store_true"))])
    # mean |difference| of grey thumbnails in [0, 1] above which frames are a cut (or a third of it, where it is
    # 3x the change around: schedule.is_cut); <= 0 disables
    scene_threshold: float = option(
        0.12, "cut detection: mean grey difference (0-1) above which frames are not interpolated; 0 = off",
        flags=[(("--scene-threshold",), dict(type=float))])
    # > 0: frames closer than this to the previous one are dropped
    dedup_threshold: float = option(
        0.0, "drop (near-)repeated input frames and interpolate across them; optional threshold",
        flags=[(("--dedup",), dict(type=float, nargs="?", const=0.002, dest="dedup_threshold", metavar="DEDUP"))])
    # paths between two frames: "quadratic" through the frames on either side where the shot has them (an
    # interpolator with interpolate_integer_with_neighbours: NeighbourInterpolator), "linear" from the pair alone
    motion: str = option(
        "quadratic", "paths between two frames: quadratic (through the frames on either side of the pair, where "
                     "the shot has them: accelerating and turning motion lands where it was; held-out footage "
                     "+0.77 dB, docs/performance.md) or linear (constant velocity from the pair alone)",
        flags=[(("--motion",), dict(choices=MOTIONS))])
    # interlaced input read one frame per field (twice its frame rate) instead of one per frame
    field_rate: bool = option(
        False, "interlaced --video (DV, broadcast): deinterlace to one frame per field, twice the frame rate (25i "
               "gives 50 frames/s, every moment the camera took), before --factor / --fps apply (--factor 1: no "
               "interpolation); default: one frame per frame",
        flags=[(("--fields",), dict(action="store_true", dest="field_rate"))])
    crf: int = option(
        18, "constant quality, lower is better, on the encoder's own scale: CRF 0-51 for x264/x265, -cq 1-51 for "
            "NVENC, CRF 0-63 for VP8/VP9/AV1 (libvpx, libvpx-vp9, libsvtav1, libaom-av1)",
        flags=[(("--crf",), dict(type=int))])
    # (the flag's auto: the output's default codec, libvpx-vp9 for .webm: video_options_from_args)
    codec: str = option(
        "libx264", "ffmpeg video encoder, e.g. libx264, libx265, libvpx-vp9, libsvtav1, h264_nvenc (NVIDIA GPUs "
                   "with a hardware encoder), prores_ks (.mov); auto: libx264, or libvpx-vp9 for .webm",
        flags=[(("--codec",), dict(default="auto"))])
    # encoder speed in x264's names (media.video.PRESETS), mapped to each encoder's own
    preset: str = option(
        "medium", "encoder speed, in x264's names (mapped to SVT-AV1's presets, libvpx/libaom's cpu-used and NVENC's "
                  "p1-p7): the encoder often limits the pipeline; veryfast encodes about 2x faster than medium at "
                  "the same --crf, into larger files",
        flags=[(("--preset",), dict(choices=PRESETS))])
    pix_fmt: Optional[str] = option(
        None, "output pixel format (default yuv420p, yuv420p10le for 10-bit input, yuv444p for odd sizes, or the "
              "nearest the encoder takes: ProRes yuv422p10le)",
        flags=[(("--pix-fmt",), {})])
    # the source's audio: "copy" (unchanged; dropped in slow motion), or an ffmpeg encoder to re-encode it with
    # (for a container the original does not fit; in slow motion slowed with it, pitch kept)
    audio_codec: str = option(
        "copy", "the source's audio: copy (unchanged, the default) or an ffmpeg audio encoder to re-encode it with, "
                "for a container the original does not fit (AAC into .webm: libopus) or to keep it in --slowmo; "
                "e.g. aac, libopus, flac",
        frames=False, flags=[(("--audio-codec",), {})])
    audio_bitrate: str = option(
        "", "bitrate of re-encoded audio (--audio-codec), e.g. 192k; default: the encoder's own (aac: 128k)",
        frames=False, flags=[(("--audio-bitrate",), {})])
    # the most video one segment holds (a GPU's resume granularity); segments name the frames they hold, so
    # sizing them differently resumes the same job
    segment_seconds: float = option(10.0, "resume granularity of video output", frames=False,
                                    flags=[(("--segment-seconds",), dict(type=float))])
    # the most work one segment holds, in seconds, as estimated from the device type and the frame size
    # (segment_frames; never measured): a resume after an interrupt redoes about this at most (on a CPU, 10 s of
    # video can take a quarter of an hour); no flag: a protocol's own (bench_video's one-segment row)
    segment_work_seconds: float = option(60.0, "the most work one segment holds, in estimated seconds",
                                         frames=False)
    # replace an existing output that this program did not make (a video file, or files named like an image
    # pattern's frames); without it such an output is kept and the job refused before any work
    overwrite: bool = option(
        False, "replace an existing --out image or video, or files named like an image pattern's frames, that this "
               "program did not write (without it they are kept and the job refused; its own outputs are replaced "
               "by a rerun either way)",
        frames=False, flags=[(("--overwrite", "-y"), dict(action="store_true"))])
    # stop the job when the frames written so far, measured, say the rest will not fit (False: write until the
    # disk is full; the finished segments are kept either way)
    space_check: bool = option(
        True, "write until the disk is full instead of stopping when the output's first frames, measured, say the "
              "rest will not fit (pairs: room for outputs the size of the inputs)",
        frames=False, flags=[(("--no-space-check",), dict(action="store_false", dest="space_check"))])

    def __post_init__(self) -> None:
        # (each message names its field as the caller does: scene_threshold here, --scene-threshold on the command
        # line: media.errors.Said)
        if self.motion not in MOTIONS:
            raise FieldError(Said("{motion} {value}: use {choices}", value=repr(self.motion),
                                  choices=" or ".join(MOTIONS)))
        for name in ("scene_threshold", "dedup_threshold"):
            if not 0.0 <= getattr(self, name) <= 1.0:  # (a threshold of 2 found no cut, without a word)
                raise FieldError(Said("{" + name + "} {value}: a mean grey difference, from 0 (off) to 1 (default "
                                      "{default})", value=getattr(self, name), default=getattr(VideoOptions, name)))
        for name in ("segment_seconds", "segment_work_seconds"):
            if not getattr(self, name) > 0:
                raise FieldError(Said("{" + name + "} must be more than 0 seconds, got {value} (default {default})",
                                      value=getattr(self, name), default=getattr(VideoOptions, name)))


def video_options_from_args(args: Any, leave: Sequence[str] = (), **given: Any) -> VideoOptions:
    """The ``VideoOptions`` that a command line's parsed flags give (an ``argparse.Namespace`` of the flags
    ``engine.options.add_flags(parser, options=VideoOptions)`` declares, each stored under its field's name): the
    one mapping of flags to fields. Each field comes from the argument of its name where ``args`` has one, as the
    flag says it (--fps a rate, --codec auto the default codec of ``args.out``); a field without one keeps its
    default (a tool that declares only --factor, --preset and --motion gets the rest as the pipeline's defaults).
    ``leave``: fields kept at their defaults whatever ``args`` says (a pipe's file options); ``given``: fields set
    by the caller instead."""
    values = dict(given)
    for f in fields(VideoOptions):
        if f.name in leave or f.name in given or not hasattr(args, f.name):
            continue
        value = getattr(args, f.name)
        if f.name == "fps":
            value = parse_rate(value) if value else None
        elif f.name == "codec" and value == "auto":
            value = default_codec(Path(args.out))
        values[f.name] = value
    return VideoOptions(**values)


# (one, two, times) -> one frame per t, for colour only: H x W x 3 uint8 or uint16 RGB arrays; results on the
# same scale, ideally of the same dtype (anything else is rounded and clipped to it). Frames with alpha have their
# colour interpolated by it and their alpha mixed linearly in time (with_linear_alpha).
ColourInterpolator = Callable[[np.ndarray, np.ndarray, Sequence[float]], List[np.ndarray]]


@runtime_checkable
class FrameInterpolator(Protocol):
    """An interpolator for integer frames with or without alpha; ``engine.Interpolator`` is one."""

    def interpolate_integer(self, one: np.ndarray, two: np.ndarray, times: Sequence[float]) -> List[np.ndarray]:
        """H x W x 3 (RGB) or H x W x 4 (RGB + alpha) uint8/uint16 frames in, one of the same shape and dtype per t
        out; it decides itself how alpha is interpolated."""


# a frame beside a pair and its distance in time from the pair's nearer frame, in units of the pair's interval
Neighbour = Tuple[np.ndarray, float]


@runtime_checkable
class NeighbourInterpolator(Protocol):
    """An interpolator that also moves pixels along quadratic paths through the frames beside the pair;
    ``engine.Interpolator`` is one."""

    def interpolate_integer_with_neighbours(self, one: np.ndarray, two: np.ndarray, times: Sequence[float],
                                            before: Optional[Neighbour],
                                            after: Optional[Neighbour]) -> List[np.ndarray]:
        """As ``FrameInterpolator.interpolate_integer``, with the frame before ``one`` and the frame after ``two``,
        each with its distance in time from its end of the pair in units of the pair's interval (None: no such
        frame in the shot)."""


@runtime_checkable
class PendingFrame(Protocol):
    """A frame an interpolator is still making or copying; ``engine.Interpolator``'s ``Download``s are."""

    def result(self) -> np.ndarray:
        """The frame (waits for it)."""


@runtime_checkable
class StartingInterpolator(Protocol):
    """A NeighbourInterpolator that can also hand back its frames before they are made, so that the next pair's work
    is queued while they are (a GPU then never waits for the host); ``engine.Interpolator`` is one."""

    def start_integer_with_neighbours(self, one: np.ndarray, two: np.ndarray, times: Sequence[float],
                                      before: Optional[Neighbour],
                                      after: Optional[Neighbour]) -> List[PendingFrame]:
        """As ``NeighbourInterpolator.interpolate_integer_with_neighbours``, each frame as a ``PendingFrame``."""


# what the pipeline takes
Interpolator = Union[FrameInterpolator, ColourInterpolator]

# an output frame as ``_output_frames`` gives it: an array, a call that waits for one (``later``), or None (skipped)
OutputFrame = Union[None, np.ndarray, Callable[[], np.ndarray]]


def frame_made(frame: OutputFrame) -> Optional[np.ndarray]:
    """An output frame as an array (None: skipped), waiting here for one still being made (``later=True``), off the
    thread that runs the network."""
    return frame() if callable(frame) else frame


def _to_int(frame: np.ndarray, dtype: Type[np.integer]) -> np.ndarray:
    scale = 65535.0 if dtype == np.uint16 else 255.0
    return np.clip(np.rint(frame * scale), 0, scale).astype(dtype)



@dataclass
class _Anchor:
    time: Fraction
    frame: np.ndarray
    thumb: np.ndarray


def _anchors(timed: Iterable[Tuple[np.ndarray, Fraction]], dedup: float) -> Iterator[_Anchor]:
    previous = None
    for frame, time in timed:
        thumb = thumbnail(frame)
        if previous is not None and dedup > 0 and thumb_change(thumb, previous.thumb) < dedup:
            continue  # a repeated frame: the interval stretches to the next distinct one
        previous = _Anchor(time, frame, thumb)
        yield previous


class _Interval(NamedTuple):
    """Two consecutive anchors and whether a cut lies between them."""

    start: _Anchor
    end: _Anchor
    cut: bool


def _intervals(anchors: Iterator[_Anchor], threshold: float) -> Iterator[_Interval]:
    """Every pair of consecutive anchors; a lone anchor gives one interval from it to itself."""
    current = next(anchors, None)
    if current is None:
        return
    nxt = next(anchors, None)
    if nxt is None:
        yield _Interval(current, current, False)
        return
    # the thumbnail changes between the last four anchors, for cuts within a scene (is_cut)
    changes: Deque[float] = collections.deque(maxlen=4)
    after = None
    while nxt is not None:
        following = next(anchors, None)  # one anchor ahead: a cut is a change larger than those on both sides
        change = after if after is not None else thumb_change(current.thumb, nxt.thumb)  # (last pass's ``after``)
        after = thumb_change(nxt.thumb, following.thumb) if following is not None else None
        cut = is_cut(changes, change, after, threshold)
        changes.append(change)
        yield _Interval(current, nxt, cut)
        current, nxt = nxt, following


def _neighbours(previous: Optional[_Interval], interval: _Interval,
                following: Optional[_Interval]) -> Tuple[Optional[Neighbour], Optional[Neighbour]]:
    """The anchor before the interval and the anchor after it, each with its distance in time in units of the
    interval's, where no cut separates it (None where one does, or at the ends)."""
    span = interval.end.time - interval.start.time
    before = after = None
    if previous is not None and not previous.cut:
        before = (previous.start.frame, float((interval.start.time - previous.start.time) / span))
    if following is not None and not following.cut:
        after = (following.end.frame, float((following.end.time - interval.end.time) / span))
    return before, after


def _ahead(timed: Iterable[Tuple[np.ndarray, Fraction]], options: VideoOptions) -> Iterator[_Interval]:
    """The intervals of decoded frames, each with its time in seconds (``timed``; de-duplicated, each with its scene
    test), made in a thread a few ahead of the caller, which then only interpolates (``prefetch``)."""
    return prefetch(_intervals(_anchors(timed, options.dedup_threshold), options.scene_threshold), depth=4)


def _output_frames(intervals: Iterator[_Interval], plan: Plan, interpolate: Interpolator,
                   skip: Callable[[int], bool], stats: dict, motion: str = "linear",
                   before_pair: Callable[[], None] = lambda: None,
                   later: bool = False, counted: Optional[range] = None) -> Iterator[Tuple[int, OutputFrame]]:
    """(j, frame) for every output frame in order, from the anchors' intervals (``_intervals``, or ``_ahead``'s);
    frame is None where ``skip(j)`` (already done). With ``motion`` "quadratic" and a NeighbourInterpolator, each pair
    also gets the anchors on either side of it where no cut lies between (``_neighbours``: the choice depends on the
    anchors alone, so a resumed or split job gives each pair the same neighbours). ``before_pair`` is called before
    each call of the interpolator. With ``later`` and a StartingInterpolator, quadratic paths' frames come as calls
    that wait for them: the caller can hand them to a thread that waits, while this one queues the next pair.
    ``stats["cuts"]`` counts the cuts passed; with ``counted`` (a part of a job's output frames), those whose first
    output frame at or after the cut's first anchor is one of them (with the end's frames), so that parts decoded
    over overlapping stretches count each cut once between them."""
    step = with_linear_alpha(interpolate)
    quadratic = motion == "quadratic" and isinstance(interpolate, NeighbourInterpolator)
    starts = quadratic and later and isinstance(interpolate, StartingInterpolator)
    j = 0
    interval = next(intervals, None)
    if interval is None:
        return
    previous = None
    last = interval.start
    while interval is not None:
        current, nxt, cut = interval
        if cut and (counted is None or min(-(-current.time // plan.step), plan.count) in counted):
            stats["cuts"] += 1
        following = next(intervals, None)  # one interval ahead, for the anchor after the pair
        last = nxt
        if current is nxt:  # a lone anchor: held below
            break
        pending = []
        while j < plan.count and plan.time(j) < nxt.time:
            pending.append((j, source_between(plan.time(j), current.time, nxt.time, cut)))
            j += 1
        ts = sorted({s.t for k, s in pending if s.kind == "interpolate" and not skip(k)})
        made = {}
        if ts:
            before_pair()
            dtype = current.frame.dtype
            sides = _neighbours(previous, interval, following) if quadratic else (None, None)
            if starts:
                started = interpolate.start_integer_with_neighbours(current.frame, nxt.frame, ts, *sides)
                made = {t: functools.partial(_finished, frame, dtype) for t, frame in zip(ts, started)}
            else:
                outs = (interpolate.interpolate_integer_with_neighbours(current.frame, nxt.frame, ts, *sides)
                        if quadratic else step(current.frame, nxt.frame, ts))
                made = {t: as_dtype(o, dtype) for t, o in zip(ts, outs)}
            stats["interpolated"] += len(ts)
        for k, source in pending:
            if skip(k):
                yield k, None
            elif source.kind == "interpolate":
                yield k, made[source.t]
            else:
                yield k, (nxt.frame if source.take_second else current.frame)
        previous, interval = interval, following
    while j < plan.count:  # after the last frame: hold it
        yield j, None if skip(j) else last.frame
        j += 1


def _finished(frame: PendingFrame, dtype: np.dtype) -> np.ndarray:
    """A started frame, waited for, in the pipeline's dtype."""
    return as_dtype(frame.result(), dtype)


def _frame_options(options: VideoOptions) -> dict:
    """The options declared to change the frames, as text (the audio is muxed at the end: its codec and bitrate
    leave the segments as they are; segments name the frames they hold, so sizing them differently resumes the same
    job)."""
    return {name: str(getattr(options, name)) for name in frames_fields(options)}


def _job_key(info: VideoInfo, options: VideoOptions, weights: str) -> str:
    stat = info.path.stat()
    # "segments": bumped when this code encodes segments differently for the same input and options (2: session
    # 10's rotation, pixel aspect, colour and deinterlacing; 3: segments sized by time, named by their frames), so
    # a job left by an older version starts afresh
    desc = {"input": str(info.path.resolve()), "size": stat.st_size, "mtime": stat.st_mtime_ns,
            "options": _frame_options(options),
            "weights": weights,
            "segments": 3}
    return hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()


def _audio_note(has_audio: bool, kept: bool, codec: str, slow: int, bitrate: str = "") -> str:
    """What became of the source's audio, for the summary line."""
    if not has_audio:
        return "none"
    if not kept:
        return "dropped (slow motion) -- --audio-codec aac keeps it slowed with the picture"
    if codec == "copy":
        return "copied"
    encoder = f"{codec}, {bitrate}" if bitrate else codec
    return f"slowed {slow}x, re-encoded ({encoder})" if slow > 1 else f"re-encoded ({encoder})"


def check_video_paths(source: Path, out: Path) -> None:
    """The checks of a video job's paths that need neither ffmpeg nor the network: the command line runs them
    before it loads the network (seconds of imports), so that a mistyped path is said at once."""
    source, out = Path(source), Path(out)
    if source.is_dir():
        raise VideoError(f"--video {source} is a folder, not a video file: read a folder of frames with --frames "
                         f"{source} --out OUT/%06d.png")
    if not source.is_file():
        raise VideoError(f"{source}: no such file")
    _check_not_stdout(out)
    if same_file(out, source):
        raise VideoError("--out must differ from the input: the input is never modified")
    if not out.parent.is_dir():
        raise VideoError(f"{out}: folder '{out.parent}' does not exist (create it first)")
    if out.is_dir():
        raise VideoError(f"{out} is a folder: name a file in it ({out / (source.stem + '_x2.mp4')}) or an image "
                         f"pattern ({out / '%06d.png'})")
    # containers checked before any work (whether they hold the codec and the audio: interpolate_video's
    # check_codec_fits and check_audio_fits)
    if "%" not in out.name and out.suffix.lower() not in (".mp4", ".mkv", ".mov", ".webm"):
        raise VideoError(f"{out}: unsupported output extension '{out.suffix}' (mp4, mkv, mov, webm, "
                         f"or an image pattern such as frames/%06d.png)")


def _check_not_stdout(out: Path) -> None:
    """VideoError for ``--out -`` from a file or folder: standard output takes the stream that a stream in makes."""
    if str(out) == "-":
        raise VideoError("--out - writes a YUV4MPEG2 stream, made from one on standard input (--video -): name an "
                         "output file such as out.mp4, or pipe the video through: ffmpeg -i IN -f yuv4mpegpipe - | "
                         "python run.py --video - --out - | ffmpeg -i - OUT.mkv")


def lock_output(out: Path) -> Optional[OutputLock]:
    """The lock of the job writing ``out``, taken (OutputError if another job holds it); None in the processes
    torchrun starts beside the first, which works under the first's lock."""
    if _rank_and_world()[0] != 0:
        return None
    check_folder(Path(out).parent)  # a folder that takes no files is named as such, not by the lock's file
    return OutputLock(Path(out), lambda work: _ours(work) is not None).acquire()


def interpolate_video(source: Path, out: Path, interpolate: Interpolator, options: VideoOptions,
                      weights_id: str = "", progress: bool = True, lock: Optional[OutputLock] = None) -> dict:
    """Interpolate a video file into ``out``; returns counts for the report line. ``lock``: the output's lock
    (``lock_output``) where the caller took it already, before loading the network; else it is taken here."""
    source, out = Path(source), Path(out)
    own_lock = lock is None
    if own_lock:
        check_video_paths(source, out)
        lock = lock_output(out)
    try:
        return _interpolate_video(source, out, interpolate, options, weights_id, progress)
    finally:
        if own_lock and lock is not None:
            lock.release()


def plan_video(source: Path, out: Path, options: VideoOptions) -> Tuple[VideoInfo, Plan]:
    """The input's properties and the output's frames, or the mistake that stops the job (VideoError, ValueError:
    an unreadable input, a bad rate, an output with no frames, a bad image pattern or files in its way, a codec
    or audio the container cannot hold), all without the network: the command line calls this before it loads
    torch, so a mistake costs no wait."""
    source, out = Path(source), Path(out)
    check_video_paths(source, out)
    if "%" not in out.name:
        check_replaceable(out, options.overwrite, _OUTPUT_MADE_BY)
    info = probe(source)
    if info.frames == 0:
        raise VideoError(f"{source}: the video has no frames")
    if options.field_rate and info.interlaced:
        info = at_field_rate(info)
    plan = make_plan(info.duration, info.rate, options.factor, options.fps, options.slowmo,
                     most=MAX_IMAGES if "%" in out.name else MAX_VIDEO_FRAMES)
    if "%" in out.name:
        _check_image_outputs(str(out), _image_paths(str(out), plan.count), [source], options.overwrite)
        return info, plan
    check_codec_fits(options.codec, _pix_fmt(info, options), out)
    keep_audio, audio = _audio_plan(info, plan, options)
    if keep_audio:
        check_audio_fits(source, out, audio)
    return info, plan


def _pix_fmt(info: VideoInfo, options: VideoOptions) -> str:
    """The output's pixel format (``media.video.output_pix_fmt``)."""
    return output_pix_fmt(options.codec, options.pix_fmt, info.width, info.height, info.bit_depth > 8)


def _audio_plan(info: VideoInfo, plan: Plan, options: VideoOptions) -> Tuple[bool, List[str]]:
    """Whether the output keeps the source's audio, and ffmpeg's options for it (``media.video.audio_args``)."""
    keep = info.has_audio and (not options.slowmo or options.audio_codec != "copy")
    return keep, audio_args(options.audio_codec, plan.slowdown, options.audio_bitrate) if keep else []


# what marks a finished video output as this program's (media.files.mark_made): a rerun may replace it
_OUTPUT_MADE_BY = "run.py --video"


def made_by_a_video_job(path: Path) -> bool:
    """Whether ``path`` is a finished output of a video job of this program, unchanged since (``mark_made``)."""
    return made_here(Path(path), _OUTPUT_MADE_BY)


@dataclass(frozen=True)
class VideoJob:
    """A video job into a video file, planned and checked (``plan_video_job``): what its segments are made from
    (``encode_segments``, in this process or in several: torchrun's, a batch's segment tasks) and what the join
    needs (``finish_video_job``)."""

    source: Path
    out: Path
    options: VideoOptions
    info: VideoInfo
    plan: Plan
    work: Path  # the work folder (pipeline.jobs.work_folder)
    key: str  # the job's key (_job_key): a work folder of another key is cleared, one of this key resumed
    suffix: str  # the segments' container
    pix_fmt: str
    keep_audio: bool
    audio: Tuple[str, ...]  # ffmpeg's options for the audio (_audio_plan)


def plan_video_job(source: Path, out: Path, options: VideoOptions, weights_id: str) -> VideoJob:
    """The job into the video file ``out``, planned and checked (``plan_video``'s checks), its work folder not yet
    touched (``prepare_work``)."""
    source, out = Path(source), Path(out)
    info, plan = plan_video(source, out, options)
    if "%" in out.name:
        raise VideoError(f"{out}: a video job writes a video file, not an image pattern")
    # (plan_video checked that the container holds the codec and the audio)
    pix_fmt = _pix_fmt(info, options)
    keep_audio, audio = _audio_plan(info, plan, options)
    work = work_folder(out)
    check_not_input([work], [source])
    # mp4 where the codec allows (exact timestamps; mkv rounds them to ms), else mov (ProRes), else mkv
    return VideoJob(source, out, options, info, plan, work, _job_key(info, options, weights_id),
                    segment_suffix(options.codec, pix_fmt), pix_fmt, keep_audio, tuple(audio))


def prepare_work(job: VideoJob, rank: int = 0) -> None:
    """Ready the job's work folder: kept where it holds this job's segments (a resume), cleared where another
    job's, made where there is none (``_prepare_work_dir``; other torchrun ranks wait for rank 0's). The caller
    holds the output's lock."""
    _prepare_work_dir(job.work, job.key, rank)


def finished_segments(job: VideoJob) -> List[Tuple[int, int]]:
    """The job's finished segments as (start, stop): each holds output frames start to stop - 1 (what a resume
    keeps)."""
    return [(start, stop) for start, stop, _ in _finished_segments(job.work, job.suffix)]


def _done_frames(count: int, segments: Sequence[Tuple[int, int]]) -> bytearray:
    """A byte per output frame of ``count``: 1 where one of the finished ``segments`` (start, stop) holds it."""
    done = bytearray(count)
    for start, stop in segments:
        done[start:min(stop, count)] = b"\x01" * (min(stop, count) - start)
    return done


def finished_frames(job: VideoJob, ranges: Sequence[range]) -> List[int]:
    """How many output frames of each of ``ranges`` the job's finished segments hold (the work folder read once)."""
    done = _done_frames(job.plan.count, finished_segments(job))
    return [sum(done[k] for k in frames) for frames in ranges]


def _interpolate_video(source: Path, out: Path, interpolate: Interpolator, options: VideoOptions,
                       weights_id: str, progress: bool) -> dict:
    if "%" in Path(out).name:
        info, plan = plan_video(source, out, options)
        return _video_to_images(info, str(out), plan, interpolate, options, progress,
                                _job_key(info, options, weights_id))
    rank, world = _rank_and_world()
    job = plan_video_job(source, out, options, weights_id)
    prepare_work(job, rank)
    with _resumable(job.work):
        # several processes (torchrun): each encodes one contiguous run of output frames
        count = job.plan.count
        try:
            stats = encode_segments(job, interpolate, range(rank * count // world, (rank + 1) * count // world),
                                    progress=progress and rank == 0, joins=rank == 0)
        except VideoError:
            # ffmpeg failed (decoding the input, or encoding): where nothing was finished, nothing is left to resume
            # (one process: with torchrun's, the others use the folder)
            if world == 1 and not finished_segments(job):
                _remove_work_dir(job.work)
            raise
        if world > 1:
            # each rank's counts beside its marker: rank 0 reports the whole job's (each counted its own part's cuts)
            atomic_write(job.work / f"rank_{rank}.done", json.dumps(stats).encode())
            stats = dict(stats, rank=rank, frames=f"{rank * count // world}-{(rank + 1) * count // world - 1}")
            if rank != 0:
                return stats
            _wait_for(lambda: all((job.work / f"rank_{r}.done").exists() for r in range(world)))
            parts = [json.loads((job.work / f"rank_{r}.done").read_text() or "{}") for r in range(world)]
            stats.update({name: sum(part.get(name, 0) for part in parts)
                          for name in ("cuts", "interpolated", "resumed_segments")})
    return finish_video_job(job, stats)


@contextlib.contextmanager
def _resumable(work: Path) -> Iterator[None]:
    """A file-system failure during a job is one line that says the finished segments are kept for a resume (or
    that the work folder went, and a rerun starts over)."""
    try:
        yield
    except (OutputError, OSError) as exc:  # OSError: a file of the work folder (its marker, a segment's rename)
        if not work.is_dir():
            raise OutputError(f"the work folder {work} was removed during the run -- rerun the same command (the "
                              f"job starts over)") from None
        if isinstance(exc, OutputError):
            raise OutputError(_with_resume(str(exc))) from None
        raise os_error(exc, exc.filename or work, resume=_RESUME) from None


def finish_video_job(job: VideoJob, stats: dict) -> dict:
    """Join the job's finished segments into ``job.out`` with the source's audio, subtitles, chapters and the
    rest copied (``media.video.concat_and_mux``), under a temporary name renamed when complete; then remove the
    work folder. ``stats``: the counts of the segments' work; returned with the report's other entries."""
    info, plan, options, work, out, suffix = job.info, job.plan, job.options, job.work, job.out, job.suffix
    slow = plan.slowdown
    keep_audio = job.keep_audio
    with _resumable(work):
        segments = _finished_segments(work, suffix)
        covered = sum(stop - start for start, stop, _ in segments)
        if covered < plan.count:
            raise VideoError(f"the video ended early: {plan.count - covered} of {plan.count} output frames missing "
                             f"(is the input truncated?)")
        tmp = work / f"joined{out.suffix}"
        # the start timecode names the same moment at the output's rate (the source's own rate: fields count as
        # frames)
        timecode = rescale_timecode(info.timecode, info.rate / (2 if info.field_rate else 1), plan.rate_out) \
            if info.timecode else ""
        # (mp4 and mov segments: the join places each at its exact length and lays the times on the output's grid,
        # the decoding times too, where the segments' reorder delays differ: concat_and_mux)
        exact = suffix in (".mp4", ".mov") and len(segments) > 1
        longest = max(segments, key=lambda s: s[1] - s[0])[2]
        delay = reorder_delay(longest) if exact else 0
        left_out = concat_and_mux([path for _, _, path in segments], job.source, tmp, keep_audio,
                                  info.has_subtitles and not options.slowmo, info.start * slow,
                                  with_chapters=not options.slowmo, covers=info.covers, attachments=info.attachments,
                                  timecode=timecode, audio=list(job.audio), name=out, delay=delay,
                                  durations=[Fraction(stop - begin) / plan.rate_out for begin, stop, _ in segments]
                                  if exact else [])
        mark_made(tmp, _OUTPUT_MADE_BY)  # (its size and time: a file changed since is no longer taken as ours)
        try:
            os.replace(tmp, out)
        except OSError as exc:
            raise os_error(exc, out, resume=_RESUME) from None
    left_behind = _remove_work_dir(work)
    if left_behind:
        stats["work folder"] = left_behind
    stats.update(frames_in=info.frames, frames_out=plan.count, rate_in=str(info.rate), rate_out=str(plan.rate_out),
                 audio=_audio_note(info.has_audio, keep_audio, options.audio_codec, slow,
                                   options.audio_bitrate),
                 variable_rate=info.variable_rate)
    stats.update(_input_notes(info))
    if options.field_rate and not info.interlaced:
        stats["fields"] = "no effect (the input is progressive)"
    if info.alpha:
        stats["alpha"] = f"dropped ({out.suffix} video holds none here: --out DIR/%06d.png keeps it)"
    for name in left_out:  # what the output container could not hold
        hint = "" if out.suffix.lower() == ".mkv" else "; .mkv keeps them"
        stats[name] = f"dropped ({out.suffix} cannot hold the source's{hint})"
    if timecode and "timecode" not in left_out:
        stats["timecode"] = timecode if timecode == info.timecode else f"{info.timecode} as {timecode}"
    if info.covers and "cover pictures" not in left_out:
        stats["cover pictures"] = f"{len(info.covers)} copied"
    if info.other_videos:
        stats["other video streams"] = (f"{info.other_videos} not copied (interpolated: stream {info.stream}, "
                                        f"{info.width}x{info.height}, the largest)")
    if info.data_streams:
        stats["data streams"] = f"{info.data_streams} not copied (telemetry or other data; the source keeps them)"
    if info.problem:
        stats["input_problem"] = info.problem
    return stats


_RESUME = "rerun the same command to resume: the finished segments are kept"


def _with_resume(message: str) -> str:
    """``message`` with the resume hint, unless it has one already (the join's errors carry their own)."""
    return message if "to resume" in message else f"{message}; {_RESUME}"


# frames measured before their size says whether the rest of a job fits (a lone first frame, all intra-coded, is
# several times the size of the frames after it)
MEASURED_FRAMES = 12


def _room_for_the_rest(folder: Path, made_bytes: int, made: int, remaining: int, joined: int) -> None:
    """Once ``made`` frames took ``made_bytes``: OutputError if ``folder`` lacks room for ``remaining`` more
    frames and ``joined`` bytes besides (the joined copy of a video, its other streams), at the size measured."""
    per_frame = made_bytes / max(1, made)
    need = int(per_frame * remaining) + joined
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return  # not asked here (some network shares): the writes will tell
    if free < need:
        raise OutputError(f"not enough space in {folder}: the {made} frames written took {human_size(per_frame)} "
                          f"each, so the rest of the job needs about {human_size(need)} and {human_size(free)} is "
                          f"free -- free some space there, choose --out on another disk, or add --no-space-check "
                          f"to write until the disk is full")


def _rank_and_world() -> Tuple[int, int]:
    """This process's place among the processes torchrun started (0 of 1 without torchrun)."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


# what job.json says, so that a folder of the work folder's name is recognised as a job's (and any other one, a
# user's, left alone)
_MADE_BY = "run.py: the segments of a video job, for a resume (safe to delete)"
# the files a job makes in its work folder: its marker, segments (finished: seg_START-STOP, being written: .part),
# the joined output before its rename with the segment list and cover pictures beside it, torchrun's markers and the
# lock a batch's segment tasks hold (pipeline/batch.py)
_OUR_FILES = re.compile(r"job\.lock|tasks\.lock|job\.json|job\.json\.tmp|\.job\.json\.\w+\.tmp|"
                        r"seg_\d+(-\d+)?(\.part)?\.\w+|joined\.\w+(\.concat\.txt|\.cover\d+\.\w+)?|rank_\d+\.done")


def _ours(work: Path) -> Optional[dict]:
    """The work folder's marker if ``work`` is a job's work folder, else None. Folders left by versions before the
    marker named itself hold a job.json of one 64-digit key only."""
    try:
        marker = json.loads((work / "job.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict):
        return None
    legacy = set(marker) == {"key"} and re.fullmatch(r"[0-9a-f]{64}", str(marker["key"])) is not None
    return marker if marker.get("made_by") == _MADE_BY or legacy else None


def _remove_ours(work: Path, keep: str = "") -> None:
    """Remove the files a job made in ``work`` (none other; nor ``keep``)."""
    for path in work.iterdir():
        if _OUR_FILES.fullmatch(path.name) and not path.is_dir() and path.name != keep:
            path.unlink()


def _prepare_work_dir(work: Path, key: str, rank: int) -> None:
    """Rank 0 keeps a work folder of the same job (resume), clears one of another job (its own files only), or
    makes one; a folder of that name without the marker is someone's and refused. Other ranks wait for it."""
    if rank != 0:
        _wait_for(lambda: (_ours(work) or {}).get("key") == key)
        return
    marker = None
    if work.exists() or work.is_symlink():
        marker = _ours(work) if work.is_dir() else None
        # (a folder holding only the lock is this job's, made by OutputLock a moment ago or by a job killed then)
        if marker is None and not (work.is_dir() and {p.name for p in work.iterdir()} <= {LOCK_NAME}):
            raise OutputError(f"{work} exists and is not a work folder of this program (it has no job.json of "
                              f"one): it is left as it is -- move it, or choose another --out name (nothing was "
                              f"interpolated yet)")
    try:
        if marker is not None:
            if marker.get("key") != key:
                _remove_ours(work, keep=LOCK_NAME)  # left by another job into this output: start over
            for path in work.iterdir():
                if re.fullmatch(r"rank_\d+\.done|seg_\d+\.part\.\w+|joined\..*", path.name) and not path.is_dir():
                    path.unlink()  # an earlier run's leftovers: unfinished segment, torchrun markers
        else:
            work.mkdir(exist_ok=True)
        atomic_write(work / "job.json", json.dumps({"made_by": _MADE_BY, "key": key}).encode())
    except OSError as exc:
        raise os_error(exc, exc.filename or work, "write into") from None


def _remove_work_dir(work: Path) -> str:
    """Remove the work folder once the output is complete (or where nothing in it is left to resume): the job's
    files, then the folder if that left it empty. What was left, for the report ("" where nothing was)."""
    try:
        _remove_ours(work)
        if any(work.iterdir()):
            return f"{work} kept: it holds files this program did not make"
        work.rmdir()
        return ""
    except OSError as exc:
        return f"{work} could not be removed ({exc.strerror or exc})"


def _finished_segments(work: Path, suffix: str) -> List[Tuple[int, int, Path]]:
    """The work folder's finished segments (start, stop, path), holding output frames start to stop - 1, in order;
    where two overlap (segments of runs sized differently), the earlier-starting one."""
    found = []
    for path in work.glob(f"seg_*-*{suffix}"):
        match = re.fullmatch(r"seg_(\d+)-(\d+)" + re.escape(suffix), path.name)
        if match and int(match.group(1)) < int(match.group(2)):
            found.append((int(match.group(1)), int(match.group(2)), path))
    kept: List[Tuple[int, int, Path]] = []
    for start, stop, path in sorted(found):
        if not kept or start >= kept[-1][1]:
            kept.append((start, stop, path))
    return kept


# output frames handed to the writing thread ahead of it (each a reference, not a copy; the encoder's own
# FrameWriter queues a few more)
WRITE_DEPTH = 4
# a pair that took longer than this (on a CPU) has the frames before the next one written first, as when writing
# came first: a failure in writing (a full disk) then stops the job before another long pair, not after it; on a GPU
# writing overlaps the next pairs, and a failure stops the job a few pairs (milliseconds) later
SLOW_PAIR_SECONDS = 0.5
# image files (PNG, TIFF: tens of milliseconds a frame at 1080p, in OpenCV, which lets other threads run meanwhile)
# are encoded and written by this many threads behind the network
IMAGE_THREADS = min(4, os.cpu_count() or 1)


def drain_after_slow_pairs(*behind: WriteBehind) -> Callable[[], None]:
    """``_output_frames``' ``before_pair``: after a pair that took SLOW_PAIR_SECONDS or more, wait until what was
    handed to each of ``behind``, in order, is done (the frames written, then the segments they closed: a failure
    in writing then stops the job before another long pair)."""
    last_pair: Optional[float] = None

    def before_pair() -> None:
        nonlocal last_pair
        if last_pair is not None and time.monotonic() - last_pair >= SLOW_PAIR_SECONDS:
            for writing in behind:
                writing.drain()
        last_pair = time.monotonic()

    return before_pair


# seconds of work an output frame takes per pixel, by the type of device (segment_frames: an estimate, never a
# measurement): the default network on a 2-core CPU takes 2.2 s for a 960 x 540 pair (4.2 us a pixel), rounded up;
# GPUs a few times an H200's 77 ms for a 4K frame (9e-9 s a pixel), for slower ones
SECONDS_PER_PIXEL = {"cpu": 4.5e-6, "cuda": 3e-8}


def device_type(interpolate: Interpolator) -> str:
    """The type of device ``interpolate`` runs on ("cpu", "cuda"): an ``engine.Interpolator``'s ``device``; one
    without a device (a stand-in) counts as a CPU."""
    return str(getattr(getattr(interpolate, "device", None), "type", "cpu"))


def segment_frames(rate_out: Fraction, width: int, height: int, options: VideoOptions, device: str = "cpu") -> int:
    """The most output frames one segment holds: ``options.segment_seconds`` of video, or fewer where frames of
    ``width`` x ``height`` on a device of type ``device`` take more than ``options.segment_work_seconds`` to make
    (SECONDS_PER_PIXEL), so that an interrupt loses about that much work at most. These numbers alone decide:
    segments closed after a minute of work as measured made the bytes of one command follow the machine's speed
    (x264 starts each segment afresh: 40.4-46.4 dB between two runs)."""
    by_video = max(1, int(round(options.segment_seconds * rate_out)))
    per_frame = SECONDS_PER_PIXEL.get(device, SECONDS_PER_PIXEL["cpu"]) * width * height
    return max(1, min(by_video, int(options.segment_work_seconds / per_frame)))


# a part of a job decodes from this many input frames before its first output frame's pair: the scene test reads
# the thumbnail changes of the last four anchors and quadratic paths the anchor before a pair (``_intervals``)
SEEK_MARGIN = 8


def first_frame_to_read(pts: Sequence[Fraction], plan: Plan, mine: range, options: VideoOptions) -> int:
    """The input frame (of those at times ``pts``) that a job making output frames ``mine`` reads from
    (``encode_segments``, ``_write_images``): 0 where ``mine`` starts the output, and where de-duplication
    (``--dedup``) chains its anchors over the whole input; else ``SEEK_MARGIN`` frames before the frame at or
    before the output frame ahead of ``mine``."""
    if mine.start <= 0 or options.dedup_threshold > 0:
        return 0
    at = bisect.bisect_right(pts, plan.time(mine.start - 1)) - 1
    return max(0, at - SEEK_MARGIN)


def encode_segments(job: VideoJob, interpolate: Interpolator, mine: range, progress: bool = True,
                    joins: bool = True, most_frames: Optional[int] = None,
                    report: Callable[[int], None] = lambda done: None) -> dict:
    """Interpolate and encode the output frames ``mine`` (all: ``range(job.plan.count)``) that no finished segment
    holds, into the job's work folder, in segments of ``most_frames`` output frames (None: ``segment_frames`` for
    the device ``interpolate`` runs on; fewer where the frames before it are done, and at ``mine``'s end). From
    the first ``MEASURED_FRAMES`` frames on, each closed segment checks that the rest fits: the frames still to
    encode and, where this process ``joins``, the joined copy of them all (both exist at the end) at the size
    measured, plus the source's other streams. The input is decoded up to the anchor after ``mine`` (to its end
    where ``mine`` ends the video, and ffmpeg's outcome is judged), from its start or, from the first frame still
    to make on where that is after the start (a part's first, or a resumed job's first unfinished), from
    ``SEEK_MARGIN`` input frames before it (``first_frame_to_read``: each pair's neighbours and scene test see what
    one run sees). ``report``: called with the count of ``mine``'s frames done (finished before or written now)
    after each frame. The cuts counted, like the frames interpolated, are those of the frames made from there on
    (``_output_frames``' ``counted``), so the parts of a job count each once."""
    info, plan, work, suffix, pix_fmt, options = job.info, job.plan, job.work, job.suffix, job.pix_fmt, job.options
    run_opencv_on_callers_threads()  # (the reading, scene test and conversions run in threads of their own)
    # (the joined file copies the source's other streams: room for them is asked for with the segments')
    other = info.path.stat().st_size if joins and (job.keep_audio or info.has_subtitles) else 0
    finished = finished_segments(job)
    done = _done_frames(plan.count, finished)
    stats = {"cuts": 0, "interpolated": 0,
             "resumed_segments": sum(1 for start, stop in finished if start in mine or stop - 1 in mine)}
    if most_frames is None:
        most_frames = segment_frames(plan.rate_out, info.width, info.height, options, device_type(interpolate))
    writer = None
    start = 0
    kept: List[int] = []  # the frames of each segment this run finished
    sizes: List[int] = []  # and their sizes in bytes
    to_make = sum(1 for k in mine if not done[k])

    def finish_segment(closing: Tuple[FrameWriter, int, int]) -> None:  # (its encoder drained, its file named)
        segment, first, stop = closing
        segment.close()
        path = work / f"seg_{first:06d}-{stop:06d}{suffix}"
        os.replace(segment.path, path)
        kept.append(stop - first)
        sizes.append(path.stat().st_size)
        if options.space_check and sum(kept) >= min(MEASURED_FRAMES, to_make):
            per_frame = sum(sizes) / sum(kept)
            _room_for_the_rest(work, sum(sizes), sum(kept), to_make - sum(kept),
                               int(per_frame * plan.count) + other if joins else 0)

    def close(stop: int) -> None:
        nonlocal writer
        closer.drain()  # (the segment before has closed; had it failed, this one's encoder is aborted with the job)
        closing, writer = writer, None
        closer.put((closing, start, stop))

    skip = lambda k: done[k] or k not in mine  # noqa: E731
    bar = Progress(plan.count, job.out.name, disable=not progress)
    done_here = len(mine) - to_make

    def write(made: Tuple[int, OutputFrame]) -> None:
        """Output frame j into the open segment (opened here where none is), or None: skipped (the open segment
        closes before it); then counted on the progress bar."""
        nonlocal writer, start, done_here
        closer.check()  # (a segment that failed to close stops the job at the next frame)
        j, frame = made[0], frame_made(made[1])
        if frame is None:
            if writer is not None:
                close(j)
            bar.skip()
            return
        if writer is None:
            start = j
            writer = FrameWriter(work / f"seg_{start:06d}.part{suffix}", info.width, info.height, plan.rate_out,
                                 info.bit_depth, options.codec, options.crf, pix_fmt, options.preset,
                                 info.sample_aspect, info.color)
        # (no copy: the frame is a decoded one or the interpolator's, neither changed after)
        writer.write(frame, copy=False)
        if j + 1 - start >= most_frames:
            close(j + 1)
        bar.update()
        done_here += 1
        report(done_here)

    # decoding and the scene test run ahead in one thread, writing (and closing segments) behind in another, each a
    # few frames at most, so that this thread only interpolates: on a GPU the next pair's work is queued as soon as
    # the last one's is (its frames are waited for behind, later=True), not after they are downloaded and written
    # (each frame at its own packet's time: frames that a damaged input loses are made from the frames around them)
    # (from just before the first frame still to make: a part's first, or a resumed job's first unfinished)
    todo = range(next((k for k in mine if not done[k]), mine.stop), mine.stop)
    intervals = _ahead(read_timed_frames(info, first=first_frame_to_read(info.pts, plan, todo, options)), options)
    behind: WriteBehind[Tuple[int, OutputFrame]] = WriteBehind(write, depth=WRITE_DEPTH, name="segment-writer")
    # segments close behind the writing, one at a time (F84: an encoder drains while the next one starts); a failure
    # in closing (ffmpeg's, the space check's) is raised at the next frame written, or at the end
    closer: WriteBehind[Tuple[FrameWriter, int, int]] = WriteBehind(finish_segment, depth=1, name="segment-closer")
    try:
        for made in _output_frames(intervals, plan, interpolate, skip, stats, options.motion,
                                   drain_after_slow_pairs(behind, closer), later=True,
                                   counted=range(todo.start, mine.stop + (mine.stop >= plan.count))):
            behind.put(made)
            if made[0] + 1 >= mine.stop < plan.count:  # (a part before the end: the rest is another's; the
                break  # part at the end reads to the end, where ffmpeg's outcome is judged)
        behind.finish()
        if writer is not None:
            close(mine.stop)
        closer.finish()
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        # the frames made before the failure are written (as when writing came first), a segment closing kept
        for writing in (behind, closer):
            try:
                writing.stop()
            except KeyboardInterrupt:  # a second interrupt: those still waiting are dropped
                interrupted = True
        if writer is not None:
            writer.abort()
        if interrupted:
            raise Interrupted(f"{sum(kept)} new output frames kept in {len(kept)} finished segments"
                              + (f" (and {len(finished)} from before)" if finished else "")
                              + ("; run the same command again to resume" if kept or finished else
                                 "; nothing finished yet: a rerun starts over")) from None
        raise
    finally:
        intervals.close()
        bar.close()
    return stats


def _wait_for(condition: Callable[[], bool], poll: float = 0.2) -> None:
    """Wait for the other processes; torchrun ends the whole group if one of them fails."""
    while not condition():
        time.sleep(poll)


# image formats that hold an alpha channel (as written by OpenCV)
_ALPHA_FORMATS = (".png", ".tif", ".tiff", ".webp")


def with_linear_alpha(interpolate: Interpolator) -> ColourInterpolator:
    """The function that interpolates frames of any kind: a FrameInterpolator's own ``interpolate_integer``, or for
    a colour interpolator one that mixes the alpha of H x W x 4 frames linearly in time around its colour."""
    if isinstance(interpolate, FrameInterpolator):
        return interpolate.interpolate_integer

    def step(one: np.ndarray, two: np.ndarray, times: Sequence[float]) -> List[np.ndarray]:
        if one.shape[2] != 4:
            return interpolate(one, two, times)
        return mix_alpha_linearly(interpolate, one, two, times)
    return step


def _image_paths(out_pattern: str, count: int) -> List[Path]:
    """One path per output frame from a printf-style pattern (DIR/%06d.png); VideoError for one that is not."""
    try:
        paths = [Path(out_pattern % j) for j in range(count)]
    except (TypeError, ValueError):  # "%d%d", "%.png", "100%": a traceback before
        raise VideoError(f"--out {out_pattern}: an image pattern holds one number field, e.g. "
                         f"{Path(out_pattern).parent / '%06d.png'}") from None
    if len(set(paths[:2])) < min(count, 2):
        raise VideoError(f"--out {out_pattern}: the pattern gives every frame the same name: use a number field "
                         f"such as %06d")
    return paths


def _check_image_outputs(out_pattern: str, outs: Sequence[Path], inputs: Sequence[Path], overwrite: bool) -> None:
    """Before the network loads: the images ``outs`` can be written (their format, their folder), none is one of
    ``inputs``, and no file is in their way (``_check_strays``)."""
    from ..media.images import check_writable

    check_writable(outs[0])
    check_not_input(outs, inputs)
    _check_strays(out_pattern, outs, overwrite)


def _check_strays(out_pattern: str, outs: Sequence[Path], overwrite: bool) -> List[Path]:
    """The existing files named like output frames ``outs`` where no job of this program recorded writing into
    ``out_pattern`` (none where one did): OutputError if there are any, unless ``overwrite``."""
    work = work_folder(Path(out_pattern))
    if _ours(work) is not None:
        return []
    strays = [path for path in outs if path.exists() or path.is_symlink()]
    if strays and not overwrite:
        raise OutputError(f"{strays[0]} exists, and no job of this program recorded writing it (no "
                          f"{work.name}/job.json of one): it is never taken as an output frame -- move the files "
                          f"named like the output, choose another folder, or add --overwrite to replace them "
                          f"(nothing was interpolated yet)")
    return strays


def _prepare_image_job(out_pattern: str, outs: Sequence[Path], key: str, overwrite: bool = False) -> None:
    """The image job's record, in the work folder beside its images (``DIR/%06d.png.work/job.json``, kept when the
    job ends): the same job resumes, taking the images it wrote as done; another job into the same pattern (other
    settings, another input) first removes the images the record lists, so the two never mix; an existing file
    of an output's name without a record is never taken as an output frame: the job is refused, or with
    ``overwrite`` the file is removed first (``_check_strays``)."""
    work = work_folder(Path(out_pattern))
    marker = _ours(work)
    try:
        if marker is not None and marker.get("key") != key:
            old = marker.get("pattern") == out_pattern and isinstance(marker.get("count"), int)
            for path in (_image_paths(out_pattern, marker["count"]) if old else []):
                if path.is_file():
                    path.unlink()  # the earlier job's frames: this job starts over
        elif marker is None:
            for path in _check_strays(out_pattern, outs, overwrite):
                path.unlink()  # --overwrite: replaced, never taken as a frame made
        work.mkdir(exist_ok=True)
        atomic_write(work / "job.json", json.dumps({"made_by": _MADE_BY, "key": key, "pattern": out_pattern,
                                                    "count": len(outs)}).encode())
    except OSError as exc:
        raise os_error(exc, exc.filename or work, "write into") from None


def _write_images(timed: Callable[[int], Iterable[Tuple[np.ndarray, Fraction]]], pts: Sequence[Fraction],
                  out_pattern: str, plan: Plan, interpolate: Interpolator, options: VideoOptions, progress: bool,
                  inputs: Sequence[Path], size: Tuple[int, int, int], key: str) -> dict:
    """Frames (H x W x 3, or x 4 with alpha, each with its time in seconds: ``timed(k)``, those from input frame k
    on, of the inputs at times ``pts``) in, one image per output frame, read from just before the first image not
    yet written (``first_frame_to_read``: a resumed job); alpha is written where the format holds it. Before any
    work: no output is one of ``inputs``, the folder takes files and has room for those still to write (``size``:
    width, height, bit depth), and existing images are this job's (``key``: ``_prepare_image_job``)."""
    from ..media.images import check_image_outputs, check_writable

    run_opencv_on_callers_threads()  # (the reading, scene test and image encoders run in threads of their own)
    outs = _image_paths(out_pattern, plan.count)
    check_writable(outs[0])
    check_not_input(outs, inputs)
    _prepare_image_job(out_pattern, outs, hashlib.sha256(f"{key} {out_pattern}".encode()).hexdigest(),
                       options.overwrite)
    width, height, depth = size
    # the folder takes the images; their room is measured on the first ones written (_image_loop)
    check_image_outputs([path for path in outs if not path.exists()], (), width, height, depth, space_check=False)
    stats = {"cuts": 0, "interpolated": 0}
    keep_alpha = outs[0].suffix.lower() in _ALPHA_FORMATS
    todo = range(next((k for k, path in enumerate(outs) if not path.exists()), plan.count), plan.count)
    intervals = _ahead(timed(first_frame_to_read(pts, plan, todo, options)), options)
    try:
        _image_loop(intervals, plan, interpolate, options, outs, keep_alpha, stats, progress, todo.start)
    except KeyboardInterrupt:
        written = sum(1 for path in outs if path.exists())
        raise Interrupted(f"{written} of {plan.count} images written are kept"
                          + ("; run the same command again to resume" if written else "")) from None
    finally:
        intervals.close()
    stats.update(frames_out=plan.count, rate_out=str(plan.rate_out))
    if stats.pop("has_alpha"):
        stats["alpha"] = ("kept" if keep_alpha
                          else f"dropped ({outs[0].suffix} holds none: write .png, .tif or .webp to keep it)")
    return stats


def _image_loop(intervals: Iterator[_Interval], plan: Plan, interpolate: Interpolator, options: VideoOptions,
                outs: Sequence[Path], keep_alpha: bool, stats: dict, progress: bool, first: int = 0) -> None:
    """Make and write every image not yet written (``_write_images``): the thread that calls the interpolator only
    does that; IMAGE_THREADS threads behind it wait for each frame, encode it and write it."""
    from ..media.images import write_frame

    lock = threading.Lock()
    has_alpha = False
    to_write = sum(1 for path in outs if not path.exists())
    written = written_bytes = 0

    def write(made: Tuple[int, OutputFrame]) -> None:
        nonlocal has_alpha, written, written_bytes
        j, frame = made[0], frame_made(made[1])
        if frame is None:
            with lock:
                bar.skip()
            return
        try:
            write_frame(outs[j], frame, keep_alpha)
        except OutputError as exc:
            if not outs[j].parent.is_dir():
                raise OutputError(f"the output folder {outs[j].parent} was removed during the run -- create "
                                  f"it again and rerun the same command (the job starts over)") from None
            kept = sum(1 for path in outs if path.exists())
            raise OutputError(exc.followed_by(f"; rerun the same command to resume: the {kept} images written "
                                              f"are kept")) from None
        size = outs[j].stat().st_size
        with lock:
            has_alpha = has_alpha or frame.shape[2] == 4
            written, written_bytes = written + 1, written_bytes + size
            measured = (written, written_bytes) if written == min(MEASURED_FRAMES, to_write) else None
            bar.update()
        if options.space_check and measured is not None:
            try:
                _room_for_the_rest(outs[j].parent, measured[1], measured[0], to_write - measured[0], 0)
            except OutputError as exc:
                raise OutputError(exc.followed_by("; rerun the same command to resume: the images written are "
                                                  "kept")) from None

    with Progress(plan.count, disable=not progress) as bar:
        behind: WriteBehind[Tuple[int, OutputFrame]] = WriteBehind(write, depth=2 * IMAGE_THREADS,
                                                                   name="image-writer", threads=IMAGE_THREADS)
        try:
            for made in _output_frames(intervals, plan, interpolate, lambda k: outs[k].exists(), stats,
                                       options.motion, drain_after_slow_pairs(behind), later=True,
                                       counted=range(first, plan.count + 1)):
                behind.put(made)
            behind.finish()
        except BaseException:
            behind.stop()  # the images made before the failure or interrupt are written
            raise
    stats["has_alpha"] = has_alpha


def _deinterlaced(info: VideoInfo) -> str:
    """The report's word on how interlaced input was read."""
    return f"{info.interlaced}, one frame per field" if info.field_rate else info.interlaced


def _input_notes(info: VideoInfo) -> dict:
    """The report's words on how the input was read: deinterlaced, and the frames missing from its grid."""
    notes = {"deinterlaced": _deinterlaced(info)} if info.interlaced else {}
    if info.missing:
        notes["filled"] = f"{info.missing} missing frame{'s' * (info.missing > 1)} of the {info.rate} frames/s grid"
    return notes


def _video_to_images(info: VideoInfo, out_pattern: str, plan: Plan, interpolate: Interpolator,
                     options: VideoOptions, progress: bool, key: str) -> dict:
    stats = _write_images(lambda first: read_timed_frames(info, alpha=True, first=first), info.pts, out_pattern, plan,
                          interpolate, options, progress, [info.path],
                          (info.width, info.height, 16 if info.bit_depth > 8 else 8), key)
    stats.update(frames_in=info.frames, audio="not written (image output)" if info.has_audio else "none")
    stats.update(_input_notes(info))
    return stats


def check_frames_paths(frames_dir: Path, out_pattern: str) -> None:
    """``check_video_paths`` for a folder of images in and an image pattern out."""
    if Path(frames_dir).is_file():
        raise VideoError(f"--frames {frames_dir} is a file, not a folder of frames: read a video with --video "
                         f"{frames_dir}")
    if not Path(frames_dir).is_dir():
        raise VideoError(f"{frames_dir}: no such folder")
    _check_not_stdout(Path(out_pattern))
    if "%" not in out_pattern:
        raise VideoError(f"--out {out_pattern}: frame output needs a pattern such as out/%06d.png")


def interpolate_frames(frames_dir: Path, out_pattern: str, rate_in: Fraction, interpolate: Interpolator,
                       options: VideoOptions, progress: bool = True, weights_id: str = "",
                       lock: Optional[OutputLock] = None) -> dict:
    """A folder of images in, images out (``out_pattern`` like DIR/%06d.png); a rerun of the same job keeps the
    images it wrote, another job into the pattern replaces them (``_prepare_image_job``). ``weights_id`` and
    ``lock`` as for ``interpolate_video``."""
    frames_dir = Path(frames_dir)
    check_frames_paths(frames_dir, out_pattern)
    own_lock = lock is None
    if own_lock:
        lock = lock_output(Path(out_pattern))
    try:
        return _interpolate_frames(frames_dir, out_pattern, rate_in, interpolate, options, progress, weights_id)
    finally:
        if own_lock and lock is not None:
            lock.release()


def plan_frames(frames_dir: Path, out_pattern: str, rate_in: Fraction,
                options: VideoOptions) -> Tuple[List[Path], Plan]:
    """``plan_video`` for a folder of images: its image files in order and the output's frames."""
    from ..media.images import READ_EXTENSIONS

    frames_dir = Path(frames_dir)
    check_frames_paths(frames_dir, out_pattern)
    files = sorted(p for p in frames_dir.iterdir() if p.suffix.lower() in READ_EXTENSIONS)
    if not files:
        raise VideoError(f"{frames_dir}: no image files (png/jpg/...) found")
    plan = make_plan(len(files) / rate_in, rate_in, options.factor, options.fps, options.slowmo, most=MAX_IMAGES)
    _check_image_outputs(out_pattern, _image_paths(out_pattern, plan.count), files, options.overwrite)
    return files, plan


def _interpolate_frames(frames_dir: Path, out_pattern: str, rate_in: Fraction, interpolate: Interpolator,
                        options: VideoOptions, progress: bool, weights_id: str) -> dict:
    from ..media.images import read_image

    files, plan = plan_frames(frames_dir, out_pattern, rate_in, options)
    # transparency (rendered or keyed footage) follows the first image: with alpha there, every frame carries it
    # (opaque where an image has none)
    first, first_alpha, first_depth = read_image(files[0])
    with_alpha = first_alpha is not None

    def frames(start: int) -> Iterator[np.ndarray]:
        for path in files[start:]:
            rgb, alpha, depth = read_image(path)
            if rgb.shape != first.shape:  # (numpy said "operands could not be broadcast together" deep inside)
                raise VideoError(f"{path} is {rgb.shape[1]}x{rgb.shape[0]}, the folder's first frame {files[0].name} "
                                 f"{first.shape[1]}x{first.shape[0]}: the frames of a folder must have one size -- "
                                 f"resize or move it")
            if with_alpha:
                alpha = alpha if alpha is not None else np.ones(rgb.shape[:2], np.float32)  # opaque
                rgb = np.concatenate([rgb, alpha[:, :, None]], axis=2)
            yield _to_int(rgb, np.uint16 if depth == 16 else np.uint8)

    stamps = [Fraction(i) / rate_in for i in range(len(files))]
    key = json.dumps({"inputs": [(str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in files],
                      "rate": str(rate_in), "options": _frame_options(options), "weights": weights_id},
                     sort_keys=True)
    stats = _write_images(lambda start: zip(frames(start), stamps[start:]), stamps, out_pattern, plan, interpolate,
                          options, progress, files, (first.shape[1], first.shape[0], first_depth), key)
    stats.update(frames_in=len(files))
    return stats


def stream_frames(frames: Iterator[np.ndarray], stamps: Iterable[Fraction], plan: Plan, interpolate: Interpolator,
                  options: VideoOptions, stats: dict, later: bool = False,
                  before_pair: Callable[[], None] = lambda: None) -> Iterator[Tuple[int, OutputFrame]]:
    """(j, frame) for every output frame of ``plan``, from decoded integer frames and their timestamps in seconds:
    de-duplication, cut detection and motion paths as in the file jobs, for callers that read and write frames
    themselves (pipeline/pipe.py's y4m streams, the ComfyUI nodes). Copies of input frames are the input arrays
    themselves; every frame is an array unless ``later``, where frames still being made come as calls that wait
    for them (``_output_frames``; ``frame_made`` gives the array), for a caller that writes in another thread.
    ``before_pair`` is called before each call of the interpolator. ``stats`` counts cuts and interpolated frames."""
    stats.setdefault("cuts", 0)
    stats.setdefault("interpolated", 0)
    intervals = _ahead(zip(frames, stamps), options)
    try:
        for j, frame in _output_frames(intervals, plan, interpolate, lambda k: False, stats, options.motion,
                                       before_pair, later):
            yield j, frame
    finally:
        intervals.close()
