"""The video pipeline's threads (issue 64): decoding and the scene test run ahead of the interpolator, writing runs
behind it, and none of that changes a byte of the output, the order of the interpolator's calls, or how a failure
in any of them reaches the caller. CPU, small generated clips."""

import threading
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import softsplat_vfi.pipeline.video as pv
from softsplat_vfi.media.files import OutputError
from softsplat_vfi.media.video import FrameWriter, VideoError, probe, read_frames
from softsplat_vfi.pipeline.video import VideoOptions, interpolate_video
from tests.video_fixtures import InlineWriter


def _clip(path: Path, count: int = 24, cut: int = 12, repeat: int = 5) -> Path:
    """``count`` frames at 12 fps: a square moving over a texture with frame ``repeat`` shown twice (a repeat,
    dropped by --dedup), then a cut at frame ``cut`` to another scene, moving too. Lossless, so the repeat stays
    exact."""
    rng = np.random.default_rng(0)
    first = (rng.random((64, 96, 3)) * 120 + 40).astype(np.uint8)
    second = (rng.random((64, 96, 3)) * 80 + 150).astype(np.uint8)[:, :, ::-1]
    writer = FrameWriter(path, 96, 64, Fraction(12), crf=0, pix_fmt="yuv444p")
    for i in range(count):
        scene = first if i < cut else second
        x = 4 + 3 * (min(i, repeat) if i <= repeat + 1 else i - 1 if i < cut else i - cut)  # the repeat
        frame = scene.copy()
        frame[20:36, x:x + 16] = 250 if i < cut else 10
        writer.write(frame)
    writer.close()
    return path


def _serial(monkeypatch):
    monkeypatch.setattr(pv, "WriteBehind", InlineWriter)
    monkeypatch.setattr(pv, "prefetch", lambda items, depth=4: items)


def _decoded(path: Path) -> list:
    return [frame.tobytes() for frame in read_frames(probe(path))]


class _Recorder:
    """Wraps an interpolator: the thread and the frames of every call, in order."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def interpolate_integer(self, one, two, times):
        self.calls.append((threading.get_ident(), one.tobytes(), two.tobytes(), tuple(times)))
        return self.inner.interpolate_integer(one, two, times)


class _Waits:
    """The engine's two waiting calls alone (a NeighbourInterpolator that cannot start frames)."""

    def __init__(self, inner):
        self.interpolate_integer = inner.interpolate_integer
        self.interpolate_integer_with_neighbours = inner.interpolate_integer_with_neighbours


@pytest.fixture(scope="module")
def cut_clip(tmp_path_factory):
    return _clip(tmp_path_factory.mktemp("overlap") / "in.mp4")


@pytest.mark.parametrize("factor", [2, 3])
def test_the_threads_change_no_output_byte_nor_the_calls(tmp_path, monkeypatch, cut_clip, blend_interpolator,
                                                        factor):
    options = VideoOptions(factor=factor, dedup_threshold=0.002, segment_seconds=0.5)  # several segments
    threaded = _Recorder(blend_interpolator)
    stats = interpolate_video(cut_clip, tmp_path / "threaded.mp4", threaded, options, progress=False)
    # 22 intervals between the 23 distinct frames: one across the cut, one twice as long (the repeat's)
    assert stats["cuts"] == 1 and stats["interpolated"] == (factor - 1) * 20 + 2 * factor - 1
    with monkeypatch.context() as patched:
        _serial(patched)
        serial = _Recorder(blend_interpolator)
        assert interpolate_video(cut_clip, tmp_path / "serial.mp4", serial, options, progress=False) == stats
    assert _decoded(tmp_path / "threaded.mp4") == _decoded(tmp_path / "serial.mp4")
    assert len(_decoded(tmp_path / "threaded.mp4")) == factor * 24
    assert [c[1:] for c in threaded.calls] == [c[1:] for c in serial.calls]
    # every call on the caller's thread (the engine and its CUDA graphs are not thread-safe)
    assert {c[0] for c in threaded.calls} == {threading.get_ident()}


def test_the_network_along_quadratic_paths_gives_the_same_bytes(tmp_path, monkeypatch, cpu_interpolator):
    """The engine's flow states (PairStates) are keyed by the frame arrays themselves: the threads hand it the same
    arrays in the same order. The threaded job starts each pair's frames and waits for them behind
    (``StartingInterpolator``); the serial one, given an interpolator that cannot start them, waits in line."""
    cut_clip = _clip(tmp_path / "in.mp4", count=9, cut=6, repeat=2)  # 6 pairs along paths, on the CPU
    options = VideoOptions(dedup_threshold=0.002, segment_seconds=0.25)
    assert options.motion == "quadratic"
    stats = interpolate_video(cut_clip, tmp_path / "threaded.mp4", cpu_interpolator, options, progress=False)
    assert stats["cuts"] == 1 and stats["interpolated"] == 5 + 3
    with monkeypatch.context() as patched:
        _serial(patched)
        waits = _Waits(cpu_interpolator)
        assert isinstance(cpu_interpolator, pv.StartingInterpolator) and not isinstance(waits, pv.StartingInterpolator)
        assert interpolate_video(cut_clip, tmp_path / "serial.mp4", waits, options, progress=False) == stats
    assert _decoded(tmp_path / "threaded.mp4") == _decoded(tmp_path / "serial.mp4")


def _threads_ended():
    return not [t for t in threading.enumerate() if t.name in ("segment-writer", "segment-closer", "prefetch")]


