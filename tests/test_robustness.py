"""The video job never costs the user a file and fails cleanly on the file system (CPU, small generated clips).

Runs as root on the test machines, where permissions do not stop a write: read-only folders are simulated by
making ``os.open`` raise EROFS there, as the kernel would; a full disk is real where it can be (ffmpeg writing
through a link to /dev/full, which answers every write with ENOSPC)."""

import errno
import json
import os
import re
import shutil
import time
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import pytest

import softsplat_vfi.pipeline.video as pv
import run
from softsplat_vfi.media.files import OutputError
from softsplat_vfi.media.video import FrameWriter, VideoError, probe, read_frames
from softsplat_vfi.pipeline.schedule import is_cut
from softsplat_vfi.pipeline.video import IMAGE_THREADS, WRITE_DEPTH, VideoOptions, interpolate_frames, interpolate_video
from tests.video_fixtures import Blend
from tests.video_fixtures import make_clip as _clip

ROOT = Path(__file__).resolve().parent.parent


def _read_only(monkeypatch, folder: Path):
    real = os.open

    def fake(path, *args, **kwargs):
        if Path(path).parent == folder:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake)


def _cli(args, capsys):
    code = run.main([str(a) for a in args] + ["--device", "cpu"])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_users_folder_named_like_the_work_folder_is_left_alone(tmp_path, capsys):
    """The job once deleted NAME.work/ (now NAME.mp4.work/) next to --out NAME.mp4, with its contents, without a
    word."""
    clip = _clip(tmp_path / "in.mp4")
    mine = tmp_path / "holiday.mp4.work"
    mine.mkdir()
    (mine / "notes.txt").write_text("the user's")
    (mine / "job.json").write_text('{"name": "a job.json of some other program"}')
    code, _, err = _cli(["--video", clip, "--out", tmp_path / "holiday.mp4"], capsys)
    assert code == 2 and err.count("\n") == 1 and "is not a work folder of this program" in err, err
    assert (mine / "notes.txt").read_text() == "the user's" and len(list(mine.iterdir())) == 2
    assert not (tmp_path / "holiday.mp4").exists()
    # a file of that name is refused too
    shutil.rmtree(mine)
    mine.write_text("a file")
    with pytest.raises(OutputError, match="is not a work folder"):
        interpolate_video(clip, tmp_path / "holiday.mp4", Blend(), VideoOptions(), progress=False)
    assert mine.read_text() == "a file"


def test_a_work_folder_of_another_job_loses_only_the_jobs_files(tmp_path):
    clip = _clip(tmp_path / "in.mp4")
    work = tmp_path / "out.mp4.work"
    work.mkdir()
    (work / "job.json").write_text(json.dumps({"key": "0" * 64}))  # left by an earlier version, another job
    (work / "seg_00000.mp4").write_bytes(b"an old segment")
    (work / "mine.txt").write_text("put here by the user")
    stats = interpolate_video(clip, tmp_path / "out.mp4", Blend(), VideoOptions(), progress=False)
    assert probe(tmp_path / "out.mp4").frames == 48
    assert sorted(p.name for p in work.iterdir()) == ["mine.txt"]  # the folder stays, with the user's file
    assert "kept: it holds files this program did not make" in stats["work folder"]


def test_an_existing_file_at_out_is_kept_unless_overwrite(tmp_path, capsys):
    """--out o.mp4 replaced a user's unrelated o.mp4 without a word. Now it is kept and the job refused before the
    network loads, unless --overwrite (-y); the program's own output is replaced by a rerun, as before, until
    anyone changes it."""
    clip = _clip(tmp_path / "in.mp4", seconds=1)
    out = tmp_path / "o.mp4"
    out.write_bytes(b"the user's")
    code, _, err = _cli(["--video", clip, "--out", out], capsys)
    assert code == 2 and err.count("\n") == 1 and "loading" not in err, err
    assert f"error: {out} exists, and this program did not write it: it is kept -- choose another --out name, or " \
           f"add --overwrite (-y) to replace it (nothing was interpolated yet)" in err
    assert out.read_bytes() == b"the user's" and sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "o.mp4"]
    parser = run.build_parser()
    assert [run.video_options(parser.parse_args(["--video", str(clip), "--out", str(out), *flag])).overwrite
            for flag in ([], ["--overwrite"], ["-y"])] == [False, True, True]
    interpolate_video(clip, out, Blend(), VideoOptions(overwrite=True), progress=False)
    assert probe(out).frames == 24
    # its own output, of this job or another: replaced by a rerun without --overwrite
    interpolate_video(clip, out, Blend(), VideoOptions(factor=3), progress=False)
    assert probe(out).frames == 36
    with out.open("ab") as f:
        f.write(b"\0")  # changed since: no longer the program's
    with pytest.raises(OutputError, match="did not write it: it is kept"):
        interpolate_video(clip, out, Blend(), VideoOptions(), progress=False)


