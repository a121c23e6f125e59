"""Jobs side by side and one after another (issue 67): a lock per output, a key per output that covers every
option that changes the frames, and reruns that never mix two settings. CPU, small generated clips; the network is
a stand-in (``Blend``) where it is not the point."""

import dataclasses
import hashlib
import io
import logging
import re
import shutil
import signal
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from softsplat_vfi.engine import Interpolator, InterpolatorOptions
from softsplat_vfi.media.files import OutputError
from softsplat_vfi.media.progress import Progress, Spinner
from softsplat_vfi.media.video import ffmpeg_exe, probe, read_frames
from softsplat_vfi.pipeline.video import (IMAGE_THREADS, WRITE_DEPTH, VideoOptions, device_type, interpolate_frames,
                                          interpolate_video, lock_output, segment_frames)
from tests.video_fixtures import Blend
from tests.video_fixtures import make_clip as _clip

ROOT = Path(__file__).resolve().parent.parent


def _interrupted(clip, out, options, weights_id, calls=5):
    with pytest.raises(KeyboardInterrupt):
        interpolate_video(clip, out, Blend(fail_at=calls), options, weights_id=weights_id, progress=False)


def test_resuming_with_another_tile_starts_over(tmp_path, cpu_network):
    """The resume key listed options by hand and left out ``tile``: a resumed video could mix tiled and
    whole-frame segments."""
    whole = Interpolator(InterpolatorOptions(device="cpu", tile=0), network=cpu_network)
    tiled = Interpolator(InterpolatorOptions(device="cpu", tile=32), network=cpu_network)
    assert whole.job_id != tiled.job_id and "tile=32" in tiled.job_id
    clip = _clip(tmp_path / "in.mp4", seconds=2)
    out = tmp_path / "out.mp4"
    options = VideoOptions(segment_seconds=0.5)  # 12 output frames a segment
    _interrupted(clip, out, options, whole.job_id, calls=15)
    stats = interpolate_video(clip, out, Blend(), options, weights_id=tiled.job_id, progress=False)
    assert stats["resumed_segments"] == 0 and probe(out).frames == 48
    # the same settings do resume
    _interrupted(clip, out, options, whole.job_id, calls=15)
    stats = interpolate_video(clip, out, Blend(), options, weights_id=whole.job_id, progress=False)
    assert stats["resumed_segments"] >= 2


def _checksums(path):
    return [hashlib.sha256(frame.tobytes()).hexdigest() for frame in read_frames(probe(path))]


# a job in a process of its own: CLIP OUT WAIT; exit 2 with one line on a user error, as run.py
WORKER = """
import sys
sys.path[:0] = [sys.argv[4], sys.argv[5]]
from softsplat_vfi.pipeline.video import VideoOptions, interpolate_video
from tests.video_fixtures import Blend
try:
    interpolate_video(sys.argv[1], sys.argv[2], Blend(wait=float(sys.argv[3])), VideoOptions(segment_seconds=0.5),
                      progress=False)
except ValueError as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)
"""
OPTIONS = VideoOptions(segment_seconds=0.5)  # segments of 12 output frames, closed by count: the same every run