def test_a_segment_closes_while_the_next_one_is_made(tmp_path, monkeypatch, cut_clip, blend_interpolator):
    """F84: the writing thread waited for each segment's encoder to drain (x264's lookahead and frame threads), and
    the network for the writing; now a segment closes behind, one at a time, and the output's bytes are the same
    (test_the_threads_change_no_output_byte_nor_the_calls)."""
    real_close, closing, during = FrameWriter.close, threading.Event(), []

    def slow_close(self):
        closing.set()
        time.sleep(0.3)
        real_close(self)
        closing.clear()

    def step(one, two, times):
        during.append(closing.is_set())
        return blend_interpolator.interpolate_integer(one, two, times)

    monkeypatch.setattr(FrameWriter, "close", slow_close)
    stats = interpolate_video(cut_clip, tmp_path / "out.mp4", step, VideoOptions(segment_seconds=0.5),
                              progress=False)
    assert probe(tmp_path / "out.mp4").frames == 48 and stats["interpolated"] == 22  # (one pair across the cut)
    # pairs made while a segment closed: more than the writing behind holds (WRITE_DEPTH frames and the pair in
    # hand) for each of the 3 segments that close before the end
    assert sum(during) > 3 * (pv.WRITE_DEPTH // 2 + 1), during
    assert _threads_ended()


def test_a_segment_that_fails_to_close_stops_the_job_and_keeps_those_before(tmp_path, monkeypatch, cut_clip,
                                                                          blend_interpolator):
    real_close, closes = FrameWriter.close, []

    def close(self):
        closes.append(1)
        if len(closes) == 2:
            self.abort()
            raise VideoError("ffmpeg could not encode")
        real_close(self)

    monkeypatch.setattr(FrameWriter, "close", close)
    out = tmp_path / "out.mp4"
    with pytest.raises(VideoError, match="could not encode"):
        interpolate_video(cut_clip, out, blend_interpolator, VideoOptions(segment_seconds=0.5), progress=False)
    assert _threads_ended()
    # the first segment kept; the second failed; the one open when the failure was seen removed
    assert sorted(p.name for p in (tmp_path / "out.mp4.work").glob("seg_*")) == ["seg_000000-000012.mp4"]


def test_an_interpolator_error_mid_clip_reaches_the_caller(tmp_path, cut_clip, blend_interpolator):
    calls = []

    def failing(one, two, times):
        calls.append(1)
        if len(calls) == 9:
            raise ValueError("the network failed")
        return blend_interpolator.interpolate_integer(one, two, times)

    out = tmp_path / "out.mp4"
    with pytest.raises(ValueError, match="the network failed"):
        interpolate_video(cut_clip, out, failing, VideoOptions(segment_seconds=0.5), progress=False)
    assert len(calls) == 9 and _threads_ended()
    work = tmp_path / "out.mp4.work"
    # the frames made before it were written: the segments they finished are kept, the open one removed
    assert sorted(p.name for p in work.glob("seg_*")) == ["seg_000000-000012.mp4"]  # 18 frames made
    assert interpolate_video(cut_clip, out, blend_interpolator, VideoOptions(segment_seconds=0.5),
                             progress=False)["resumed_segments"] == 1


def test_a_writer_error_mid_clip_stops_the_interpolation(tmp_path, monkeypatch, cut_clip, blend_interpolator):
    real = FrameWriter.write
    written = []

    def write(self, frame, copy=True):
        written.append(1)
        if len(written) == 10:
            raise VideoError("ffmpeg stopped while writing")
        return real(self, frame, copy)

    monkeypatch.setattr(FrameWriter, "write", write)
    calls = []

    def counting(one, two, times):
        calls.append(1)
        return blend_interpolator.interpolate_integer(one, two, times)

    with pytest.raises(VideoError, match="ffmpeg stopped while writing"):
        interpolate_video(cut_clip, tmp_path / "out.mp4", counting, VideoOptions(segment_seconds=0.5),
                          progress=False)
    # the frames queued behind the writer (pv.WRITE_DEPTH), the pair in hand: then the caller stops
    assert len(calls) <= 10 // 2 + pv.WRITE_DEPTH // 2 + 2, len(calls)
    assert _threads_ended()
    # no half-written segment is left: the first segment was not finished, so the work folder went with it
    assert not (tmp_path / "out.mp4.work").exists()


def test_after_a_slow_pair_the_frames_are_written_before_the_next(tmp_path, monkeypatch, cut_clip,
                                                                  blend_interpolator):
    """On a CPU (minutes a pair) a full disk found behind would waste the next pair and report it minutes late:
    after a pair that took SLOW_PAIR_SECONDS the caller waits for the writing first, so the job stops where it
    did when writing came first."""
    monkeypatch.setattr(pv, "SLOW_PAIR_SECONDS", 0.01)
    monkeypatch.setattr(pv, "_room_for_the_rest", _no_room)
    calls = []

    def slow(one, two, times):
        calls.append(1)
        time.sleep(0.02)
        return blend_interpolator.interpolate_integer(one, two, times)

    with pytest.raises(OutputError, match="no room"):
        interpolate_video(cut_clip, tmp_path / "out.mp4", slow, VideoOptions(segment_seconds=0.5), progress=False)
    assert len(calls) == 6  # the first segment's 12 frames, then its room check


def _no_room(*args):
    raise OutputError("no room")