def test_files_named_like_output_frames_are_refused_before_loading_unless_overwrite(tmp_path, capsys):
    """A stray file in an image pattern's folder was found only after the network loaded; --overwrite replaces it."""
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in range(3):
        cv2.imwrite(str(frames / f"{i:06d}.png"), np.full((16, 24, 3), 40 * i, np.uint8))
    out = tmp_path / "out"
    out.mkdir()
    (out / "000002.png").write_bytes(b"the user's")
    for source in (["--frames", frames], ["--video", _clip(tmp_path / "in.mp4", seconds=1)]):
        code, _, err = _cli([*source, "--out", out / "%06d.png"], capsys)
        assert code == 2 and err.count("\n") == 1 and "loading" not in err, err
        assert "000002.png exists, and no job of this program recorded writing it" in err and "--overwrite" in err
    assert sorted(p.name for p in out.iterdir()) == ["000002.png"]
    stats = interpolate_frames(frames, str(out / "%06d.png"), Fraction(10), Blend(), VideoOptions(overwrite=True),
                               progress=False)
    assert stats["frames_out"] == 6 and cv2.imread(str(out / "000002.png")).shape == (16, 24, 3)


def test_an_output_that_is_an_input_is_refused_in_frame_mode(tmp_path):
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in range(3):
        cv2.imwrite(str(frames / f"{i:06d}.png"), np.full((16, 24, 3), 40 * i, np.uint8))
    before = {p.name: p.read_bytes() for p in frames.iterdir()}
    with pytest.raises(OutputError, match="is the input .*never overwritten"):
        interpolate_frames(frames, str(frames / "%06d.png"), Fraction(10), Blend(), VideoOptions(), progress=False)
    assert {p.name: p.read_bytes() for p in frames.iterdir()} == before


def test_a_frame_of_another_size_in_the_folder_is_named(tmp_path):
    """numpy's "operands could not be broadcast together with shapes (45,64) (43,64)" was the whole message."""
    frames = tmp_path / "frames"
    frames.mkdir()
    for i, (h, w) in enumerate(((16, 24), (16, 24), (20, 30))):
        cv2.imwrite(str(frames / f"{i:06d}.png"), np.full((h, w, 3), 40 * i, np.uint8))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(VideoError, match=r"000002.png is 30x20, the folder's first frame 000000.png 24x16: the "
                                         r"frames of a folder must have one size"):
        interpolate_frames(frames, str(out / "%04d.png"), Fraction(10), Blend(), VideoOptions(), progress=False)


def test_an_image_pattern_without_one_number_field_is_named(tmp_path):
    """--out DIR/%d%d.png was a TypeError traceback; one giving every frame one name would overwrite them all."""
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in range(2):
        cv2.imwrite(str(frames / f"{i:06d}.png"), np.full((16, 24, 3), 40 * i, np.uint8))
    blend = Blend()
    for pattern, words in (("%d%d.png", "holds one number field"), ("100%.png", "holds one number field"),
                           ("x%%.png", "holds one number field"), ("%.0s.png", "every frame the same name")):
        with pytest.raises(VideoError, match=words):
            interpolate_frames(frames, str(tmp_path / pattern), Fraction(10), blend, VideoOptions(), progress=False)
    assert blend.calls == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["frames"]


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_outputs_get_the_permissions_the_umask_gives(tmp_path, mask):
    clip = _clip(tmp_path / "in.mp4", seconds=1)
    (tmp_path / "frames").mkdir()
    old = os.umask(mask)
    try:
        interpolate_video(clip, tmp_path / "out.mp4", Blend(), VideoOptions(), progress=False)
        interpolate_video(clip, tmp_path / "frames" / "%04d.png", Blend(), VideoOptions(), progress=False)
    finally:
        os.umask(old)
    assert (tmp_path / "out.mp4").stat().st_mode & 0o777 == 0o666 & ~mask
    assert {p.stat().st_mode & 0o777 for p in (tmp_path / "frames").glob("*.png")} == {0o666 & ~mask}


