"""Video (and frame-sequence) interpolation as a streaming, resumable job.

Frames are decoded, interpolated and encoded one anchor pair at a time, so memory
does not grow with the video. The output is encoded in segments under
``<out stem>.work/`` (named without the extension, so a rerun into another container
reuses them); an interrupted job rerun with the same command keeps the finished
segments. The final file is assembled under a temporary name (segments joined,
the source's audio and subtitles copied unchanged) and renamed when complete.
The input is only ever read.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Protocol, Sequence, Tuple, Union, runtime_checkable

import numpy as np

from media.video import (FrameWriter, VideoError, VideoInfo, at_field_rate, audio_args, check_audio_fits,
                         check_codec_fits, concat_and_mux, output_pix_fmt, probe, read_frames, rescale_timecode,
                         segment_suffix)

from .prefetch import prefetch
from .schedule import Plan, make_plan, scene_change, source_between, thumbnail


@dataclass(frozen=True)
class VideoOptions:
    factor: Optional[int] = None
    fps: Optional[Fraction] = None
    slowmo: bool = False
    scene_threshold: float = 0.12  # mean |difference| of grey thumbnails in [0, 1]; <= 0 disables
    dedup_threshold: float = 0.0  # > 0: frames closer than this to the previous one are dropped
    crf: int = 18
    codec: str = "libx264"
    preset: str = "medium"  # encoder speed in x264's names (media.video.PRESETS), mapped to each encoder's own
    pix_fmt: Optional[str] = None
    segment_seconds: float = 10.0
    # interlaced input read one frame per field (twice its frame rate) instead of one per frame
    field_rate: bool = False
    # the source's audio: "copy" (unchanged; dropped in slow motion), or an ffmpeg encoder to re-encode it with
    # (for a container the original does not fit; in slow motion slowed with it, pitch kept)
    audio_codec: str = "copy"
    audio_bitrate: str = ""  # for a re-encode, e.g. "192k"; "" leaves the encoder's default


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


# what the pipeline takes
Interpolator = Union[FrameInterpolator, ColourInterpolator]


def _to_float(frame: np.ndarray) -> np.ndarray:
    scale = 65535.0 if frame.dtype == np.uint16 else 255.0
    return frame.astype(np.float32) / scale


def _to_int(frame: np.ndarray, dtype) -> np.ndarray:
    scale = 65535.0 if dtype == np.uint16 else 255.0
    return np.clip(np.rint(frame * scale), 0, scale).astype(dtype)


def _as_dtype(frame: np.ndarray, dtype) -> np.ndarray:
    """An interpolator's output on the input's integer scale, as that dtype."""
    frame = np.asarray(frame)
    if frame.dtype == dtype:
        return frame
    return np.clip(np.rint(frame), 0, np.iinfo(dtype).max).astype(dtype)


@dataclass
class _Anchor:
    time: Fraction
    frame: np.ndarray
    thumb: np.ndarray


def _anchors(frames: Iterator[np.ndarray], stamps: Sequence[Fraction], dedup: float) -> Iterator[_Anchor]:
    previous = None
    for frame, time in zip(frames, stamps):
        thumb = thumbnail(frame)
        if previous is not None and dedup > 0 and float(np.abs(thumb - previous.thumb).mean()) < dedup:
            continue  # a repeated frame: the interval stretches to the next distinct one
        previous = _Anchor(time, frame, thumb)
        yield previous


def _output_frames(anchors: Iterator[_Anchor], plan: Plan, interpolate: Interpolator, threshold: float,
                   skip: Callable[[int], bool], stats: dict) -> Iterator[Tuple[int, Optional[np.ndarray]]]:
    """(j, frame) for every output frame in order; frame is None where ``skip(j)`` (already done)."""
    interpolate = with_linear_alpha(interpolate)
    j = 0
    current = next(anchors, None)
    if current is None:
        return
    for nxt in anchors:
        cut = threshold > 0 and scene_change(current.thumb, nxt.thumb, threshold)
        stats["cuts"] += int(cut)
        pending = []
        while j < plan.count and plan.time(j) < nxt.time:
            pending.append((j, source_between(plan.time(j), current.time, nxt.time, cut)))
            j += 1
        ts = sorted({s.t for k, s in pending if s.kind == "interpolate" and not skip(k)})
        made = {}
        if ts:
            outs = interpolate(current.frame, nxt.frame, ts)
            made = {t: _as_dtype(o, current.frame.dtype) for t, o in zip(ts, outs)}
            stats["interpolated"] += len(ts)
        for k, source in pending:
            if skip(k):
                yield k, None
            elif source.kind == "interpolate":
                yield k, made[source.t]
            else:
                yield k, (nxt.frame if source.take_second else current.frame)
        current = nxt
    while j < plan.count:  # after the last frame: hold it
        yield j, None if skip(j) else current.frame
        j += 1


def _job_key(info: VideoInfo, options: VideoOptions, weights: str) -> str:
    stat = info.path.stat()
    # "segments": bumped when this code encodes segments differently for the same input and options (2: session
    # 10's rotation, pixel aspect, colour and deinterlacing), so a job left by an older version starts afresh
    desc = {"input": str(info.path.resolve()), "size": stat.st_size, "mtime": stat.st_mtime_ns,
            # (the audio is muxed at the end: its codec and bitrate leave the segments as they are)
            "options": {k: str(v) for k, v in asdict(options).items() if k not in ("audio_codec", "audio_bitrate")},
            "weights": weights,
            "segments": 2}
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


def interpolate_video(source: Path, out: Path, interpolate: Interpolator, options: VideoOptions,
                      weights_id: str = "", progress: bool = True) -> dict:
    """Interpolate a video file into ``out``; returns counts for the report line."""
    from tqdm import tqdm

    source, out = Path(source), Path(out)
    if out.resolve() == source.resolve():
        raise VideoError("--out must differ from the input: the input is never modified")
    if not out.parent.is_dir():
        raise VideoError(f"{out}: folder '{out.parent}' does not exist (create it first)")
    if out.is_dir():
        raise VideoError(f"{out} is a folder: name a file in it ({out / (source.stem + '_x2.mp4')}) or an image "
                         f"pattern ({out / '%06d.png'})")
    # containers checked before any work (whether they hold the codec and the audio: check_codec_fits and
    # check_audio_fits, below)
    if "%" not in out.name and out.suffix.lower() not in (".mp4", ".mkv", ".mov", ".webm"):
        raise VideoError(f"{out}: unsupported output extension '{out.suffix}' (mp4, mkv, mov, webm, "
                         f"or an image pattern such as frames/%06d.png)")
    info = probe(source)
    if info.frames == 0:
        raise VideoError(f"{source}: the video has no frames")
    if options.field_rate and info.interlaced:
        info = at_field_rate(info)
    plan = make_plan(info.duration, info.rate, options.factor, options.fps, options.slowmo)
    if "%" in out.name:
        return _video_to_images(info, str(out), plan, interpolate, options, progress)
    pix_fmt = output_pix_fmt(options.codec, options.pix_fmt, info.width, info.height, info.bit_depth > 8)
    check_codec_fits(options.codec, pix_fmt, out)
    slow = plan.slowdown
    keep_audio = info.has_audio and (not options.slowmo or options.audio_codec != "copy")
    audio = audio_args(options.audio_codec, slow, options.audio_bitrate) if keep_audio else []
    if keep_audio:
        check_audio_fits(source, out, audio)
    per_segment = max(1, int(round(options.segment_seconds * plan.rate_out)))
    work = out.with_name(out.stem + ".work")
    key = _job_key(info, options, weights_id)
    rank, world = _rank_and_world()
    _prepare_work_dir(work, key, rank)
    segments = (plan.count + per_segment - 1) // per_segment
    # mp4 where the codec allows (exact timestamps; mkv rounds them to ms), else mov (ProRes), else mkv
    suffix = segment_suffix(options.codec, pix_fmt)
    seg_path = [work / f"seg_{s:05d}{suffix}" for s in range(segments)]
    # several processes (torchrun): each encodes one contiguous run of segments; the boundaries are exact
    # output-frame indices, so the joined video is the same as one process would make
    mine = range(rank * segments // world, (rank + 1) * segments // world)
    finished = [p.is_file() for p in seg_path]
    done = [f or s not in mine for s, f in enumerate(finished)]
    stats = {"cuts": 0, "interpolated": 0, "resumed_segments": sum(finished[s] for s in mine)}
    writer = None
    current_segment = -1
    bar = tqdm(total=plan.count, unit="frame", disable=not progress or rank != 0, desc=out.name, file=sys.stderr)
    try:
        # decoding runs ahead in a thread while the GPU works (bounded: a few frames)
        anchors = prefetch(_anchors(read_frames(info), info.pts, options.dedup_threshold), depth=4)
        skip = lambda k: done[k // per_segment]  # noqa: E731
        for j, frame in _output_frames(anchors, plan, interpolate, options.scene_threshold, skip, stats):
            segment = j // per_segment
            if frame is not None:
                if segment != current_segment:
                    if writer is not None:
                        _finish(writer, seg_path[current_segment])
                    writer = FrameWriter(seg_path[segment].with_suffix(".part" + suffix), info.width, info.height,
                                         plan.rate_out, info.bit_depth, options.codec, options.crf, pix_fmt,
                                         options.preset, info.sample_aspect, info.color)
                    current_segment = segment
                writer.write(frame)
            bar.update(1)
        if writer is not None:
            _finish(writer, seg_path[current_segment])
            writer = None
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    finally:
        bar.close()
    if world > 1:
        (work / f"rank_{rank}.done").touch()
        if rank != 0:
            stats.update(rank=rank, segments=f"{mine.start}-{mine.stop - 1}")
            return stats
        _wait_for(lambda: all((work / f"rank_{r}.done").exists() for r in range(world)))
    missing = [p for p in seg_path if not p.is_file()]
    if missing:
        raise VideoError(f"the video ended early: {len(missing)} segment(s) missing (is the input truncated?)")
    tmp = out.with_name(f".tmp-{out.stem}{out.suffix}")
    # the start timecode names the same moment at the output's rate (the source's own rate: fields count as frames)
    timecode = rescale_timecode(info.timecode, info.rate / (2 if info.field_rate else 1), plan.rate_out) \
        if info.timecode else ""
    left_out = concat_and_mux(seg_path, source, tmp, keep_audio, info.has_subtitles and not options.slowmo,
                              info.start * slow, with_chapters=not options.slowmo, covers=info.covers,
                              attachments=info.attachments, timecode=timecode, audio=audio)
    os.replace(tmp, out)
    shutil.rmtree(work)
    stats.update(frames_in=info.frames, frames_out=plan.count, rate_in=str(info.rate), rate_out=str(plan.rate_out),
                 audio=_audio_note(info.has_audio, keep_audio, options.audio_codec, slow,
                                   options.audio_bitrate),
                 variable_rate=info.variable_rate)
    if info.interlaced:
        stats["deinterlaced"] = _deinterlaced(info)
    elif options.field_rate:
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


def _rank_and_world() -> Tuple[int, int]:
    """This process's place among the processes torchrun started (0 of 1 without torchrun)."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def _prepare_work_dir(work: Path, key: str, rank: int) -> None:
    """Rank 0 keeps a work folder of the same job (resume) or starts a fresh one; others wait for it."""
    job_file = work / "job.json"

    def current() -> bool:
        try:
            return json.loads(job_file.read_text()).get("key") == key
        except (OSError, ValueError):
            return False

    if rank != 0:
        _wait_for(current)
        return
    if work.exists() and not current():
        shutil.rmtree(work)  # left by a different job: start over
    work.mkdir(exist_ok=True)
    for marker in work.glob("rank_*.done"):
        marker.unlink()
    tmp = job_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": key}))
    os.replace(tmp, job_file)