def _start(clip, out, wait=0.02):
    return subprocess.Popen([sys.executable, "-c", WORKER, str(clip), str(out), str(wait), str(ROOT),
                             str(ROOT / "tests")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_same_output_twice_at_once_one_refuses_the_other_is_untouched(tmp_path):
    """Two jobs into one output once deleted each other's files; one exited 0 with the other's frames in it."""
    clip = _clip(tmp_path / "in.mp4", seconds=2)
    interpolate_video(clip, tmp_path / "alone.mp4", Blend(), OPTIONS, progress=False)
    out = tmp_path / "out.mp4"
    jobs = [_start(clip, out, wait=0.1), _start(clip, out, wait=0.1)]  # each job takes 2.4 s or more
    results = [(job.wait(60), *job.communicate()) for job in jobs]
    assert sorted(code for code, _, _ in results) == [0, 2], results
    refused = next(err for code, _, err in results if code == 2)
    assert refused.count("\n") == 1 and refused.startswith(f"error: another job is writing {out}"), refused
    assert _checksums(out) == _checksums(tmp_path / "alone.mp4")
    assert not (tmp_path / "out.mp4.work").exists()


def test_a_job_holding_the_lock_refuses_a_second_in_process(tmp_path):
    clip = _clip(tmp_path / "in.mp4", seconds=1)
    out = tmp_path / "out.mp4"
    lock = lock_output(out)
    try:
        with pytest.raises(OutputError, match=r"^another job is writing .*out\.mp4 \(its work folder .*out\.mp4\.work "
                                              r"is locked\): wait for it to end, or choose another --out name$"):
            interpolate_video(clip, out, Blend(), OPTIONS, progress=False)
    finally:
        lock.release()
    assert not (tmp_path / "out.mp4.work").exists()  # made for the lock, removed with it
    interpolate_video(clip, out, Blend(), OPTIONS, progress=False)
    assert probe(out).frames == 24


def test_outputs_sharing_a_stem_and_a_folder_run_side_by_side(tmp_path):
    """movie.mp4 and movie.mkv shared movie.work/: job B removed A's files and A joined B's segment as its own."""
    one, two = _clip(tmp_path / "one.mp4", seconds=2), tmp_path / "two.mp4"
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-i", str(one), "-vf", "negate", "-c:v", "libx264",
                    str(two)], check=True)
    interpolate_video(one, tmp_path / "alone_one.mp4", Blend(), OPTIONS, progress=False)
    interpolate_video(two, tmp_path / "alone_two.mkv", Blend(), OPTIONS, progress=False)
    outs = [tmp_path / "movie.mp4", tmp_path / "movie.mkv", tmp_path / "other.mp4"]
    jobs = [_start(one, outs[0]), _start(two, outs[1]), _start(one, outs[2])]
    assert [job.wait(60) for job in jobs] == [0, 0, 0], [job.communicate() for job in jobs]
    assert _checksums(outs[0]) == _checksums(tmp_path / "alone_one.mp4") == _checksums(outs[2])
    assert _checksums(outs[1]) == _checksums(tmp_path / "alone_two.mkv")
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == []


def test_kill_9_mid_segment_then_a_rerun_resumes(tmp_path):
    clip = _clip(tmp_path / "in.mp4", seconds=2)
    interpolate_video(clip, tmp_path / "alone.mp4", Blend(), OPTIONS, progress=False)
    out = tmp_path / "out.mp4"
    work = tmp_path / "out.mp4.work"
    job = _start(clip, out, wait=0.1)
    deadline = time.monotonic() + 30
    while not (list(work.glob("seg_*-*.mp4")) and list(work.glob("seg_*.part.mp4"))):
        assert time.monotonic() < deadline and job.poll() is None
        time.sleep(0.02)
    job.send_signal(signal.SIGKILL)
    job.wait()
    blend = Blend()
    stats = interpolate_video(clip, out, blend, OPTIONS, progress=False)  # the dead job's lock is free
    assert stats["resumed_segments"] >= 1 and blend.calls < 22
    assert _checksums(out) == _checksums(tmp_path / "alone.mp4") and not work.exists()


def _frames_folder(folder, count=6):
    folder.mkdir()
    for i in range(count):
        cv2.imwrite(str(folder / f"{i:06d}.png"), np.full((16, 24, 3), 30 * i, np.uint8))
    return folder