def test_a_read_only_output_folder_is_found_before_any_work(tmp_path, monkeypatch, capsys):
    clip = _clip(tmp_path / "in.mp4", seconds=1)
    folder = tmp_path / "ro"
    folder.mkdir()
    _read_only(monkeypatch, folder)
    blend = Blend()
    for out in (folder / "out.mp4", folder / "%04d.png"):
        with pytest.raises(OutputError, match=f"cannot write into {folder}: the file system is read-only -- "
                                              f"choose out in a folder on a writable disk$"):
            interpolate_video(clip, out, blend, VideoOptions(), progress=False)
    frames = tmp_path / "frames"
    frames.mkdir()
    cv2.imwrite(str(frames / "a.png"), np.zeros((16, 24, 3), np.uint8))
    cv2.imwrite(str(frames / "b.png"), np.zeros((16, 24, 3), np.uint8))
    with pytest.raises(OutputError, match="read-only"):
        interpolate_frames(frames, str(folder / "%04d.png"), Fraction(10), blend, VideoOptions(), progress=False)
    assert blend.calls == 0 and list(folder.iterdir()) == []
    # through the CLI: one line, exit 2
    code, _, err = _cli(["--video", clip, "--out", folder / "out.mp4"], capsys)
    assert code == 2 and err.startswith("error: cannot write into") and err.count("\n") == 1, err


def test_a_disk_without_room_for_the_job_is_found_on_its_first_frames(tmp_path, monkeypatch):
    """The room is measured on the first frames written (a guess before any work refused jobs that fit), and the
    job stops there with them kept."""
    clip = _clip(tmp_path / "in.mp4", seconds=2, size="320x240")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 70_000, 70_000))
    blend = Blend()
    with pytest.raises(OutputError, match=r"not enough space in .*: the 12 frames written took [\d.]+ KB each, so "
                                          r"the rest of the job needs about [\d.]+ KB and 70.0 KB is free"):
        interpolate_video(clip, tmp_path / "out.mp4", blend, VideoOptions(segment_seconds=0.5), progress=False)
    # 6 pairs fill the first segment; it closes behind the writing (F84), so the failure stops the job by the
    # second segment's close at the latest (6 pairs more), with the pairs written behind (WRITE_DEPTH frames) and
    # the one in hand; the second segment is not kept
    assert 6 <= blend.calls <= 2 * 6 + WRITE_DEPTH // 2 + 1, blend.calls
    assert len(list((tmp_path / "out.mp4.work").glob("seg_*-*.mp4"))) == 1


def test_the_encoder_stops_the_job_at_once_when_the_disk_is_full(tmp_path):
    """ffmpeg, unable to write, went on reading frames to the end of the segment; the error named no cause."""
    (tmp_path / "x.mp4").symlink_to("/dev/full")  # every write there fails with ENOSPC
    writer = FrameWriter(tmp_path / "x.mp4", 256, 192, Fraction(25))
    noise = np.random.default_rng(0).integers(0, 256, (192, 256, 3), np.uint8)
    written = 0
    with pytest.raises(OutputError, match="no space left on the disk -- free some space"):
        for _ in range(200):
            writer.write(noise)
            written += 1
            time.sleep(0.02)
        writer.close()
    assert written < 100


def test_a_full_disk_mid_job_stops_it_keeping_the_finished_segments(tmp_path, monkeypatch, capsys):
    clip = _clip(tmp_path / "in.mp4", seconds=4)
    out = tmp_path / "out.mp4"
    opened = []

    def writer(path, *args, **kwargs):
        opened.append(blend.calls)
        if len(opened) == 2:  # the second segment's file fills the disk
            Path(path).symlink_to("/dev/full")
        return FrameWriter(path, *args, **kwargs)

    monkeypatch.setattr(pv, "FrameWriter", writer)
    blend = Blend(wait=0.1)
    options = VideoOptions(segment_seconds=2)  # 48 output frames a segment, 24 interpolations
    with pytest.raises(OutputError) as info:
        interpolate_video(clip, out, blend, options, progress=False)
    message = str(info.value)
    assert "no space left on the disk" in message and message.endswith("the finished segments are kept"), message
    assert "audio" not in message
    assert blend.calls - opened[1] < 20  # stopped well before the segment's end
    assert not out.exists() and len(list((tmp_path / "out.mp4.work").glob("seg_*-*.mp4"))) == 1
    # the unfinished segment is gone: on a full disk it held the room the rerun needs (the rerun's room check
    # comes before the work folder is tidied)
    assert not [p for p in (tmp_path / "out.mp4.work").iterdir() if ".part" in p.name]
    monkeypatch.undo()
    stats = interpolate_video(clip, out, Blend(), options, progress=False)
    assert stats["resumed_segments"] == 1 and probe(out).frames == 96


