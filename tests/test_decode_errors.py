"""Decoding a damaged video says what happened (finding F70): ffmpeg's error lines are read as they come, so many of
them cannot stop the decode, a decode that fails raises, one that got past errors or lost frames warns, and a caller
that stops reading early hears nothing (small generated clips; each test well under a second or two)."""

import logging
import random
import re
import subprocess
import threading
from pathlib import Path

import pytest

import softsplat_vfi.media.video as video
from softsplat_vfi.media.video import VideoError, ffmpeg_exe, probe, read_frames
from softsplat_vfi.pipeline.video import VideoOptions, interpolate_video
from tests.video_fixtures import Blend
from tests.video_fixtures import make_clip as _clip

PIPE_SIZE = 64 * 1024  # Linux's pipe: an unread stderr holds this much, then ffmpeg blocks writing


def _damaged(clip: Path, out: Path, start: int, step: int, width: int = 8) -> Path:
    """``clip`` with ``width`` bytes of its video data overwritten by noise every ``step`` bytes from ``start``
    (counted from the start of the mdat box), up to its index (moov, which x264's mp4 has last)."""
    data = bytearray(clip.read_bytes())
    rng = random.Random(1)
    first, end = data.find(b"mdat") + 4, data.find(b"moov") - 4
    for pos in range(first + start, end - width, step):
        data[pos:pos + width] = bytes(rng.randrange(256) for _ in range(width))
    out.write_bytes(data)
    return out


def _warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.name == video.__name__ and r.levelno >= logging.WARNING]


def _popens(monkeypatch):
    """The ffmpeg processes read_frames starts, as it starts them."""
    started = []
    real = subprocess.Popen

    def recording(*args, **kwargs):
        started.append(real(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(video.subprocess, "Popen", recording)
    return started


def test_a_decode_with_more_errors_than_the_pipe_holds_finishes(tmp_path, caplog):
    """ffmpeg logs a line or more per damaged packet, even at -loglevel error; read_frames left its stderr unread,
    so at 64 KiB of them ffmpeg blocked writing the next and the decode hung for ever (this 720-frame clip after
    226 frames: F70). Now the lines are read as they come, and the frames lost are said."""
    bad = _damaged(_clip(tmp_path / "long.mp4", seconds=60, size="64x48"), tmp_path / "bad.mp4", 2000, 40)
    whole = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-i", str(bad),
                            "-f", "null", "-"], capture_output=True)
    assert len(whole.stderr) > PIPE_SIZE + 8192  # (what makes it hang: more errors than the pipe holds)
    info = probe(bad)
    got = []
    reader = threading.Thread(target=lambda: got.extend(1 for _ in read_frames(info)), daemon=True)
    reader.start()
    reader.join(timeout=30)  # (a hang fails here instead of stopping the suite)
    assert not reader.is_alive(), f"the decode hung after {len(got)} of {info.frames} frames"
    assert 0 < len(got) < info.frames == 720
    said = _warnings(caplog)
    assert len(said) == 1 and str(bad) in said[0], said
    assert f"decoded {len(got)} of the 720 frames its packets hold, {720 - len(got)} frames lost" in said[0]
    assert "errors; the first: " in said[0] and "@ 0x" not in said[0]


def test_errors_that_ffmpeg_conceals_keep_every_frame_and_are_said(tmp_path, caplog):
    bad = tmp_path / "bad.mp4"
    data = bytearray(_clip(tmp_path / "clip.mp4", size="64x48").read_bytes())
    start = data.find(b"mdat") + 4 + 2100  # (past the frames that probe decodes, which would say it)
    data[start:start + 4] = b"\xff\x13\x77\x00"
    bad.write_bytes(data)
    assert len(list(read_frames(probe(bad)))) == 24
    said = _warnings(caplog)
    assert len(said) == 1 and str(bad) in said[0] and "ffmpeg got past " in said[0], said
    caplog.clear()
    assert len(list(read_frames(probe(tmp_path / "clip.mp4")))) == 24 and _warnings(caplog) == []