def _images(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.png"))}


def test_a_users_file_named_like_an_output_frame_is_never_taken_as_one(tmp_path):
    """A user's unrelated 000003.png became output frame 3."""
    frames = _frames_folder(tmp_path / "frames")
    out = tmp_path / "out"
    out.mkdir()
    (out / "000003.png").write_bytes(b"the user's")
    blend = Blend()
    for run_job in (lambda: interpolate_frames(frames, str(out / "%06d.png"), Fraction(10), blend, VideoOptions(),
                                               progress=False),
                    lambda: interpolate_video(_clip(tmp_path / "in.mp4", seconds=1), out / "%06d.png", blend,
                                              VideoOptions(), progress=False)):
        with pytest.raises(OutputError, match=r"000003.png exists, and no job of this program recorded writing it "
                                              r".*never taken as an output frame"):
            run_job()
    assert blend.calls == 0 and (out / "000003.png").read_bytes() == b"the user's"
    assert sorted(p.name for p in out.iterdir()) == ["000003.png"]


@pytest.mark.parametrize("source", ["frames", "video"])
def test_a_rerun_with_another_factor_into_an_image_folder_never_mixes(tmp_path, source):
    """After --factor 2, a rerun with --factor 4 into the same folder kept the x2 run's first frames, exit 0."""
    if source == "frames":
        inputs = _frames_folder(tmp_path / "frames")

        def job(out, factor):
            return interpolate_frames(inputs, str(out / "%06d.png"), Fraction(10), Blend(),
                                      VideoOptions(factor=factor), progress=False, weights_id="w")
    else:
        inputs = _clip(tmp_path / "in.mp4", seconds=1)

        def job(out, factor):
            return interpolate_video(inputs, out / "%06d.png", Blend(), VideoOptions(factor=factor),
                                     progress=False, weights_id="w")
    alone = {}
    for factor in (2, 4):
        (tmp_path / f"alone{factor}").mkdir()
        job(tmp_path / f"alone{factor}", factor)
        alone[factor] = _images(tmp_path / f"alone{factor}")
    out = tmp_path / "out"
    out.mkdir()
    for factor in (2, 4, 2, 2):
        job(out, factor)
        assert _images(out) == alone[factor], factor
    # an interrupted x4 run, then x2: the x4 frames are gone, not kept beside the x2 ones
    with pytest.raises(KeyboardInterrupt):
        interpolate_frames(inputs, str(out / "%06d.png"), Fraction(10), Blend(fail_at=3),
                           VideoOptions(factor=4), progress=False, weights_id="w") if source == "frames" else \
            interpolate_video(inputs, out / "%06d.png", Blend(fail_at=3), VideoOptions(factor=4), progress=False,
                              weights_id="w")
    job(out, 2)
    assert _images(out) == alone[2]
    # other weights are another job too
    stats = interpolate_video(inputs, out / "%06d.png", Blend(), VideoOptions(factor=2), progress=False,
                              weights_id="other") if source == "video" else \
        interpolate_frames(inputs, str(out / "%06d.png"), Fraction(10), Blend(), VideoOptions(factor=2),
                           progress=False, weights_id="other")
    assert stats["interpolated"] > 0


# (arguments, words of the one-line error): every mistake the network is not needed to find; run.py took 3-50 s of
# imports and loading before naming most of them
MISTAKES = {
    "empty mp4": (["--video", "empty.mp4", "--out", "o.mp4"], "no video stream found"),
    "text mp4": (["--video", "text.mp4", "--out", "o.mp4"], "no video stream found"),
    "factor 0": (["--video", "in.mp4", "--out", "o.mp4", "--factor", "0"], "--factor must be 1 or more"),
    "factor -2": (["--video", "in.mp4", "--out", "o.mp4", "--factor", "-2"], "--factor must be 1 or more"),
    "factor 0 frames": (["--frames", "frames", "--out", "out/%06d.png", "--factor", "0"], "--factor must be 1"),
    "missing weights": (["--video", "in.mp4", "--out", "o.mp4", "--weights", "nope.safetensors"], "no such file"),
    "empty frames folder": (["--frames", "empty", "--out", "out/%06d.png"], "no image files"),
    "fps with factor": (["--video", "in.mp4", "--out", "o.mp4", "--fps", "50", "--factor", "2"],
                        "use it without --factor"),
    "out is a folder": (["--video", "in.mp4", "--out", "out"], "out is a folder"),
    "pair out is a folder": (["--one", "a.png", "--two", "a.png", "--out", "folder.png"], "folder.png is a folder"),
    "no output frames": (["--video", "half.mp4", "--out", "fps1.mp4", "--fps", "1"],
                         "holds no frame at 1 frames/s -- use an --fps of at least 2"),
    "bad pattern": (["--video", "in.mp4", "--out", "out/%d%d.png"], "holds one number field"),
    "output locked": (["--video", "in.mp4", "--out", "locked.mp4"], "another job is writing locked.mp4"),
    "bad device": (["--video", "in.mp4", "--out", "o.mp4", "--device", "tpu"], "--device 'tpu' is not a device"),
    "pair bad device": (["--one", "a.png", "--two", "a.png", "--out", "m.png", "--device", "gpu"], "is not a device"),
}


@pytest.fixture(scope="module")
def mistakes_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mistakes")
    _clip(folder / "in.mp4", seconds=1)
    _clip(folder / "half.mp4", seconds=0.5)
    (folder / "empty.mp4").write_bytes(b"")
    (folder / "text.mp4").write_text("not a video\n")
    for name in ("empty", "out", "folder.png"):
        (folder / name).mkdir()
    _frames_folder(folder / "frames", 3)
    cv2.imwrite(str(folder / "a.png"), np.zeros((16, 24, 3), np.uint8))
    return folder


@pytest.mark.parametrize("case", sorted(MISTAKES))
def test_every_mistake_is_reported_before_torch_or_the_network_loads(mistakes_folder, case):
    """Each mistake is one line, said from what was run: neither torch nor any module of the network (model/,
    softsplat, engine.interpolator) was imported, so nothing was loaded or built. It was checked by wall time
    (under 1 s), which 13 cases failed on a loaded 2-core machine (1.02-1.32 s): speed is a benchmark's."""
    args, words = MISTAKES[case]
    lock = lock_output(mistakes_folder / "locked.mp4") if case == "output locked" else None
    try:
        device = [] if "--device" in args else ["--device", "cpu"]
        proc = subprocess.run([sys.executable, "-X", "importtime", str(ROOT / "run.py"), *args, *device],
                              capture_output=True, text=True, cwd=mistakes_folder, timeout=60)
    finally:
        if lock is not None:
            lock.release()
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "import time:" in line}
    said = [line for line in proc.stderr.splitlines() if "import time:" not in line]
    assert proc.returncode == 2 and len(said) == 1 and said[0].startswith("error: ") and words in said[0], said
    network = sorted(m for m in imported if m.split(".")[0] == "torch" or m.startswith(("softsplat_vfi.model",
                     "softsplat_vfi.softsplat")) or m == "softsplat_vfi.engine.interpolator")
    # (the import log is read: it names the CLI's)
    assert "softsplat_vfi.engine.options" in imported and not network, network
    assert sorted(p.name for p in mistakes_folder.iterdir() if p.name.endswith(".work")) == []