def test_a_full_disk_at_the_join_says_so_and_no_audio_advice(tmp_path, monkeypatch):
    """A clip without audio once failed at the join with "the source's audio may not fit this container"."""
    clip = _clip(tmp_path / "in.mp4")
    out = tmp_path / "out.mp4"
    real = pv.concat_and_mux

    def full(parts, source, tmp, *args, **kwargs):
        Path(tmp).symlink_to("/dev/full")
        return real(parts, source, tmp, *args, **kwargs)

    monkeypatch.setattr(pv, "concat_and_mux", full)
    with pytest.raises(OutputError) as info:
        interpolate_video(clip, out, Blend(), VideoOptions(), progress=False)
    assert str(info.value) == (f"cannot write {out}: no space left on the disk -- free some space there or choose "
                               f"out on another disk; rerun the same command to resume: the encoded segments "
                               f"are kept")
    assert not out.exists() and list((tmp_path / "out.mp4.work").glob("seg_*-*.mp4"))
    monkeypatch.undo()
    blend = Blend()
    interpolate_video(clip, out, blend, VideoOptions(), progress=False)
    assert blend.calls == 0 and probe(out).frames == 48  # all resumed


def test_the_work_folder_removed_mid_run_is_one_line(tmp_path, capsys):
    clip = _clip(tmp_path / "in.mp4")
    work = tmp_path / "out.mp4.work"
    blend = Blend(on_call=lambda n: shutil.rmtree(work) if n == 3 else None)
    with pytest.raises(OutputError, match="^the work folder .* was removed during the run -- rerun the same command"):
        interpolate_video(clip, tmp_path / "out.mp4", blend, VideoOptions(), progress=False)
    assert not (tmp_path / "out.mp4").exists()


def test_a_full_disk_writing_frames_keeps_those_written(tmp_path, monkeypatch):
    clip = _clip(tmp_path / "in.mp4", seconds=1)
    folder = tmp_path / "frames"
    folder.mkdir()
    real = os.write

    def write(fd, data):
        if len(list(folder.glob("*.png"))) >= 5:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
    with pytest.raises(OutputError, match=r"no space left.*resume: the (\d+) images written are kept$") as failed:
        interpolate_video(clip, folder / "%04d.png", Blend(), VideoOptions(), progress=False)
    monkeypatch.undo()
    # the image threads (IMAGE_THREADS) write side by side: each that passed the test above before the fifth file
    # existed wrote its image whole; nothing half-written is left, and the message counts what is there
    kept = sorted(p.name for p in folder.glob("*.png"))
    told = int(re.search(r"the (\d+) images written", str(failed.value)).group(1))
    # rebuilt with the resume's words, the error still names its field: the command line says --out, not out
    assert "choose --out on another disk" in failed.value.said_as(lambda field: "--" + field)
    assert 5 <= told <= len(kept) < 5 + IMAGE_THREADS
    assert all(cv2.imread(str(folder / name)) is not None for name in kept)
    blend = Blend()
    interpolate_video(clip, folder / "%04d.png", blend, VideoOptions(), progress=False)
    assert len(list(folder.glob("*.png"))) == 24 and blend.calls <= 11 - 2  # pairs 0 and 1 were done


def test_segments_hold_about_a_minute_of_work_so_an_interrupt_loses_little(tmp_path):
    """A segment was 10 s of video whatever the device: 500 frames, a quarter of an hour on a 2-core CPU, all lost
    to a Ctrl-C in the first segment. Now a segment holds at most segment_work_seconds (60 s) of work, as the
    device type and the frame size say (pipeline.video.segment_frames), not as a clock measures it."""
    clip = _clip(tmp_path / "in.mp4", seconds=3)
    out = tmp_path / "out.mp4"
    options = VideoOptions(segment_work_seconds=0.28)  # a minute in small: segments of 5 pairs here
    assert options.segment_seconds == 10  # longer than the clip: before, one segment held it all
    assert pv.segment_frames(Fraction(24), 96, 64, options, pv.device_type(Blend())) == 10
    with pytest.raises(KeyboardInterrupt):
        interpolate_video(clip, out, Blend(fail_at=25), options, progress=False)
    segments = sorted((tmp_path / "out.mp4.work").glob("seg_*-*.mp4"))
    kept = sum(int(p.stem.split("-")[1]) - int(p.stem.split("_")[1].split("-")[0]) for p in segments)
    assert len(segments) >= 3 and kept >= 2 * 24 - 10  # at most a segment's work (5 pairs) lost
    blend = Blend()
    stats = interpolate_video(clip, out, blend, options, progress=False)
    assert stats["resumed_segments"] == len(segments) and blend.calls <= 35 - kept // 2 + 1
    dst = probe(out)
    assert dst.frames == 72 and dst.rate == 24 and not dst.variable_rate