def _error_count(path: Path) -> int:
    """The errors a plain decode of ``path`` logs (``-loglevel error``, nothing else in the log), counted as
    read_frames counts them: a line each, "Last message repeated N times" N."""
    log = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", "-i", str(path),
                          "-f", "null", "-"], capture_output=True, check=True).stderr.decode("utf-8", "replace")
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    repeated = [re.fullmatch(r"(?:\[\w+\] )?Last message repeated (\d+) times?", line) for line in lines]
    return sum(int(m.group(1)) if m else 1 for m in repeated)


def test_every_error_is_counted_however_ffmpegs_threads_interleave_their_log(tmp_path, caplog):
    """ffmpeg's decoder and its filters log from threads of their own, and showinfo (read_frames' frame times, in
    the same log at -loglevel level+info) writes each line in pieces: a decoder's error line that came between
    them was printed inside showinfo's line, without its "[h264 @ 0x...] [error]", and was dropped as showinfo's.
    1 decode in 20-40 of the clip of the test above said nothing (F82), and 6 in 20 of this one's miscounted its 41
    errors. The times have a file of their own now, and the log holds only whole error lines: every decode counts
    every error."""
    data = bytearray(_clip(tmp_path / "clip.mp4", seconds=10, size="64x48").read_bytes())
    for pos in range(data.find(b"mdat") + 4 + 2100, data.find(b"moov") - 8, 400):  # (concealed, or frames lost)
        data[pos:pos + 4] = b"\xff\x13\x77\x00"
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(data)
    errors = _error_count(bad)
    assert errors > 20
    info = probe(bad)
    for _ in range(8):
        caplog.clear()
        decoded = len(list(read_frames(info)))
        said = _warnings(caplog)
        assert len(said) == 1 and f"decoded {decoded} of the 120 frames" in said[0], said
        assert f"(it logged {errors} errors; the first: " in said[0], said


def test_a_decoder_that_gives_up_raises_instead_of_ending_the_video_early(tmp_path, caplog):
    """ffmpeg stopped (exit status 69: more than 2/3 of the frames failed) after 3 of 24 frames: the reader just
    ended, and the video job held the last frame to the end, a still picture for the rest of the video, without a
    word. It raises now, naming the file and ffmpeg's first errors, and no output is written, nor a work folder
    left."""
    bad = _damaged(_clip(tmp_path / "clip.mp4", size="64x48"), tmp_path / "bad.mp4", 1200, 16)
    info = probe(bad)
    frames = read_frames(info)
    got = []
    with pytest.raises(VideoError, match=r"cannot decode .*bad\.mp4: ffmpeg stopped after \d+ of its 24 frames "
                                         r"\(exit status 69: too many of its frames failed to decode\): \w"):
        got.extend(frames)
    assert len(got) < 24
    out = tmp_path / "out.mp4"
    with pytest.raises(VideoError, match="cannot decode"):
        interpolate_video(bad, out, Blend(), VideoOptions(), progress=False)
    assert not out.exists()
    assert not (tmp_path / "out.mp4.work").exists()  # (nothing finished in it to resume: it was left behind)


def test_a_killed_decoder_raises(tmp_path, monkeypatch):
    info = probe(_clip(tmp_path / "clip.mp4", size="64x48"))
    started = _popens(monkeypatch)
    frames = read_frames(info)
    next(frames)
    started[0].kill()  # (the out-of-memory killer, say)
    with pytest.raises(VideoError, match=r"ffmpeg stopped after \d+ of its 24 frames \(killed by signal 9\)$"):
        list(frames)


def test_a_caller_that_stops_reading_early_hears_nothing(tmp_path, monkeypatch, caplog):
    """Its stop kills ffmpeg (a job's part that ends before the video does): neither an error nor a warning, also
    where the frames read so far had errors."""
    started = _popens(monkeypatch)
    damaged = _damaged(_clip(tmp_path / "clip.mp4", size="64x48"), tmp_path / "bad.mp4", 100, 40)
    for path in (tmp_path / "clip.mp4", damaged):
        frames = read_frames(probe(path))
        next(frames)
        frames.close()
        assert started[-1].returncode is not None  # (ended: not left running)
    assert _warnings(caplog) == []