def _kept(work):
    return sum(int(p.stem.split("-")[1]) - int(p.stem.split("_")[1].split("-")[0]) for p in work.glob("seg_*-*.mp4"))


class _SlowClock:
    """pipeline.video's clock on a machine many times slower (or loaded): a minute passes at each look."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        self.now += 61.0
        return self.now

    sleep = staticmethod(time.sleep)


def test_the_same_command_gives_the_same_bytes_on_a_fast_machine_and_a_slow_one(tmp_path, monkeypatch, capsys):
    """The same command run twice gave frames 40.4-46.4 dB apart: segments closed after a minute of work, so
    where x264 started afresh followed the machine's speed. Two runs of one command, the second where every frame
    seems to take a minute: the same file, byte for byte."""
    import softsplat_vfi.pipeline.video as pv
    import run

    clip = _clip(tmp_path / "in.mp4", seconds=1)
    command = ["--video", str(clip), "--device", "cpu", "--crf", "30"]
    assert run.main(command + ["--out", str(tmp_path / "fast.mp4")]) == 0
    monkeypatch.setattr(pv, "time", _SlowClock())
    assert run.main(command + ["--out", str(tmp_path / "slow.mp4")]) == 0
    capsys.readouterr()
    assert (tmp_path / "fast.mp4").read_bytes() == (tmp_path / "slow.mp4").read_bytes()


def test_the_segments_are_a_function_of_frame_counts_only(tmp_path, monkeypatch):
    """segment_frames: --segment-seconds of video, fewer where the device type and frame size say that takes more
    than a minute; an interrupted run on a slow clock keeps exactly those segments."""
    import softsplat_vfi.pipeline.video as pv

    on_a_gpu = SimpleNamespace(device=SimpleNamespace(type="cuda"))  # as engine.Interpolator's torch.device
    assert device_type(on_a_gpu) == "cuda" and device_type(Blend()) == "cpu"
    options = VideoOptions()
    assert segment_frames(Fraction(48), 1920, 1080, options, "cuda") == 480  # 10 s of video
    assert segment_frames(Fraction(48), 1920, 1080, options, "cpu") == 6  # about a minute on a 2-core CPU
    assert segment_frames(Fraction(24), 96, 64, options, "cpu") == 240
    assert segment_frames(Fraction(24), 96, 64, VideoOptions(segment_seconds=0.5), "cpu") == 12
    monkeypatch.setattr(pv, "time", _SlowClock())
    with pytest.raises(KeyboardInterrupt):
        interpolate_video(_clip(tmp_path / "in.mp4", seconds=2), tmp_path / "out.mp4", Blend(fail_at=20),
                          VideoOptions(segment_seconds=0.25), progress=False)
    assert sorted(p.name for p in (tmp_path / "out.mp4.work").glob("seg_*-*.mp4")) == \
        [f"seg_{a:06d}-{a + 6:06d}.mp4" for a in range(0, 36, 6)]


@pytest.mark.parametrize("fail_at", [2, 3, 4])
def test_a_frame_that_takes_longer_than_a_segment_is_kept_once_written(tmp_path, fail_at):
    """A segment closed at the first frame written after a minute of work: where one frame took minutes, an
    interrupt before the second lost everything (9 minutes in one try). Where one frame takes more than a minute
    (8K on a CPU), each frame is now a segment of its own, closed as it is written: at most one frame's work is
    lost."""
    assert segment_frames(Fraction(48), 7680, 4320, VideoOptions(), "cpu") == 1
    clip = _clip(tmp_path / "in.mp4", seconds=2)
    options = VideoOptions(segment_work_seconds=0.03)  # "a minute", where each frame takes about 0.03 s
    assert segment_frames(Fraction(24), 96, 64, options, "cpu") == 1
    with pytest.raises(KeyboardInterrupt, match="; run the same command again to resume$"):
        interpolate_video(clip, tmp_path / "out.mp4", Blend(fail_at=fail_at), options, progress=False)
    made = 2 * (fail_at - 1)  # output frames made before the interrupt: a copy and an interpolation per pair
    assert _kept(tmp_path / "out.mp4.work") >= made - 1


def test_an_interrupt_says_what_was_kept_and_never_offers_a_resume_of_nothing(tmp_path, monkeypatch, capsys):
    """An interrupt during start-up said "run the same command again to resume" when nothing had started."""
    import run
    from softsplat_vfi.engine import interpolator

    clip = _clip(tmp_path / "in.mp4", seconds=1)

    def loading(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(interpolator.Interpolator, "__init__", loading)
    assert run.main(["--video", str(clip), "--out", str(tmp_path / "out.mp4"), "--device", "cpu"]) == 130
    err = capsys.readouterr().err
    assert err.splitlines() == ["loading torch and the network (weights/network.safetensors) on cpu ...",
                                "interrupted before any frame was made"], err
    assert not (tmp_path / "out.mp4.work").exists()
    with pytest.raises(KeyboardInterrupt, match="^0 new output frames kept in 0 finished segments; nothing "
                                                "finished yet: a rerun starts over$"):
        interpolate_video(clip, tmp_path / "out.mp4", Blend(fail_at=1), VideoOptions(), progress=False)
    frames = tmp_path / "frames"
    frames.mkdir()
    with pytest.raises(KeyboardInterrupt, match="^4 of 24 images written are kept; run the same command again"):
        interpolate_video(clip, frames / "%04d.png", Blend(fail_at=3), VideoOptions(), progress=False)


def _declared(path):
    """The video stream's declared duration and rate as ffmpeg's banner gives them (avg_frame_rate, as ffprobe
    and editors read it)."""
    text = subprocess.run([ffmpeg_exe(), "-hide_banner", "-i", str(path)], capture_output=True, text=True).stderr
    return re.search(r"Duration: ([\d:.]+)", text).group(1), re.search(r"([\d.]+) fps", text).group(1)


def test_segments_of_any_length_join_into_a_stream_that_declares_its_exact_rate(tmp_path):
    """A 720p x2 output declared 1.950 s and avg_frame_rate 1600/39 (41.03) for 80 frames at exactly 1/40 s: its
    segments (closed by time on a slow CPU) held 2 to 4 frames, and one of two frames has no B-frames, so its
    successor's decoding times fell before its own. Segments of one frame (an interrupted run where each frame
    takes longer than a minute), then of many (the same job resumed where frames take less)."""
    clip = _clip(tmp_path / "in.mp4", seconds=2, rate=20)
    out = tmp_path / "out.mp4"
    with pytest.raises(KeyboardInterrupt):
        interpolate_video(clip, out, Blend(fail_at=4), VideoOptions(segment_work_seconds=0.01), progress=False)
    assert _kept(tmp_path / "out.mp4.work") == 6 == len(list((tmp_path / "out.mp4.work").glob("seg_*-*.mp4")))
    interpolate_video(clip, out, Blend(), VideoOptions(segment_seconds=0.3), progress=False)
    assert _declared(out) == ("00:00:02.00", "40")
    info = probe(out)
    assert info.frames == 80 and info.rate == 40 and not info.variable_rate
    assert info.pts == [Fraction(j, 40) for j in range(80)]


def _free(monkeypatch, free):
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**10, 10**10 - free, free))


def _flat_clip(path, size="640x480", seconds=2):
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi", "-i", f"color=c=gray:size={size}:rate=12",
                    "-t", str(seconds), "-c:v", "libx264", "-pix_fmt", "yuv420p", str(path)], check=True)
    return path


def test_the_space_check_measures_instead_of_guessing(tmp_path, monkeypatch):
    """It guessed 0.1 bits a pixel and refused jobs that fit (2.7 MB asked for a 1.06 MB video), with no override.
    Now the first frames written are measured, and --no-space-check turns it off."""
    flat = _flat_clip(tmp_path / "flat.mp4")  # 48 output frames of 640x480 that encode to almost nothing
    _free(monkeypatch, 100_000)  # the guess asked for 369 KB
    interpolate_video(flat, tmp_path / "flat_x2.mp4", Blend(), OPTIONS, progress=False)
    assert probe(tmp_path / "flat_x2.mp4").frames == 48
    busy = _clip(tmp_path / "busy.mp4", seconds=2, size="320x240")  # noisy frames: several KB each
    out = tmp_path / "busy_x2.mp4"
    blend = Blend()
    with pytest.raises(OutputError, match=r"^not enough space in .*: the 12 frames written took [\d.]+ KB each, so "
                                          r"the rest of the job needs about [\d.]+ KB and 100.0 KB is free -- .*"
                                          r"--no-space-check .*; rerun the same command to resume"):
        interpolate_video(busy, out, blend, OPTIONS, progress=False)
    # 6 pairs fill the first segment; it closes behind the writing (F84), so the failure stops the job by the
    # second segment's close at the latest (6 pairs more), with the pairs written behind (WRITE_DEPTH frames) and
    # the one in hand; the second segment is not kept
    assert 6 <= blend.calls <= 2 * 6 + WRITE_DEPTH // 2 + 1, blend.calls
    assert len(list((tmp_path / "busy_x2.mp4.work").glob("seg_*-*.mp4"))) == 1
    stats = interpolate_video(busy, out, Blend(), dataclasses.replace(OPTIONS, space_check=False), progress=False)
    assert stats["resumed_segments"] == 1 and probe(out).frames == 48


def test_image_outputs_are_measured_too(tmp_path, monkeypatch):
    frames = tmp_path / "frames"
    frames.mkdir()
    rng = np.random.default_rng(0)
    for i in range(8):  # noise: about 37 KB an image; 16 output images, 4 after the 12 measured
        cv2.imwrite(str(frames / f"{i:06d}.png"), rng.integers(0, 256, (96, 128, 3), np.uint8))
    out = tmp_path / "out"
    out.mkdir()
    _free(monkeypatch, 100_000)
    with pytest.raises(OutputError, match=r"the 12 frames written took .* 100.0 KB is free.*the images written are "
                                          r"kept$"):
        interpolate_frames(frames, str(out / "%06d.png"), Fraction(10), Blend(), VideoOptions(), progress=False)
    # the 12 measured, and any the other image threads had in hand when the measure stopped the job
    assert 12 <= len(list(out.glob("*.png"))) < 12 + IMAGE_THREADS
    interpolate_frames(frames, str(out / "%06d.png"), Fraction(10), Blend(), VideoOptions(space_check=False),
                       progress=False)
    assert len(list(out.glob("*.png"))) == 16


def test_pair_outputs_need_room_for_what_the_inputs_take(tmp_path, monkeypatch):
    """A 40 KB PNG was refused with 127 KB free: the guess was 194 KB."""
    from softsplat_vfi.media.images import check_image_outputs

    ramp = np.tile(np.linspace(0, 255, 360).astype(np.uint8), (360, 1))
    one = tmp_path / "one.png"
    cv2.imwrite(str(one), np.dstack([ramp, ramp.T, ramp]))
    assert one.stat().st_size < 100_000  # the guess for 360 x 360 was 194 KB
    _free(monkeypatch, 127_000)
    check_image_outputs([tmp_path / "mid.png"], [one, one], 360, 360)
    _free(monkeypatch, one.stat().st_size // 2)
    with pytest.raises(OutputError, match="not enough space"):
        check_image_outputs([tmp_path / "mid.png"], [one, one], 360, 360)
    check_image_outputs([tmp_path / "mid.png"], [one, one], 360, 360, space_check=False)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_in_a_log_is_lines_and_in_a_terminal_a_bar_without_invented_rates(tmp_path, capsys):
    """In a non-terminal log the bar wrote \r-joined updates; after a resume its first rate was invented (the
    frames of the finished segments counted as made in no time) and its early ETA far off; with --compile the first
    frame's minute of compiling made the time left hours."""
    clip = _clip(tmp_path / "in.mp4", seconds=1)
    interpolate_video(clip, tmp_path / "out.mp4", Blend(), VideoOptions(), progress=True)
    (tmp_path / "out").mkdir()
    interpolate_video(clip, tmp_path / "out" / "%04d.png", Blend(), VideoOptions(), progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err and "frame/s" not in err, err
    log = io.StringIO()
    bar = Progress(100, "out.mp4", stream=log, every=0)
    bar.skip(40)
    assert bar.line() == "out.mp4: 40/100 frames (40 from an earlier run)"  # no rate before a frame is made
    # the first frame carries the start-up (--compile's compiling made a 1080p video say "about 3:25:01 left"):
    # counted, not timed
    time.sleep(1.0)
    bar.update(1)
    assert log.getvalue().splitlines()[-1] == "out.mp4: 41/100 frames (40 from an earlier run)"
    time.sleep(0.2)
    bar.update(2)
    line = log.getvalue().splitlines()[-1]
    rate = 2 / float(re.search(r", ([\d.]+) frames/s", line).group(1))
    assert 0.18 < rate < 0.5 and "about 0:" in line and "\r" not in log.getvalue(), line
    terminal = _Terminal()
    bar = Progress(100, "out.mp4", stream=terminal)
    bar.skip(40)
    shown = terminal.getvalue().split("\r")[-1]
    assert "40/100" in shown and "?frame/s" in shown, shown
    bar.close()


def test_a_long_pair_says_it_is_working(tmp_path, cpu_interpolator, capsys):
    """Pair mode printed nothing between the start and 'wrote': 46 s for a 720p pair on the CPU."""
    from softsplat_vfi.engine.files import interpolate_files

    one, two = tmp_path / "one.png", tmp_path / "two.png"
    cv2.imwrite(str(one), np.zeros((24, 32, 3), np.uint8))
    cv2.imwrite(str(two), np.full((24, 32, 3), 200, np.uint8))
    interpolate_files(one, two, tmp_path / "mid.png", [0.5], cpu_interpolator, progress=True)
    assert capsys.readouterr().err == "interpolating the 32x24 pair (1 time) ...\n"
    terminal = _Terminal()
    with Spinner("interpolating", stream=terminal):
        time.sleep(1.2)
    assert re.fullmatch(r"(\rinterpolating [-|/\\] 0:0[01]){2}\rinterpolating: 0:01\n", terminal.getvalue())


def test_a_note_said_under_a_bar_or_spinner_gets_a_line_of_its_own(monkeypatch):
    """A damaged input's note (said while decoding, under the video's bar) landed mid-line, after the bar: the
    command line's notes now clear the bar or spinner, take a line, and the bar is drawn again below them."""
    from softsplat_vfi.engine.options import show_notes

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    show_notes()
    bar = Progress(100, "out.mp4", stream=terminal)
    bar.update(3)
    logging.getLogger("softsplat_vfi.media.video").warning("in.mp4: 5 frames lost")
    shown = terminal.getvalue()
    before, after = shown.split("note: in.mp4: 5 frames lost\n")
    assert before.endswith("\r") and "3/100" in after, repr(shown)  # (the bar's line cleared, then drawn below)
    bar.close()
    spinning = _Terminal()
    monkeypatch.setattr(sys, "stderr", spinning)
    with Spinner("interpolating", stream=spinning):
        time.sleep(0.6)
        logging.getLogger("softsplat_vfi.media.video").warning("a note")
        time.sleep(0.6)
    lines = spinning.getvalue().split("note: a note\n")
    assert lines[0].endswith("\r") and re.match(r"\rinterpolating [-|/\\] 0:00", lines[1]), repr(spinning.getvalue())