def test_the_samples_jump_back_is_a_cut(tmp_path):
    """videos/sample.mp4 plays its 12 frames twice; x2 interpolated across the jump (output frame 23 was a ghost of
    both) and reported cuts 0: the change there (0.073) is 4x the motion around it but below the threshold."""
    stats = interpolate_video(ROOT / "videos" / "sample.mp4", tmp_path / "x2.mp4", Blend(), VideoOptions(factor=2),
                              progress=False)
    assert stats["cuts"] == 1
    src = [f.astype(np.float32) for f in read_frames(probe(ROOT / "videos" / "sample.mp4"))]
    mid = next(f for j, f in enumerate(read_frames(probe(tmp_path / "x2.mp4"))) if j == 23).astype(np.float32)
    assert min(np.abs(mid - src[11]).mean(), np.abs(mid - src[12]).mean()) < 3.0


def test_cut_rule():
    steady = [0.017, 0.018, 0.017, 0.016]
    assert is_cut(steady, 0.073, 0.018, 0.12)  # a spike within a scene
    assert is_cut([], 0.073, 0.018, 0.12) and is_cut(steady, 0.073, None, 0.12)  # at either end
    assert not is_cut(steady, 0.073, 0.07, 0.12)  # motion speeding up and staying fast: no cut
    assert not is_cut(steady, 0.03, 0.017, 0.12)  # too small to matter
    assert not is_cut([], 0.1, None, 0.12) and is_cut([], 0.2, None, 0.12)
    assert not is_cut(steady, 0.5, 0.01, 0)  # threshold 0: off


def test_the_encoder_stops_when_its_folder_fills_between_ffmpegs_writes(tmp_path, monkeypatch):
    """ffmpeg writes in 32 KB blocks: a disk that fills between two of them showed only at the segment's end."""
    writer = FrameWriter(tmp_path / "x.mp4", 96, 64, Fraction(25))
    frame = np.zeros((64, 96, 3), np.uint8)
    for _ in range(3):
        writer.write(frame)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 1000, 1000))
    time.sleep(1.1)  # the free space is looked at once a second
    with pytest.raises(OutputError, match=r"x\.mp4: no space left on the disk"):
        writer.write(frame)
    writer.abort()


@pytest.mark.skipif(not Path("/sys/kernel").is_dir(), reason="needs Linux's /sys, where even root may not create files")
def test_a_folder_refusing_files_is_named_not_the_audio(tmp_path):
    """The audio check's scratch file failed in such a folder with "the source's audio does not fit .mp4"."""
    from softsplat_vfi.media.video import check_audio_fits

    clip = _clip(tmp_path / "in.mp4", seconds=1, audio=True)
    with pytest.raises(OutputError, match="^cannot write into /sys: permission denied -- choose out in a folder "
                                          "you may write to"):
        check_audio_fits(clip, Path("/sys/out.mp4"))
    blend = Blend()
    with pytest.raises(OutputError, match="^cannot write into /sys: permission denied"):
        interpolate_video(clip, Path("/sys/out.mp4"), blend, VideoOptions(), progress=False)
    assert blend.calls == 0


def test_the_image_folder_removed_mid_run_is_one_line(tmp_path):
    clip = _clip(tmp_path / "in.mp4", seconds=1)
    folder = tmp_path / "frames"
    folder.mkdir()
    def remove(n):
        if n != 3:
            return
        # the image threads first finish what they were handed (this thread hands them nothing meanwhile): a
        # folder removed under a write in progress fails that write before the folder is gone
        seen = None
        while (names := sorted(p.name for p in folder.iterdir())) != seen:
            seen = names
            time.sleep(0.2)
        shutil.rmtree(folder)

    blend = Blend(on_call=remove)
    with pytest.raises(OutputError, match="^the output folder .*frames was removed during the run -- create it again"):
        interpolate_video(clip, folder / "%04d.png", blend, VideoOptions(), progress=False)