def _wait_for(condition: Callable[[], bool], poll: float = 0.2) -> None:
    """Wait for the other processes; torchrun ends the whole group if one of them fails."""
    import time

    while not condition():
        time.sleep(poll)


def _finish(writer: FrameWriter, final: Path) -> None:
    writer.close()
    os.replace(writer.path, final)


# image formats that hold an alpha channel (as written by OpenCV)
_ALPHA_FORMATS = (".png", ".tif", ".tiff", ".webp")


def with_linear_alpha(interpolate: Interpolator) -> ColourInterpolator:
    """The function that interpolates frames of any kind: a FrameInterpolator's own ``interpolate_integer``, or for
    a colour interpolator one that mixes the alpha of H x W x 4 frames linearly in time around its colour."""
    if isinstance(interpolate, FrameInterpolator):
        return interpolate.interpolate_integer

    def step(one: np.ndarray, two: np.ndarray, times: Sequence[float]) -> List[np.ndarray]:
        from model.inference import mix_alpha_linearly

        if one.shape[2] != 4:
            return interpolate(one, two, times)
        return mix_alpha_linearly(interpolate, one, two, times)
    return step


def _write_images(frames: Iterator[np.ndarray], stamps: Sequence[Fraction], out_pattern: str, plan: Plan,
                  interpolate: Interpolator, options: VideoOptions, progress: bool) -> dict:
    """Frames (H x W x 3, or x 4 with alpha) in, one image per output frame; alpha is written where the format
    holds it."""
    from tqdm import tqdm

    from media.images import check_writable, write_image

    outs = [Path(out_pattern % j) for j in range(plan.count)]
    check_writable(outs[0])
    stats = {"cuts": 0, "interpolated": 0}
    keep_alpha = outs[0].suffix.lower() in _ALPHA_FORMATS
    has_alpha = False
    anchors = prefetch(_anchors(frames, stamps, options.dedup_threshold), depth=4)
    with tqdm(total=plan.count, unit="frame", disable=not progress, file=sys.stderr) as bar:
        for j, frame in _output_frames(anchors, plan, interpolate, options.scene_threshold,
                                       lambda k: outs[k].exists(), stats):
            if frame is not None:
                values = _to_float(frame)
                has_alpha = has_alpha or frame.shape[2] == 4
                alpha = values[:, :, 3] if frame.shape[2] == 4 and keep_alpha else None
                write_image(outs[j], values[:, :, :3], alpha, 16 if frame.dtype == np.uint16 else 8)
            bar.update(1)
    stats.update(frames_out=plan.count, rate_out=str(plan.rate_out))
    if has_alpha:
        stats["alpha"] = ("kept" if keep_alpha
                          else f"dropped ({outs[0].suffix} holds none: write .png, .tif or .webp to keep it)")
    return stats