def _lose_pictures(clip: Path, out: Path, first: int, last: int) -> Path:
    """``clip`` with the packets of frames ``first``..``last`` filled with noise (ffmpeg's noise bitstream filter):
    the packets are all there, and the decoder gives no picture for them ("missing picture in access unit")."""
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-i", str(clip), "-c", "copy", "-bsf:v",
                    f"noise=amount=if(between(n\\,{first}\\,{last})\\,1\\,0)", str(out)], check=True)
    return out


def test_frames_a_damaged_input_loses_leave_gaps_at_their_times_and_the_rest_keep_theirs(tmp_path, caplog):
    """The decoder gave no picture for five packets of 36 (frames 10-14), and read_frames' 31 frames were paired
    with the first 31 packets' times: every frame after the damage moved five frames earlier, and the video job's
    output frame 40 (t = 20/12 s at x2) showed input frame 25. Each frame now keeps its own packet's time (ffmpeg's
    timestamp for it, a line per frame in a file beside its log), and the job makes the lost frames' times from
    frames 9 and 15."""
    # (ffmpeg's game of life: every frame unlike the others; an I-frame every 6 frames, so that the damage reaches
    # frames 15-17 through their references)
    clip = tmp_path / "clip.mp4"
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    "life=size=64x48:rate=12:seed=1:ratio=0.3", "-t", "3", "-c:v", "libx264", "-g", "6", "-bf", "0",
                    "-pix_fmt", "yuv420p", str(clip)], check=True)
    bad = _lose_pictures(clip, tmp_path / "bad.mp4", 10, 14)
    info = probe(bad)
    assert info.frames == 36
    timed = list(video.read_timed_frames(info))
    assert [t * 12 for _, t in timed] == [*range(10), *range(15, 36)]
    said = _warnings(caplog)
    assert len(said) == 1 and "decoded 31 of the 36 frames its packets hold, 5 frames lost, the first at 0.833 s" \
        in said[0], said
    originals = list(read_frames(probe(clip)))

    def nearest(frame):
        return min(range(36), key=lambda k: abs(frame.astype(float) - originals[k]).mean())

    assert [nearest(frame) for frame, _ in timed] == [t * 12 for _, t in timed]
    assert all((frame == originals[int(t * 12)]).all() for frame, t in timed if not 15 <= t * 12 < 18)
    out = tmp_path / "out.mp4"
    interpolate_video(bad, out, Blend(), VideoOptions(factor=2, crf=0, preset="ultrafast", dedup_threshold=0,
                                                     scene_threshold=0), progress=False)
    made = [f.astype(float) for f in read_frames(probe(out))]
    assert len(made) == 72
    assert [nearest(made[j]) for j in (18, 30, 40, 60)] == [9, 15, 20, 30]
    # in the gap, the frames are blends of frames 9 and 15 at their times (t = 10/12 s: a sixth of the way)
    want = (5 * originals[9].astype(float) + originals[15]) / 6
    assert abs(made[20] - want).mean() < abs(made[20] - originals[9]).mean()


def test_an_undamaged_decode_times_every_frame_by_its_packet(tmp_path, caplog):
    """ffmpeg's timestamps for each frame (-stats_enc_pre) against probe's packets: the same times, also with B-frames,
    audio that starts first, and an mkv (timestamps in milliseconds); and from a seek (a job's part), the same
    frames at the same times as from the start. After a seek in the mkv, its millisecond times met on one tick of
    the raw output's default time base, and each such frame was an error in ffmpeg's log ("non monotonically
    increasing dts to muxer"), a false note of damage."""
    made = tmp_path / "b.mkv"
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    "sine=frequency=440:sample_rate=48000", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=24000/1001",
                    "-filter_complex", "[1:v]setpts=PTS+0.2/TB[v]", "-map", "[v]", "-map", "0:a", "-t", "2",
                    "-c:v", "libx264", "-bf", "3", "-c:a", "aac", str(made)], check=True)
    for path in (_clip(tmp_path / "a.mp4", audio=True), made):
        info = probe(path)
        timed = list(video.read_timed_frames(info))
        assert [t for _, t in timed] == info.pts and len(timed) == info.frames
        for first in (1, 5, 17):
            part = list(video.read_timed_frames(info, first=first))
            assert [t for _, t in part] == info.pts[first:]
            assert all((a == b).all() for (a, _), (b, _) in zip(part, timed[first:]))
    assert _warnings(caplog) == []
