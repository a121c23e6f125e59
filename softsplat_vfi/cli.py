"""Interpolate between two images with softmax splatting.

    python run.py --one images/one.png --two images/two.png --out mid.png
    python run.py --one a.png --two b.png --time 0.25 0.5 0.75 --out out-{i}.png
    python run.py --video in.mp4 --out out.mp4              # twice the frame rate, same duration

The command line only (``python run.py`` and the ``softsplat-vfi`` command run ``main``): the engine
(``engine.Interpolator`` with ``engine.InterpolatorOptions``) does the work, ``engine.files.interpolate_files`` the
pair mode and ``pipeline.video`` videos. The published API keeps its names here and in the root ``run.py``:
``run.estimate(tenOne, tenTwo, fltTimes)``, ``run.read_flo(path)`` and ``run.backwarp(tenIn=..., tenFlow=...)``
(engine/published.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from dataclasses import fields
from typing import TYPE_CHECKING, Dict, List, NoReturn, Optional, Sequence, Union

from .media.declare import DefaultsFormatter

if TYPE_CHECKING:
    import numpy as np
    import torch

    from .engine import Interpolator
    from .engine.options import InterpolatorOptions
    from .pipeline.video import VideoOptions

# the options of --video and --frames, which a pair refuses (build_parser declares them in this group)
SEQUENCE_GROUP = "video and frame sequences"
# the video options that a pair takes too (pipeline.video.VideoOptions fields; engine.files.interpolate_files)
BOTH_MODES = ("overwrite", "space_check")


def flag_table() -> Dict[str, str]:
    """The command line's one table from fields to flags: the engine's (``engine.options.FLAGS``: its options, the
    pair's times and overwrite) and the video options' declared flags (``field_rate``: ``--fields``); a library
    error or note naming a field is said with it (``cli_message``, ``show_notes``)."""
    from .engine.options import FLAGS
    from .media.declare import declared_flags
    from .pipeline.video import VideoOptions

    return {**FLAGS, **declared_flags(VideoOptions)}


class _Parser(argparse.ArgumentParser):
    """A usage mistake is one line on stderr (exit 2), as every other error of this command; argparse printed the
    whole usage before it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (python run.py --help lists the options)\n")


class _Version(argparse.Action):
    """--version: the version, the code's licence and the weights' terms, on stdout (argparse's own version action
    would fold them into one paragraph)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: Optional[str] = None) -> None:
        super().__init__(option_strings, dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: Optional[str] = None) -> NoReturn:
        from .engine.about import version_text

        print(version_text())
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    from .engine.about import CODE_LICENCE, WEIGHTS_TERMS
    from .engine.options import add_flags
    from .pipeline.batch import add_batch_flags
    from .pipeline.video import VideoOptions

    p = _Parser(description="Video frame interpolation with softmax splatting.", formatter_class=DefaultsFormatter,
                epilog=f"Licence: {CODE_LICENCE} {WEIGHTS_TERMS}")
    p.add_argument("--version", action=_Version, help="print the version and the licence terms, then exit")
    p.add_argument("--one", type=Path, help="first frame (png/jpg/bmp/tif/webp; 8/16-bit; gray, RGB or RGBA)")
    p.add_argument("--two", type=Path, help="second frame, same size as --one")
    p.add_argument("--out", type=Path, help="output image; with several --time values use {i} or {t} in the name")
    p.add_argument("--time", type=float, nargs="+", default=[0.5], help="time(s) of the output frame(s), 0 < t < 1")
    # the engine's options: flags, checks and resume key from one declaration (engine/options.py)
    add_flags(p)
    v = p.add_argument_group(SEQUENCE_GROUP)
    v.add_argument("--video", type=Path,
                   help="input video; --out is a video file (mp4/mkv/mov) or DIR/%%06d.png. --video - --out -: a "
                        "YUV4MPEG2 stream from stdin to stdout (ffmpeg -i IN -f yuv4mpegpipe - | python run.py "
                        "--video - --out - | ffmpeg -i - OUT; 10-bit: -strict -1 before -f), messages on stderr, no "
                        "work folder or resume (docs/integrations.md)")
    v.add_argument("--frames", type=Path, help="input folder of frames (sorted by name); --out DIR/%%06d.png")
    v.add_argument("--input-fps", default="25", help="frame rate of --frames input")
    # the video options: flags, help and defaults from their one declaration (pipeline/video.py); the two that
    # apply to a pair as well sit beside the engine's, outside the group a pair refuses
    add_flags(v, options=VideoOptions, only=[f.name for f in fields(VideoOptions) if f.name not in BOTH_MODES])
    add_flags(p, options=VideoOptions, only=BOTH_MODES)
    add_batch_flags(p)
    return p


def interpolator_options(args: argparse.Namespace) -> "InterpolatorOptions":
    """The engine's options from the command line (engine.options declares them)."""
    from .engine.options import options_from_args

    return options_from_args(args)


def video_options(args: argparse.Namespace) -> "VideoOptions":
    """The pipeline's options from the command line; encoder problems are named now, before any work."""
    from .media.video import audio_args, encoder_pix_fmts, encoder_quality_args
    from .pipeline.video import video_options_from_args

    options = video_options_from_args(args)
    codec = options.codec
    audio_args(args.audio_codec, 1, args.audio_bitrate)  # a bad --audio-bitrate is refused before any work
    if "%" not in str(args.out):  # video output: an encoder ffmpeg lacks is named now, not after the first segment
        encoder_pix_fmts(codec)
        if encoder_quality_args(codec, args.crf, args.preset) is None:
            print(f"note: --crf and --preset do not apply to {codec}: it encodes with its own settings",
                  file=sys.stderr)
    return options


def run_sequence(args: argparse.Namespace) -> int:
    """--video or --frames: stream through the engine and report one summary line."""
    from .engine.options import loading_line
    from .pipeline.schedule import parse_rate
    from .pipeline.video import interpolate_frames, interpolate_video, lock_output, plan_frames, plan_video

    if str(args.video) == "-":
        return run_pipe(args)
    # every check that needs no network comes first, so that a mistake is said at once: the options, the input
    # (probed), the output's frames, the weights file, and then the output's lock (a second job on it refuses)
    options = video_options(args)
    if args.video is not None:
        plan_video(args.video, args.out, options)
    else:
        plan_frames(args.frames, str(args.out), parse_rate(args.input_fps), options)
    engine_options = interpolator_options(args)
    lock = lock_output(args.out)
    try:
        print(loading_line(engine_options), file=sys.stderr, flush=True)
        from .engine import Interpolator

        interpolator = Interpolator(engine_options)
        if args.video is not None:
            # whatever changes the frames is part of the job's identity: a resumed job never mixes two settings
            stats = interpolate_video(args.video, args.out, interpolator, options, weights_id=interpolator.job_id,
                                      lock=lock)
        else:
            stats = interpolate_frames(args.frames, str(args.out), parse_rate(args.input_fps), interpolator,
                                       options, weights_id=interpolator.job_id, lock=lock)
    finally:
        if lock is not None:
            lock.release()
    problem = stats.pop("input_problem", None)
    print(f"wrote {args.out}: " + ", ".join(f"{k} {v}" for k, v in stats.items()))
    if problem:
        print(f"warning: {args.video}: ffmpeg reported '{problem}' while reading it; the output covers the "
              f"{stats.get('frames_in')} frames it could read", file=sys.stderr)
    return 0


# options of video files that a y4m pipe has no use for: the program after the pipe encodes, and nothing is resumed
_FILE_ONLY = ("codec", "crf", "preset", "pix_fmt", "audio_codec", "audio_bitrate", "segment_seconds", "overwrite")


def run_pipe(args: argparse.Namespace) -> int:
    """--video - --out -: a YUV4MPEG2 stream from stdin to stdout. stdout carries the frames only: everything else
    this process prints goes to stderr."""
    import contextlib
    import os

    from .engine.options import loading_line
    from .pipeline.pipe import PipeClosed, interpolate_pipe, open_stream
    from .pipeline.video import video_options_from_args

    if str(args.out) != "-":
        raise ValueError("--video - reads a YUV4MPEG2 stream and writes one: use --out - and pipe it into ffmpeg to "
                         "encode a file (... | ffmpeg -i - out.mkv)")
    if sys.stdin.isatty():
        raise ValueError("--video -: standard input is a terminal: pipe a YUV4MPEG2 stream into it "
                         "(ffmpeg -i IN -f yuv4mpegpipe - | python run.py --video - --out - | ...)")
    if sys.stdout.isatty():
        raise ValueError("--out -: standard output is a terminal: pipe it into a program (... | ffmpeg -i - OUT.mkv)")
    defaults = build_parser()
    unused = [f"--{name.replace('_', '-')}" for name in _FILE_ONLY if getattr(args, name) != defaults.get_default(name)]
    if unused:
        print(f"note: {', '.join(unused)} do not apply to a pipe: the program after it encodes", file=sys.stderr)
    options = video_options_from_args(args, leave=_FILE_ONLY)
    sink = sys.stdout.buffer
    engine_options = interpolator_options(args)
    # the stream's header and whether a frame follows, before torch loads: a wrong stream is said at once
    header = open_stream(sys.stdin.buffer, options)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            print(loading_line(engine_options), file=sys.stderr, flush=True)
            from .engine import Interpolator

            stats = interpolate_pipe(sys.stdin.buffer, sink, Interpolator(engine_options), options, header=header)
    except PipeClosed as exc:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second failure when Python exits
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    print("wrote standard output: " + ", ".join(f"{k} {v}" for k, v in stats.items()), file=sys.stderr)
    return 0


def run_pair(args: argparse.Namespace) -> int:
    """--one, --two: one image per --time."""
    from dataclasses import replace

    from .engine.files import interpolate_files

    # one pair: compiling would cost more than it saves
    for path in interpolate_files(args.one, args.two, args.out, args.time,
                                  replace(interpolator_options(args), compile=False),
                                  space_check=args.space_check, progress=True, overwrite=args.overwrite):
        print(f"wrote {path}")
    return 0


# the published API (sniklaus/softmax-splatting's run.py), with its names and meanings; engine/published.py
# holds them, imported on first call so that importing run stays cheap

def read_flo(strFile: Union[str, Path]) -> "np.ndarray":
    """A Middlebury .flo file as an H x W x 2 float32 numpy array (pixels, x then y)."""
    from .engine.published import read_flo as read

    return read(strFile)


def backwarp(tenIn: "torch.Tensor", tenFlow: "torch.Tensor") -> "torch.Tensor":
    """``tenIn`` sampled bilinearly at p + ``tenFlow``(p) (pixels, x then y), zeros outside the frame."""
    from .engine.published import backwarp as warp

    return warp(tenIn, tenFlow)


def estimate(tenOne: "torch.Tensor", tenTwo: "torch.Tensor",
             fltTimes: Sequence[float] = (0.5,)) -> List["torch.Tensor"]:
    """3 x H x W float tensors in [0, 1], BGR, in; one 3 x H x W CPU tensor, BGR, per t of ``fltTimes`` out."""
    from .engine.published import estimate as run_estimate

    return run_estimate(tenOne, tenTwo, fltTimes)


def _not_for_this_mode(parser: argparse.ArgumentParser, args: argparse.Namespace, sequence: bool) -> str:
    """What the command line gives that its mode would ignore ("" where nothing): a pair's --one, --two and
    --time beside --video or --frames, --input-fps (the rate of --frames) beside --video, or the options of videos
    and frame sequences beside a pair."""
    if sequence:
        pair = [flag for flag, given in (("--one", args.one is not None), ("--two", args.two is not None),
                                         ("--time", args.time != parser.get_default("time"))) if given]
        if pair:
            return (f"{', '.join(pair)}: {'they apply' if len(pair) > 1 else 'it applies'} to a pair of images, not "
                    f"to --video or --frames (whose output times come from --factor or --fps): leave "
                    f"{'them' if len(pair) > 1 else 'it'} out")
        if args.video is not None and args.input_fps != parser.get_default("input_fps"):
            return "--input-fps is the frame rate of --frames input: a video's comes from the file (--fps sets the " \
                   "output's)"
        return ""
    group = next(g for g in parser._action_groups if g.title == SEQUENCE_GROUP)
    given = [a.option_strings[0] for a in group._group_actions if getattr(args, a.dest) != a.default]
    if not given:
        return ""
    return (f"{', '.join(given)}: {'they apply' if len(given) > 1 else 'it applies'} to --video and --frames, not to "
            f"a pair of images (--one, --two): leave {'them' if len(given) > 1 else 'it'} out")


def _memory_wanted(exc: BaseException) -> Optional[str]:
    """What an allocation that failed asked for, from numpy's MemoryError ("Unable to allocate 4.47 GiB for an
    array with shape ...") or torch's ("DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes";
    CUDA's OutOfMemoryError); None for any other error."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, MemoryError):
        return text or "MemoryError"
    if "can't allocate memory" in text or type(exc).__name__ == "OutOfMemoryError":
        return text[text.find("you tried"):] if "you tried" in text else text
    return None


def make_interpolator(options: "InterpolatorOptions") -> "Interpolator":
    """The engine for ``options``: a batch's tasks make theirs with it on their worker (functools.partial of it is
    what Ray sends them)."""
    from .engine import Interpolator

    return Interpolator(options)


def run_batch(args: argparse.Namespace) -> int:
    """--batch: each input a --video job into --out-dir (pipeline/batch.py), on this machine or with --ray on a
    Ray cluster."""
    from functools import partial

    from .engine.options import cli_message, loading_line
    from .pipeline.batch import run_batch as run

    engine_options = interpolator_options(args)
    return run(args, lambda out: video_options(argparse.Namespace(**{**vars(args), "out": out})),
               partial(make_interpolator, engine_options), loading_line(engine_options),
               say=partial(cli_message, flags=flag_table()))


def main(argv: Optional[List[str]] = None) -> int:
    from .engine.options import cli_message, show_notes
    from .pipeline.batch import batch_mistake

    parser = build_parser()
    args = parser.parse_args(argv)
    flags = flag_table()
    show_notes(flags)  # the library's notes on stderr from here on, as "note: ..." lines with this table's flags
    mistake = batch_mistake(args)
    if mistake:
        parser.error(mistake)
    sequence = args.video is not None or args.frames is not None or args.batch is not None
    single = args.batch is None
    if single and sequence and (args.out is None or (args.video is not None and args.frames is not None)):
        parser.error("use --video IN or --frames DIR, with --out")
    if not sequence and (args.one is None or args.two is None or args.out is None):
        parser.error("--one, --two and --out are required (or --video/--frames with --out)")
    if args.field_rate and args.video is None and single:
        parser.error("--fields reads interlaced video one frame per field: use it with --video")
    unused = _not_for_this_mode(parser, args, sequence)
    if unused:
        parser.error(unused)
    try:
        if not single:
            return run_batch(args)
        return run_sequence(args) if sequence else run_pair(args)
    except ValueError as exc:  # the user's mistakes: VideoError, ImageError, OutputError and WeightsError are ones
        print(f"error: {cli_message(exc, flags)}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as exc:  # (a 20000 x 20000 pair was numpy's 17-line traceback)
        wanted = _memory_wanted(exc)
        if wanted is None:
            raise
        print(f"error: not enough memory ({wanted}): the frames need more than this machine has free -- scale them "
              f"down first, try a smaller --tile (e.g. --tile 512), or free some memory", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        # pipeline.jobs.Interrupted says what the job kept; a plain one came before any work (loading, checks)
        print(f"interrupted: {exc}" if str(exc) else "interrupted before any frame was made", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