def _deinterlaced(info: VideoInfo) -> str:
    """The report's word on how interlaced input was read."""
    return f"{info.interlaced}, one frame per field" if info.field_rate else info.interlaced


def _video_to_images(info: VideoInfo, out_pattern: str, plan: Plan, interpolate: Interpolator,
                     options: VideoOptions, progress: bool) -> dict:
    stats = _write_images(read_frames(info, alpha=True), info.pts, out_pattern, plan, interpolate, options, progress)
    stats.update(frames_in=info.frames, audio="not written (image output)" if info.has_audio else "none")
    if info.interlaced:
        stats["deinterlaced"] = _deinterlaced(info)
    return stats


def interpolate_frames(frames_dir: Path, out_pattern: str, rate_in: Fraction, interpolate: Interpolator,
                       options: VideoOptions, progress: bool = True) -> dict:
    """A folder of images in, images out (``out_pattern`` like DIR/%06d.png); existing outputs are kept."""
    from media.images import READ_EXTENSIONS, read_image

    frames_dir = Path(frames_dir)
    if not frames_dir.is_dir():
        raise VideoError(f"{frames_dir}: no such folder")
    if "%" not in out_pattern:
        raise VideoError(f"--out {out_pattern}: frame output needs a pattern such as out/%06d.png")
    files = sorted(p for p in frames_dir.iterdir() if p.suffix.lower() in READ_EXTENSIONS)
    if not files:
        raise VideoError(f"{frames_dir}: no image files (png/jpg/...) found")
    plan = make_plan(len(files) / rate_in, rate_in, options.factor, options.fps, options.slowmo)
    # transparency (rendered or keyed footage) follows the first image: with alpha there, every frame carries it
    # (opaque where an image has none)
    with_alpha = read_image(files[0])[1] is not None

    def frames():
        for path in files:
            rgb, alpha, depth = read_image(path)
            if with_alpha:
                alpha = alpha if alpha is not None else np.ones(rgb.shape[:2], np.float32)  # opaque
                rgb = np.concatenate([rgb, alpha[:, :, None]], axis=2)
            yield _to_int(rgb, np.uint16 if depth == 16 else np.uint8)

    stamps = [Fraction(i) / rate_in for i in range(len(files))]
    stats = _write_images(frames(), stamps, out_pattern, plan, interpolate, options, progress)
    stats.update(frames_in=len(files))
    return stats
