"""Jobs side by side and one after another (issue 67): a lock per output, a key per output that covers every
option that changes the frames, and reruns that never mix two settings. CPU, small generated clips; the network is
a stand-in (``Blend``) where it is not the point."""

import hashlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import Interpolator, InterpolatorOptions
from media.files import OutputError
from media.video import ffmpeg_exe, probe, read_frames
from pipeline.video import VideoOptions, interpolate_video, lock_output
from test_robustness import Blend, _clip

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
from pipeline.video import VideoOptions, interpolate_video
from test_robustness import Blend
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
    jobs = [_start(clip, out), _start(clip, out)]
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
