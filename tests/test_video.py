"""Videos and frame folders through the pipeline (pipeline.video) on small generated clips (CPU).

Containers, audio, metadata and timing go through the pipeline with the stand-in interpolator (conftest's
``blend_interpolator``), where the network is not the point; the network runs where it is (a moving square, the
two-process split), and run.py where the command line itself is tested (its errors, notes and warnings)."""

import dataclasses
import logging
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import List, Tuple

import cv2
import numpy as np
import pytest

import run
from softsplat_vfi.media.video import (NO_COLOR_TAGS, VideoError, audio_args, default_codec, ffmpeg_exe, probe,
                                       read_frames, rescale_timecode, snap_to_grid)
from softsplat_vfi.pipeline.schedule import make_plan, parse_rate, planned_sources
from softsplat_vfi.pipeline.video import VideoOptions, interpolate_frames, interpolate_video
from tests.training_fixtures import free_port


def _make_clip(path: Path, size="96x64", rate="12", seconds=2, audio=True, source="testsrc2", frames=None):
    w, h = (int(v) for v in size.split("x"))
    odd = w % 2 or h % 2
    args = [ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
            f"{source}=size={w + w % 2}x{h + h % 2}:rate={rate}"]
    if audio:
        args += ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"]
    if odd:  # lavfi sources round sizes to even: crop to the odd size
        args += ["-vf", f"format=yuv444p,crop={w}:{h}:0:0"]
    args += ["-frames:v", str(frames)] if frames else ["-t", str(seconds)]
    args += ["-c:v", "libx264", "-pix_fmt", "yuv444p" if odd else "yuv420p"]
    if audio:
        args += ["-c:a", "aac", "-shortest"]
    subprocess.run(args + [str(path)], check=True)
    return path


def _packets(path: Path, stream: str) -> Tuple[Fraction, List[List[str]]]:
    """A stream's time base and its packets' framemd5 rows (stream, dts, pts, duration, size, hash)."""
    out = subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-i", str(path), "-map", stream,
                          "-c", "copy", "-f", "framemd5", "-"], capture_output=True, check=True).stdout.decode()
    time_base = Fraction(next(line for line in out.splitlines() if line.startswith("#tb")).split(":", 1)[1].strip())
    return time_base, [[v.strip() for v in line.split(",")] for line in out.splitlines()
                       if line and not line.startswith("#")]


def _audio_md5(path: Path) -> list:
    return [row[-1] for row in _packets(path, "0:a")[1]]


def _cli(args, capsys):
    code = run.main([str(a) for a in args] + ["--device", "cpu"])
    out, err = capsys.readouterr()
    return code, out, err


def _video(source: Path, out: Path, interpolator, **options) -> dict:
    """What run.py --video does once its arguments are parsed: the pipeline, with the encoder run.py picks for
    ``out`` unless ``options`` names one. Returns the job's counts and notes (run.py prints them as its summary)."""
    options.setdefault("codec", default_codec(Path(out)))
    return interpolate_video(source, out, interpolator, VideoOptions(**options), progress=False)


def test_rate_parsing_and_plans():
    assert parse_rate("59.94") == Fraction(60000, 1001)
    assert parse_rate("23.976") == Fraction(24000, 1001)
    assert parse_rate("60000/1001") == Fraction(60000, 1001)
    with pytest.raises(ValueError):
        parse_rate("fast")
    plan = make_plan(240 / Fraction(24000, 1001), Fraction(24000, 1001), fps=Fraction(60000, 1001))  # 240 frames
    assert plan.count == 600 and plan.rate_out == Fraction(60000, 1001)
    slow = make_plan(Fraction(2), Fraction(12), factor=4, slowmo=True)
    assert slow.rate_out == 12 and slow.count == 96 and slow.slowdown == 4
    assert make_plan(Fraction(2), Fraction(12), slowmo=True).slowdown == 2  # the default factor
    assert plan.slowdown == 1
    # 2.5x conversion: every output frame maps to the right pair and t
    anchors = [Fraction(i, 24) for i in range(5)]
    sources = planned_sources(anchors, [False] * 4, make_plan(Fraction(5, 24), Fraction(24), fps=Fraction(60)))
    assert [round(s.t, 3) for _, _, s in sources if s.kind == "interpolate"] == [0.4, 0.8, 0.2, 0.6, 0.4, 0.8, 0.2, 0.6]


def test_factor_two_keeps_duration_and_copies_audio(tmp_path, blend_interpolator):
    clip = _make_clip(tmp_path / "in.mp4")
    out = tmp_path / "out.mp4"
    stats = _video(clip, out, blend_interpolator)
    src, dst = probe(clip), probe(out)
    assert dst.frames == 2 * src.frames
    assert dst.rate == 2 * src.rate
    assert abs(dst.duration - src.duration) <= 1 / dst.rate
    assert dst.has_audio and _audio_md5(out) == _audio_md5(clip)
    assert not (tmp_path / "out.mp4.work").exists()
    assert stats["audio"] == "copied" and stats["interpolated"] == src.frames - 1
    assert blend_interpolator.calls == [((64, 96, 3), (0.5,))] * (src.frames - 1)


def test_ntsc_rate_conversion(tmp_path, blend_interpolator):
    clip = _make_clip(tmp_path / "in.mp4", rate="24000/1001", seconds=1, audio=False)
    out = tmp_path / "out.mkv"
    _video(clip, out, blend_interpolator, fps=parse_rate("59.94"), preset="veryfast")
    assert b"rc_lookahead=10 " in out.read_bytes()  # x264 records its settings: veryfast looks 10 frames ahead
    src, dst = probe(clip), probe(out)
    assert dst.rate == Fraction(60000, 1001)
    assert abs(dst.frames - round(src.duration * Fraction(60000, 1001))) <= 1


def test_the_frames_times_sit_exactly_on_the_output_grid_across_segments(tmp_path, blend_interpolator):
    """At --fps 60, 4 of 119 frame gaps were 251 ticks (of 1/15360 s) instead of 256: the join started each segment
    where the last one's length, in milliseconds, ended (11 frames, 183.33 ms, stored as 183)."""
    clip = _make_clip(tmp_path / "in.mp4", seconds=2)
    out = tmp_path / "out.mp4"
    _video(clip, out, blend_interpolator, fps=Fraction(60), segment_seconds=11 / 60)  # segments of 11 frames
    time_base, rows = _packets(out, "0:v")
    ticks = sorted(int(row[2]) for row in rows)
    assert time_base == Fraction(1, 15360) and len(ticks) == 120
    assert {b - a for a, b in zip(ticks, ticks[1:])} == {256}
    assert probe(out).pts == [Fraction(j, 60) for j in range(120)]


def test_scene_cut_is_not_interpolated(tmp_path, blend_interpolator):
    a = _make_clip(tmp_path / "a.mp4", seconds=1, audio=False, source="testsrc2")
    b = _make_clip(tmp_path / "b.mp4", seconds=1, audio=False, source="mandelbrot")
    listing = tmp_path / "list.txt"
    listing.write_text(f"file '{a}'\nfile '{b}'\n")
    clip = tmp_path / "cut.mp4"
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "concat", "-safe", "0", "-i", str(listing),
                    "-c", "copy", str(clip)], check=True)
    out = tmp_path / "out.mp4"
    assert _video(clip, out, blend_interpolator)["cuts"] == 1
    src = [f.astype(np.float32) for f in read_frames(probe(clip))]
    dst = [f.astype(np.float32) for f in read_frames(probe(out))]
    # the output frame half-way across the cut (between input 11 and 12) is one of them, not a blend (which is what
    # the stand-in interpolator would have made)
    mid = dst[23]
    assert min(np.abs(mid - src[11]).mean(), np.abs(mid - src[12]).mean()) < 6.0
    assert np.abs(mid - (src[11] + src[12]) / 2).mean() > 10.0


def test_odd_size_one_frame_and_slowmo(tmp_path, blend_interpolator):
    clip = _make_clip(tmp_path / "odd.mp4", size="97x61", seconds=1, audio=True)
    out = tmp_path / "slow.mp4"
    stats = _video(clip, out, blend_interpolator, slowmo=True, factor=3)
    src, dst = probe(clip), probe(out)
    assert (dst.width, dst.height) == (97, 61)
    assert dst.rate == src.rate and dst.frames == 3 * src.frames
    assert not dst.has_audio and stats["audio"].startswith("dropped (slow motion)")
    assert {shape for shape, _ in blend_interpolator.calls} == {(61, 97, 3)}
    one = _make_clip(tmp_path / "one.mp4", frames=1, audio=False)
    assert probe(one).frames == 1
    _video(one, tmp_path / "one_out.mp4", blend_interpolator)
    assert probe(tmp_path / "one_out.mp4").frames == 2


def test_bad_video_inputs(tmp_path, capsys):
    corrupt = tmp_path / "bad.mp4"
    corrupt.write_bytes(b"\x00\x00\x00\x18ftypmp42 garbage")
    audio_only = tmp_path / "audio.m4a"
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440", "-t", "1",
                    str(audio_only)], check=True)
    clip = _make_clip(tmp_path / "in.mp4", seconds=1, audio=False)
    zero = tmp_path / "zero.mp4"  # ffmpeg asked for 0 frames writes a file without a video stream
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=25",
                    "-frames:v", "0", "-c:v", "libx264", str(zero)], check=True)
    truncated = tmp_path / "truncated.mp4"  # a copy cut short, as a download that stopped
    truncated.write_bytes(clip.read_bytes()[: clip.stat().st_size // 2])
    text = tmp_path / "notes.mp4"  # not a video at all: ffmpeg says "moov atom not found" for it too
    text.write_text("not a video\n")
    frames = tmp_path / "frames"
    frames.mkdir()
    for name in ("1.png", "2.png"):
        cv2.imwrite(str(frames / name), np.zeros((16, 24, 3), np.uint8))
    cases = [
        (["--video", tmp_path / "missing.mp4", "--out", tmp_path / "o.mp4"], "no such file"),
        (["--video", corrupt, "--out", tmp_path / "o.mp4"], "cut short"),  # its ftyp box says 24 bytes, has 20
        (["--video", text, "--out", tmp_path / "o.mp4"], "corrupt or not a video"),
        (["--video", zero, "--out", tmp_path / "o.mp4"], "no video stream"),
        (["--video", truncated, "--out", tmp_path / "o.mp4"], "the file is cut short"),
        (["--video", audio_only, "--out", tmp_path / "o.mp4"], "no video stream found (audio only)"),
        (["--video", clip, "--out", clip], "never modified"),
        (["--video", clip, "--out", tmp_path / "o.xyz"], "unsupported output extension"),
        (["--video", clip, "--out", tmp_path / "o.avi"], "unsupported output extension"),
        (["--video", clip, "--out", tmp_path / "nodir" / "o.mp4"], "does not exist"),
        (["--video", clip, "--out", tmp_path / "o.mp4", "--fps", "abc"], "not a frame rate"),
        # folder and file mixed up, and standard output from a file: the cause, not "no such file" (or folder) or
        # "unsupported output extension ''"
        (["--video", tmp_path, "--out", tmp_path / "o.mp4"], f"--video {tmp_path} is a folder, not a video file: "
                                                             f"read a folder of frames with --frames {tmp_path}"),
        (["--frames", clip, "--out", tmp_path / "%06d.png"], f"--frames {clip} is a file, not a folder of frames: "
                                                             f"read a video with --video {clip}"),
        (["--video", clip, "--out", "-"], "--out - writes a YUV4MPEG2 stream, made from one on standard input "
                                          "(--video -): name an output file such as out.mp4, or pipe the video"),
        # an image format nothing writes: said once the network had loaded, before
        (["--video", clip, "--out", tmp_path / "%06d.jpx"], "000000.jpx: unsupported output extension '.jpx'"),
        (["--frames", frames, "--out", tmp_path / "%06d.jpx"], "000000.jpx: unsupported output extension '.jpx'"),
    ]
    for args, message in cases:
        code, _, err = _cli(args, capsys)
        assert code == 2, args
        assert err.startswith("error: ") and message in err and "Traceback" not in err, err
        assert err.count("\n") == 1 and "loading" not in err, err
    assert not (tmp_path / "o.mp4").exists()


def _refused_in_a_process(args, cwd, timeout=30):
    """run.py ARGS (--device cpu) in a process of its own: its stderr, once it exited 2 with one line and without
    importing torch (the network never loaded)."""
    script = ("import sys, run\n"
              "code = run.main(sys.argv[1:])\n"
              "print(code, 'torch' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script, *map(str, args), "--device", "cpu"],
                          cwd=Path(run.__file__).parent, capture_output=True, text=True, timeout=timeout)
    assert done.stdout.split() == ["2", "False"], (args, done.stdout, done.stderr)
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def test_mistyped_paths_are_said_before_the_network_loads(tmp_path):
    """run.py built the interpolator (torch and the network: about 3 s on the CPU machine) before the pipeline
    looked at --video or --frames, so a mistyped path took seconds to report."""
    cases = [["--video", str(tmp_path / "missing.mp4"), "--out", str(tmp_path / "o.mp4")],
             ["--video", str(tmp_path / "missing.mp4"), "--out", str(tmp_path / "no" / "o.mp4")],
             ["--frames", str(tmp_path / "missing"), "--out", str(tmp_path / "%06d.png")]]
    for args in cases:
        said = _refused_in_a_process(args, tmp_path)
        assert "no such" in said or "does not exist" in said, said


@pytest.mark.parametrize("source, flags, words", [
    ("video", ["--factor", "1000000000"], "--factor 1000000000: at most 1000 output frames per input frame -- use a "
                                          "--factor of 1000 or less"),
    ("video", ["--factor", "1000000000", "--slowmo"], "--factor 1000000000: at most 1000 output frames"),
    ("video", ["--fps", "1e12"], "more than 1000 -- use an --fps of at most 12000"),
    ("frames", ["--factor", "5000"], "--factor 5000: at most 1000 output frames per input frame"),
    ("frames", ["--input-fps", "1", "--fps", "2000"], "use an --fps of at most 1000"),
])
def test_a_runaway_factor_or_rate_is_refused_at_once(tmp_path, source, flags, words):
    """--factor 1000000000 on a 0.5 s clip grew to 5 GB over minutes (a byte per output frame, and every frame of a
    pair listed before it is interpolated) after loading the network: now refused in one line before it loads."""
    if source == "video":
        args = ["--video", _make_clip(tmp_path / "in.mp4", seconds=0.5, audio=False), "--out", tmp_path / "o.mp4"]
    else:
        (tmp_path / "frames").mkdir()
        for name in ("1.png", "2.png"):
            cv2.imwrite(str(tmp_path / "frames" / name), np.zeros((16, 24, 3), np.uint8))
        args = ["--frames", tmp_path / "frames", "--out", tmp_path / "out" / "%06d.png"]
    assert words in _refused_in_a_process(args + flags, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [Path(args[1]).name]  # no output, no work folder


def test_a_plan_beyond_one_jobs_frames_is_refused():
    """The frames of a whole job are bounded too: a video job keeps a byte per output frame, an image job a path."""
    from softsplat_vfi.pipeline.schedule import MAX_IMAGES, MAX_VIDEO_FRAMES

    day = Fraction(24 * 3600)
    assert make_plan(day, Fraction(50), factor=2, most=MAX_VIDEO_FRAMES).count == 8_640_000
    with pytest.raises(ValueError, match=r"^--factor 4: the output would hold 17280000 frames, more than the "
                                         r"10000000 one job makes -- use a smaller --factor, or split the input"):
        make_plan(day, Fraction(50), factor=4, most=MAX_VIDEO_FRAMES)
    with pytest.raises(ValueError, match=r"^--fps 30: the output would hold 2592000 frames, more than the 1000000"):
        make_plan(day, Fraction(25), fps=Fraction(30), most=MAX_IMAGES)
    assert make_plan(day, Fraction(25), fps=Fraction(30)).count == 2_592_000  # a stream's plan: no bound


def test_mp4_cut_short_reads_the_top_level_boxes(tmp_path):
    from softsplat_vfi.media.video import _mp4_cut_short

    clip = _make_clip(tmp_path / "in.mp4", seconds=1, audio=False)
    whole = clip.read_bytes()
    assert not _mp4_cut_short(clip)
    cases = {"half": (whole[: len(whole) // 2], True),
             "header cut": (whole + b"\x00\x00\x01", True),  # a last box's header begun, not finished
             "not mp4": (whole[:4] + b"skip" + whole[8:len(whole) // 2], False),  # no ftyp first: not an MP4
             # a 64-bit box size (size field 1) that runs past the end
             "large box": (whole[:32] + (1).to_bytes(4, "big") + b"mdat" + (10 ** 6).to_bytes(8, "big"), True),
             "to the end": (whole[:32] + (0).to_bytes(4, "big") + b"mdat" + b"\x00" * 64, False)}
    for name, (data, cut) in cases.items():
        path = tmp_path / f"{name}.mp4"
        path.write_bytes(data)
        assert _mp4_cut_short(path) is cut, name


def test_interrupted_job_resumes_without_redoing_segments(tmp_path):
    clip = _make_clip(tmp_path / "in.mp4", seconds=2, audio=True)
    out = tmp_path / "out.mp4"
    options = VideoOptions(factor=2, segment_seconds=0.5)
    calls = []

    def crashing(one, two, times):
        calls.append(len(times))
        if len(calls) == 8:
            raise KeyboardInterrupt
        return [(1 - t) * one + t * two for t in times]

    before = clip.read_bytes()
    with pytest.raises(KeyboardInterrupt):
        interpolate_video(clip, out, crashing, options, progress=False)
    assert not out.exists()
    finished = sorted((tmp_path / "out.mp4.work").glob("seg_*[0-9].mp4"))
    assert len(finished) >= 1
    stats = interpolate_video(clip, out, lambda a, b, ts: [(1 - t) * a + t * b for t in ts], options, progress=False)
    assert stats["resumed_segments"] == len(finished)
    # 24 frames at x2 make 23 interpolations in all; a finished 0.5 s segment holds 6 of them
    assert stats["interpolated"] <= 23 - 6 * len(finished)
    assert probe(out).frames == 48 and _audio_md5(out) == _audio_md5(clip)
    assert clip.read_bytes() == before  # the input is never modified


def test_frame_folder_in_and_out(tmp_path, blend_interpolator):
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in range(4):
        img = np.zeros((40, 60, 3), np.uint8)
        cv2.circle(img, (10 + 10 * i, 20), 6, (255, 255, 255), -1)
        cv2.imwrite(str(frames / f"{i:04d}.png"), img)
    outdir = tmp_path / "out"
    outdir.mkdir()
    options = VideoOptions(factor=3)
    stats = interpolate_frames(frames, str(outdir / "%06d.png"), Fraction(10), blend_interpolator, options,
                               progress=False)
    assert stats["frames_out"] == 12 and stats["interpolated"] == 6
    assert len(list(outdir.glob("*.png"))) == 12
    first = (outdir / "000001.png").read_bytes()
    # rerun: existing frames are kept, only the missing one is redone
    (outdir / "000001.png").unlink()
    again = interpolate_frames(frames, str(outdir / "%06d.png"), Fraction(10), blend_interpolator, options,
                               progress=False)
    assert again["interpolated"] == 1 and blend_interpolator.calls[-1][1] == (1 / 3,)
    assert len(list(outdir.glob("*.png"))) == 12 and (outdir / "000001.png").read_bytes() == first


@pytest.mark.parametrize("depth", [8, 16])
def test_frame_folder_keeps_alpha(tmp_path, capsys, depth):
    """Transparent frame sequences (renders, keyed footage) keep their alpha: exact on the original frames, mixed
    linearly in time on the interpolated ones (the colour goes through the interpolator); images without alpha
    in such a sequence count as opaque; a format without alpha says it dropped it."""
    dtype, top = (np.uint8, 255) if depth == 8 else (np.uint16, 65535)
    frames = tmp_path / "frames"
    frames.mkdir()
    rng = np.random.default_rng(0)
    alphas = []
    for i in range(3):
        bgra = rng.integers(0, top + 1, (24, 32, 4)).astype(dtype)
        if i == 2:
            cv2.imwrite(str(frames / f"{i:04d}.png"), np.ascontiguousarray(bgra[:, :, :3]))  # no alpha: opaque
            alphas.append(np.full((24, 32), top, dtype))
        else:
            cv2.imwrite(str(frames / f"{i:04d}.png"), bgra)
            alphas.append(bgra[:, :, 3])
    seen = []

    def blend(one, two, times):  # stands in for the network: records what it was given
        seen.append(one.shape)
        return [((1 - t) * one.astype(np.float64) + t * two.astype(np.float64)) for t in times]

    out = tmp_path / "out"
    out.mkdir()
    options = VideoOptions(factor=2, scene_threshold=0)
    stats = interpolate_frames(frames, str(out / "%04d.png"), Fraction(10), blend, options, progress=False)
    assert stats["frames_out"] == 6 and stats["alpha"].startswith("kept")
    assert seen and all(shape == (24, 32, 3) for shape in seen)
    written = [cv2.imread(str(out / f"{j:04d}.png"), cv2.IMREAD_UNCHANGED) for j in range(6)]
    assert all(w.shape == (24, 32, 4) and w.dtype == dtype for w in written)
    for i in range(3):
        np.testing.assert_array_equal(written[2 * i][:, :, 3], alphas[i])
    for i in range(2):  # t = 0.5 between originals i and i + 1
        mixed = np.rint((alphas[i].astype(np.float64) + alphas[i + 1]) / 2)
        assert np.abs(written[2 * i + 1][:, :, 3].astype(np.float64) - mixed).max() <= 1
    jpg = tmp_path / "jpg"
    jpg.mkdir()
    stats = interpolate_frames(frames, str(jpg / "%04d.jpg"), Fraction(10), blend, options, progress=False)
    assert stats["alpha"].startswith("dropped") and ".png" in stats["alpha"]
    assert cv2.imread(str(jpg / "0000.jpg"), cv2.IMREAD_UNCHANGED).shape == (24, 32, 3)


@pytest.mark.slow
def test_two_processes_split_a_video_seamlessly(tmp_path, cpu_interpolator, capsys):
    """torchrun with two processes: each encodes half the segments, rank 0 joins them (the same frames as one
    process makes with the same weights, to float rounding: compared as images, since x264 can turn one rounding
    step into a visible drift across a group of pictures). One second in four segments; the one-process runs are
    made in this process (run.main, as run.py runs it): only the split runs need processes of their own."""
    import sys

    root = Path(__file__).resolve().parent.parent
    clip = _make_clip(tmp_path / "in.mp4", seconds=1, audio=True)
    single, split = tmp_path / "single.mp4", tmp_path / "split.mp4"
    common = ["--video", str(clip), "--device", "cpu", "--segment-seconds", "0.25"]
    _video(clip, single, cpu_interpolator, segment_seconds=0.25)
    split_command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port"]
    proc = subprocess.run([*split_command, str(free_port()), str(root / "run.py"), *common, "--out", str(split)],
                          capture_output=True, text=True, cwd=root, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    a, b = probe(single), probe(split)
    assert b.frames == a.frames == 24 and b.pts == a.pts
    assert _audio_md5(split) == _audio_md5(clip)
    pictures = {}
    for name in ("single", "split"):
        folder = tmp_path / name
        folder.mkdir()
        if name == "single":
            code, _, err = _cli(["--video", clip, "--segment-seconds", "0.25", "--out", folder / "%04d.png"], capsys)
            assert code == 0, err[-2000:]
        else:
            proc = subprocess.run([*split_command, str(free_port()), str(root / "run.py"), *common, "--out",
                                   str(folder / "%04d.png")], capture_output=True, text=True, cwd=root, timeout=600)
            assert proc.returncode == 0, proc.stderr[-2000:]
        pictures[name] = [cv2.imread(str(f)).astype(np.int16) for f in sorted(folder.glob("*.png"))]
    assert len(pictures["single"]) == len(pictures["split"]) == 24
    assert max(int(np.abs(x - y).max()) for x, y in zip(pictures["single"], pictures["split"])) <= 1


def test_variable_frame_rate_input_follows_timestamps(tmp_path, blend_interpolator):
    """6 frames at 12 fps then 12 at 24 fps: a 24 fps output interpolates only the slow part."""
    clip = tmp_path / "vfr.mp4"
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=96x64:rate=24",
                    "-frames:v", "18", "-vf", "setpts='if(lt(N,6),N*2,12+(N-6))/24/TB'", "-fps_mode", "vfr",
                    "-c:v", "libx264", "-pix_fmt", "yuv420p", str(clip)], check=True)
    info = probe(clip)
    # (on the 24 fps grid: read as 24 fps with the slow part's 6 in-between frames missing)
    assert info.rate == 24 and info.missing == 6 and info.pts[6] == Fraction(1, 2)
    out = tmp_path / "cfr.mp4"
    assert _video(clip, out, blend_interpolator, fps=Fraction(24))["interpolated"] == 6
    dst = probe(out)
    assert dst.rate == 24 and not dst.variable_rate
    assert abs(dst.duration - Fraction(1)) <= Fraction(1, 24)


def _clip_with_gaps(path: Path, rate: int, drop=(3, 6)) -> Path:
    """1 s at ``rate`` with the frames ``drop`` cut out and the others at their times (as a cut with -c copy
    or a damaged file leaves them)."""
    keep = "*".join(f"not(eq(n\\,{n}))" for n in drop)
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi", "-i", f"testsrc2=size=96x64:rate={rate}",
                    "-t", "1", "-vf", f"select='{keep}'", "-fps_mode", "passthrough", "-c:v", "libx264", "-pix_fmt",
                    "yuv420p", str(path)], check=True)
    return path


@pytest.mark.parametrize("kind, rate", [("gaps.mp4", 10), ("gaps.mkv", 12), ("truncated.mp4", 12)])
def test_a_clip_with_frames_missing_keeps_its_declared_rate(tmp_path, blend_interpolator, kind, rate):
    """10 and 12 fps clips with a few frames missing were read as variable-rate at their mean rate, so --factor 2
    gave 140/9, 18000/917 or 64/3 frames/s. Their frames sit on the declared rate's grid: the output is 20 or 24
    frames/s, the missing frames' times interpolated, and the summary says how many."""
    clip = tmp_path / kind
    if kind.startswith("gaps"):
        _clip_with_gaps(clip, rate)
    else:  # the index first (faststart), the file cut at 70%: the last B-frames' data are gone
        whole = _make_clip(tmp_path / "whole.mp4", size="320x240", rate=str(rate), seconds=3, audio=False)
        subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-i", str(whole), "-c", "copy", "-movflags",
                        "+faststart", str(tmp_path / "fast.mp4")], check=True)
        data = (tmp_path / "fast.mp4").read_bytes()
        clip.write_bytes(data[: len(data) * 7 // 10])
    info = probe(clip)
    assert info.rate == rate and not info.variable_rate and info.missing >= 1
    assert info.missing == (2 if kind.startswith("gaps") else info.missing)
    stats = _video(clip, tmp_path / "out.mp4", blend_interpolator)
    assert stats["rate_out"] == str(2 * rate) and stats["frames_out"] == 2 * (info.frames + info.missing)
    assert stats["filled"] == f"{info.missing} missing frames of the {rate} frames/s grid"
    out = probe(tmp_path / "out.mp4")
    assert out.rate == 2 * rate and not out.variable_rate and out.frames == stats["frames_out"]


def test_a_clip_with_real_jitter_keeps_its_mean_rate(tmp_path, blend_interpolator):
    """Frames off any grid (a phone's variable rate): read at their mean rate, as before."""
    clip = tmp_path / "jitter.mp4"
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=96x64:rate=20",
                    "-frames:v", "20", "-vf", "settb=1/1000,setpts='(N*50+mod(N*11\\,25))/1000/TB'", "-fps_mode",
                    "vfr", "-enc_time_base", "1/1000", "-c:v", "libx264", "-pix_fmt", "yuv420p", str(clip)],
                   check=True)
    info = probe(clip)
    assert info.variable_rate and info.missing == 0
    assert info.rate == (Fraction(info.frames - 1) / info.pts[-1]).limit_denominator(1001) != 20
    stats = _video(clip, tmp_path / "out.mp4", blend_interpolator)
    assert stats["rate_out"] == str(2 * info.rate) and "filled" not in stats


def test_dedup_interpolates_across_repeated_frames(tmp_path, blend_interpolator):
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in range(6):  # A A B B C C: each picture shown twice
        img = np.zeros((40, 60, 3), np.uint8)
        cv2.circle(img, (10 + 15 * (i // 2), 20), 6, (255, 255, 255), -1)
        cv2.imwrite(str(frames / f"{i:04d}.png"), img)
    for threshold, expected in ((0.0, 0), (0.002, 2)):  # 0.002: run.py's --dedup without a value
        outdir = tmp_path / f"out{threshold}"
        outdir.mkdir()
        stats = interpolate_frames(frames, str(outdir / "%03d.png"), Fraction(10), blend_interpolator,
                                   VideoOptions(factor=1, dedup_threshold=threshold), progress=False)
        assert stats["interpolated"] == expected, stats
        assert len(list(outdir.glob("*.png"))) == 6


def test_subtitles_are_kept_where_the_container_allows(tmp_path, blend_interpolator):
    clip = _make_clip(tmp_path / "in.mp4", seconds=1, audio=True)
    srt = tmp_path / "s.srt"
    srt.write_text("1\n00:00:00,000 --> 00:00:00,800\nhello\n")
    with_subs = tmp_path / "subs.mkv"
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-i", str(clip), "-i", str(srt), "-map", "0", "-map", "1",
                    "-c", "copy", str(with_subs)], check=True)
    assert probe(with_subs).has_subtitles
    _video(with_subs, tmp_path / "out.mkv", blend_interpolator)
    kept = probe(tmp_path / "out.mkv")
    assert kept.has_subtitles and kept.has_audio
    # mp4 cannot hold the srt stream as it is: video and audio are still written
    _video(with_subs, tmp_path / "out.mp4", blend_interpolator)
    assert probe(tmp_path / "out.mp4").has_audio


def test_ten_bit_video_stays_ten_bit(tmp_path, blend_interpolator):
    clip = tmp_path / "ten.mp4"
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=96x64:rate=12",
                    "-t", "1", "-c:v", "libx264", "-pix_fmt", "yuv420p10le", str(clip)], check=True)
    assert probe(clip).bit_depth == 10
    out = tmp_path / "out.mp4"
    _video(clip, out, blend_interpolator)
    info = probe(out)
    assert info.bit_depth == 10 and info.frames == 24
    assert blend_interpolator.calls  # the interpolator was handed 16-bit frames (it keeps their dtype)
    assert next(read_frames(info)).dtype == np.uint16


def test_audio_that_the_container_cannot_hold_is_refused_before_any_work(tmp_path, blend_interpolator):
    """WMA audio does not fit mp4: the run says to use .mkv before interpolating anything (until session 12 it
    failed only when muxing, at the end of the job), and mkv output keeps the audio as it is."""
    clip = tmp_path / "wma.mkv"
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=96x64:rate=12",
                    "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "1", "-c:v", "libx264",
                    "-pix_fmt", "yuv420p", "-c:a", "wmav2", str(clip)], check=True)
    with pytest.raises(VideoError) as info:
        _video(clip, tmp_path / "out.mp4", blend_interpolator)
    err = str(info.value)
    assert "does not fit .mp4: use .mkv" in err and "audio_codec=aac" in err, err
    assert "nothing was interpolated yet" in err and not blend_interpolator.calls, err
    assert not (tmp_path / "out.mp4").exists() and not (tmp_path / "out.mp4.work").exists()
    assert not list(tmp_path.glob(".audio-check-*"))
    assert _video(clip, tmp_path / "out.mkv", blend_interpolator)["audio"] == "copied"
    assert _audio_md5(tmp_path / "out.mkv") == _audio_md5(clip)


@pytest.mark.parametrize("out, flags, words", [
    ("o.webm", [], "error: the audio of {clip} does not fit .webm: use .mkv, which holds it, or --audio-codec libopus "
                   "to re-encode it (nothing was interpolated yet; ffmpeg: Only VP8 or VP9"),
    ("o.mp4", ["--codec", "prores_ks"], "error: .mp4 cannot hold prores_ks video"),
])
def test_container_rules_are_said_before_the_network_loads(tmp_path, capsys, out, flags, words):
    """AAC audio into .webm and ProRes into .mp4 were refused only once torch and the network had loaded (7-60 s),
    the audio with ffmpeg's raw text first."""
    clip = _make_clip(tmp_path / "in.mp4", seconds=0.5)
    code, _, err = _cli(["--video", clip, "--out", tmp_path / out, *flags], capsys)
    err = err.replace("note: --crf and --preset do not apply to prores_ks: it encodes with its own settings\n", "")
    assert code == 2 and err.count("\n") == 1 and "loading" not in err, err
    assert err.startswith(words.format(clip=clip)), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4"]


def test_frame_writer_reports_an_encoder_that_stops(tmp_path):
    from softsplat_vfi.media.video import FrameWriter

    with pytest.raises(VideoError, match="no encoder 'no-such-encoder'"):  # named before ffmpeg starts
        FrameWriter(tmp_path / "x.mp4", 64, 48, Fraction(25), codec="no-such-encoder")
    # an encoder that starts and then stops: x264 cannot make 4:2:0 of an odd width; the error gives ffmpeg's
    # first lines, which name the cause
    writer = FrameWriter(tmp_path / "x.mp4", 63, 48, Fraction(25), pix_fmt="yuv420p")
    frame = np.zeros((48, 63, 3), np.uint8)
    with pytest.raises(VideoError, match="stopped while writing .*(width|divisible)"):
        for _ in range(200):  # the feeder thread notices the dead pipe within a few frames
            writer.write(frame)
        writer.close()


def test_truncated_mkv_uses_the_readable_part_and_warns(tmp_path, capsys):
    full = tmp_path / "full.mkv"
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=25",
                    "-t", "2", "-c:v", "libx264", str(full)], check=True)
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    readable = probe(cut).frames
    assert 0 < readable < 50 and "ended prematurely" in probe(cut).problem
    code, stdout, err = _cli(["--video", cut, "--out", tmp_path / "o.mp4"], capsys)
    assert code == 0 and probe(tmp_path / "o.mp4").frames == 2 * readable
    assert "warning:" in err and "ended prematurely" in err and f"the {readable} frames" in err
    assert probe(full).problem == ""


def test_moving_square_lands_halfway_in_interpolated_frames(tmp_path, cpu_interpolator):
    """Known motion: a square moving 6 px per frame must sit halfway between in every new frame (the network's)."""
    from softsplat_vfi.media.video import FrameWriter

    clip = tmp_path / "square.mp4"
    rng = np.random.default_rng(0)
    background = (rng.random((72, 112, 3)) * 60 + 40).astype(np.uint8)  # dim texture
    writer = FrameWriter(clip, 112, 72, Fraction(25), crf=0, pix_fmt="yuv444p")
    for i in range(6):
        frame = background.copy()
        frame[24:44, 20 + 6 * i:40 + 6 * i] = 250
        writer.write(frame)
    writer.close()
    out = tmp_path / "out.mp4"
    _video(clip, out, cpu_interpolator, crf=0, pix_fmt="yuv444p")
    frames = list(read_frames(probe(out)))
    assert len(frames) == 12

    def centre_x(frame):
        xs = np.nonzero(frame.mean(axis=2) > 180)[1]
        return xs.mean()

    for j, frame in enumerate(frames[:-1]):  # the last output frame holds the last input frame
        expected = 29.5 + 3 * j  # input frame i at output 2i; halfway frames in between
        assert abs(centre_x(frame) - expected) < 1.0, (j, centre_x(frame), expected)


def test_phone_rotation_and_anamorphic_pixels_are_kept(tmp_path, blend_interpolator):
    """A clip coded sideways with a display rotation (as phones record) comes out upright at its displayed size,
    picture intact; a clip with non-square pixels keeps its exact pixel aspect (players would squeeze it otherwise)."""
    plain = _make_clip(tmp_path / "plain.mp4", size="96x64", seconds=1)
    rotated = tmp_path / "rotated.mp4"
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-display_rotation", "90",
                    "-i", str(plain), "-c", "copy", str(rotated)], check=True)
    info = probe(rotated)
    assert (info.width, info.height, info.rotation) == (64, 96, 90)
    out = tmp_path / "upright.mp4"
    _video(rotated, out, blend_interpolator)
    assert {shape for shape, _ in blend_interpolator.calls} == {(96, 64, 3)}  # upright frames
    dst = probe(out)
    assert (dst.width, dst.height, dst.rotation, dst.frames) == (64, 96, 0, 2 * info.frames)
    first_in = next(read_frames(info)).astype(np.float64)
    first_out = next(read_frames(dst)).astype(np.float64)  # an original frame, re-encoded
    assert 10 * np.log10(255 ** 2 / np.mean((first_in - first_out) ** 2)) > 30
    assert _audio_md5(out) == _audio_md5(rotated)

    wide = tmp_path / "anamorphic.mp4"
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-i", str(plain), "-c:a", "copy",
                    "-vf", "setsar=r=284/297:max=65535", "-c:v", "libx264", str(wide)], check=True)
    assert probe(wide).sample_aspect == Fraction(284, 297)
    for name in ("wide.mp4", "wide.mkv"):
        _video(wide, tmp_path / name, blend_interpolator)
        assert probe(tmp_path / name).sample_aspect == Fraction(284, 297), name


def test_millisecond_timestamps_still_copy_the_original_frames(tmp_path, blend_interpolator):
    """mkv stores times in ms, so 29.97 fps frames sit up to 0.5 ms off their true times; doubling the rate must
    still copy every original frame and interpolate only between them (not at t = 0.99 next to each one)."""
    clip = _make_clip(tmp_path / "in.mkv", rate="30000/1001", seconds=1, audio=False)
    info = probe(clip)
    assert info.rate == Fraction(30000, 1001)
    assert info.pts == [Fraction(1001 * i, 30000) for i in range(info.frames)]
    assert _video(clip, tmp_path / "out.mp4", blend_interpolator)["interpolated"] == info.frames - 1
    assert {times for _, times in blend_interpolator.calls} == {(0.5,)}
    ms = Fraction(1, 1000)
    thirtieths = [0, Fraction(1, 30), Fraction(1, 15), 90 * ms]  # 90 ms is off the grid: a true time
    assert snap_to_grid([0, 33 * ms, 67 * ms, 90 * ms], Fraction(30), ms) == thirtieths
    two_near_one = [0, 33 * ms, Fraction(67, 2000)]  # both would land on 1/30: left as they are
    assert snap_to_grid(two_near_one, Fraction(30), ms) == two_near_one


def _first_time(path: Path, stream: str) -> Fraction:
    """Presentation time of a stream's first packet ("0:v" or "0:a"), counted from the file's start."""
    time_base, rows = _packets(path, stream)
    return min(int(row[2]) for row in rows) * time_base


def test_video_that_starts_after_its_audio_stays_in_sync(tmp_path, blend_interpolator):
    """Recordings whose sound starts before the picture (here by 0.5 s): the output keeps that gap, instead of
    pulling the picture 0.5 s ahead of its sound."""
    clip = tmp_path / "late_picture.mp4"
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-itsoffset", "0.5", "-f", "lavfi",
                    "-i", "testsrc2=size=96x64:rate=12:duration=1", "-f", "lavfi", "-i", "sine=f=440:duration=2",
                    "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", str(clip)], check=True)
    gap = _first_time(clip, "0:v") - _first_time(clip, "0:a")
    assert gap > Fraction(1, 2) - Fraction(1, 1000)
    assert probe(clip).start == _first_time(clip, "0:v")
    for name in ("out.mp4", "out.mkv"):
        _video(clip, tmp_path / name, blend_interpolator)
        out = tmp_path / name
        assert abs(_first_time(out, "0:v") - _first_time(out, "0:a") - gap) <= Fraction(1, 1000), name
        assert _audio_md5(out) == _audio_md5(clip)


def _tagged_clip(path: Path, matrix: str, params: str, pix_fmt: str = "yuv420p") -> Path:
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi",
                    "-i", "testsrc2=size=160x96:rate=12:duration=0.5",
                    "-vf", f"scale=out_color_matrix={matrix}:out_range=tv,format={pix_fmt},setparams={params}",
                    "-c:v", "libx264", "-crf", "0", str(path)], check=True)
    return path


def _first_rgb(path: Path) -> np.ndarray:
    """The first frame as a player shows it: ffmpeg decodes with the file's colour tags."""
    info = probe(path)
    raw = subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-i", str(path), "-frames:v", "1",
                          "-f", "rawvideo", "-pix_fmt", "rgb48le", "-"], capture_output=True, check=True).stdout
    return np.frombuffer(raw, "<u2").reshape(info.height, info.width, 3) / 257.0


def test_colour_tags_and_matrix_follow_the_source(tmp_path, blend_interpolator):
    """HD video tagged bt709 (phones, cameras) and HDR (bt2020 / PQ) come out tagged the same and encoded with the
    same matrix; untagged output encoded with ffmpeg's default bt601 matrix shifted saturated colours by up to 41
    levels in an HD player, which decodes untagged HD as bt709."""
    for name, matrix, params, pix_fmt in (
            ("hd", "bt709", "colorspace=bt709:color_primaries=bt709:color_trc=bt709", "yuv420p"),
            ("hdr", "bt2020", "colorspace=bt2020nc:color_primaries=bt2020:color_trc=smpte2084", "yuv420p10le")):
        clip = _tagged_clip(tmp_path / f"{name}.mp4", matrix, params, pix_fmt)
        tags = probe(clip).color
        assert tags == tuple(p.split("=")[1] for p in params.split(":")), name
        out = tmp_path / f"{name}_out.mp4"
        _video(clip, out, blend_interpolator, crf=0)
        assert probe(out).color == tags, name
        source, result = _first_rgb(clip), _first_rgb(out)  # an original frame, re-encoded losslessly
        flat = cv2.erode((np.abs(cv2.Laplacian(source.mean(axis=2), cv2.CV_64F)) < 0.5).astype(np.uint8),
                         np.ones((7, 7), np.uint8)) > 0
        assert flat.sum() > 2000 and np.abs(result - source)[flat].max() <= 2.5, name
    assert probe(_make_clip(tmp_path / "plain.mp4", seconds=0.5)).color == NO_COLOR_TAGS
    # banner lines as ffmpeg prints them (HLG from phones, full-range SD)
    from softsplat_vfi.media.video import _color_tags

    assert _color_tags("hevc, yuv420p10le(tv, bt2020nc/bt2020/arib-std-b67), 1920x1080") == (
        "bt2020nc", "bt2020", "arib-std-b67")
    assert _color_tags("h264, yuvj420p(pc, smpte170m/bt470bg/bt709, progressive)") == ("smpte170m", "bt470bg", "bt709")
    assert _color_tags("h264, yuv420p(tv, bt709, progressive), 320x180") == ("bt709",) * 3


def test_file_metadata_and_chapters_are_kept(tmp_path, blend_interpolator):
    """Title, creation time and location (what photo libraries sort and map by) and chapters survive; slow motion
    drops the chapters, whose times would no longer fit."""
    plain = _make_clip(tmp_path / "plain.mp4", seconds=1)
    chapters = tmp_path / "chapters.txt"
    chapters.write_text(";FFMETADATA1\ntitle=Holiday\ncreation_time=2024-05-01T10:00:00Z\n"
                        "location=+48.8584+002.2945/\n[CHAPTER]\nTIMEBASE=1/1000\nSTART=0\nEND=500\ntitle=Arrival\n"
                        "[CHAPTER]\nTIMEBASE=1/1000\nSTART=500\nEND=1000\ntitle=Beach\n")
    clip = tmp_path / "tagged.mkv"
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-i", str(plain), "-i", str(chapters),
                    "-map", "0", "-map_metadata", "1", "-map_chapters", "1", "-c", "copy", str(clip)], check=True)

    def banner(path: Path) -> str:
        return subprocess.run([ffmpeg_exe(), "-hide_banner", "-i", str(path)], capture_output=True).stderr.decode()

    assert "Beach" in banner(clip) and "Holiday" in banner(clip)
    for name in ("out.mp4", "out.mkv"):
        _video(clip, tmp_path / name, blend_interpolator)
        text = banner(tmp_path / name)
        for value in ("Holiday", "2024-05-01T10:00:00", "+48.8584+002.2945/", "Arrival", "Beach"):
            assert value in text, (name, value)
    _video(clip, tmp_path / "slow.mkv", blend_interpolator, slowmo=True)
    text = banner(tmp_path / "slow.mkv")
    assert "Holiday" in text and "Beach" not in text


def _ffmpeg(*args) -> None:
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", *[str(a) for a in args]], check=True)


def _picture(path: Path, colour: str, size: str = "32x32") -> Path:
    _ffmpeg("-f", "lavfi", "-i", f"color={colour}:size={size}", "-frames:v", "1", path)
    return path


def test_the_main_video_stream_is_interpolated_wherever_it_is_stored(tmp_path, blend_interpolator):
    """A file whose first video stream is not the footage (a one-frame picture track ahead of it, as the mkv muxer
    writes a cover taken from mp4) once made the run interpolate that picture and lose the footage. The largest
    moving-picture stream is the one interpolated, as ffmpeg picks, and the run names what it did not copy."""
    main = _make_clip(tmp_path / "main.mp4", size="96x64", seconds=1)
    clip = tmp_path / "picture_first.mkv"
    _ffmpeg("-i", _picture(tmp_path / "p.png", "red"), "-i", main, "-map", "0", "-map", "1", "-c", "copy",
            "-c:v:0", "mjpeg", clip)
    info = probe(clip)
    assert (info.stream, info.width, info.height, info.frames) == (1, 96, 64, 12) and info.other_videos == 1
    assert info.covers == ()  # a plain track, not marked as a cover
    stats = _video(clip, tmp_path / "out.mp4", blend_interpolator)
    assert stats["other video streams"].startswith("1 not copied (interpolated: stream 1, 96x64"), stats
    out = probe(tmp_path / "out.mp4")
    assert (out.width, out.height, out.frames) == (96, 64, 24) and out.has_audio


def test_cover_pictures_are_kept_where_the_container_holds_them(tmp_path, blend_interpolator):
    """Cover art (an attached picture in mp4, an image attachment in mkv) goes along into mp4 and mkv output, where
    players show it; mov holds none, and the run says it was dropped. The mkv's other attachments (the fonts of
    styled subtitles) go along into mkv too."""
    main = _make_clip(tmp_path / "main.mp4", size="96x64", seconds=1)
    jpeg = tmp_path / "cover.jpg"
    _ffmpeg("-i", _picture(tmp_path / "c.png", "red"), jpeg)
    with_cover = tmp_path / "with_cover.mp4"
    _ffmpeg("-i", jpeg, "-i", main, "-map", "0", "-map", "1", "-c", "copy", "-disposition:v:0", "attached_pic",
            with_cover)
    info = probe(with_cover)
    assert [codec for _, codec in info.covers] == ["mjpeg"] and (info.width, info.height) == (96, 64)
    font = tmp_path / "font.ttf"
    font.write_bytes(b"not really a font")
    with_font = tmp_path / "with_font.mkv"
    _ffmpeg("-i", main, "-attach", font, "-metadata:s:t", "mimetype=font/ttf", "-metadata:s:t", "filename=font.ttf",
            "-attach", jpeg, "-metadata:s:t:1", "mimetype=image/jpeg", "-metadata:s:t:1", "filename=cover.jpg",
            "-c", "copy", with_font)
    assert probe(with_font).attachments == 1 and len(probe(with_font).covers) == 1
    for source, name in ((with_cover, "a.mp4"), (with_cover, "b.mkv"), (with_font, "c.mp4"), (with_font, "d.mkv")):
        stats = _video(source, tmp_path / name, blend_interpolator)
        assert stats["cover pictures"] == "1 copied", (name, stats)
        out = probe(tmp_path / name)
        assert len(out.covers) == 1 and (out.width, out.height, out.frames) == (96, 64, 24), name
    assert probe(tmp_path / "d.mkv").attachments == 1
    stats = _video(with_font, tmp_path / "e.mp4", blend_interpolator)
    assert stats["attachments"].startswith("dropped (.mp4 cannot hold"), stats
    stats = _video(with_cover, tmp_path / "f.mov", blend_interpolator)
    assert stats["cover pictures"].startswith("dropped (.mov cannot hold"), stats
    assert probe(tmp_path / "f.mov").covers == () and probe(tmp_path / "f.mov").has_audio


def test_start_timecode_is_kept_at_the_output_rate(tmp_path, blend_interpolator):
    """Camera and broadcast files carry a start timecode (a tmcd track in mov/mp4, a tag in mkv) that editors line
    clips up by; it goes along, naming the same moment at the output's rate (frame 4 of 25 is frame 8 of 50)."""
    assert rescale_timecode("01:02:03:04", Fraction(25), Fraction(50)) == "01:02:03:08"
    assert rescale_timecode("10:00:00;10", Fraction(30000, 1001), Fraction(60000, 1001)) == "10:00:00;20"
    assert rescale_timecode("10:00:00;10", Fraction(30000, 1001), Fraction(50)) == "10:00:00:16"  # no drop at 50
    assert rescale_timecode("00:00:01:24", Fraction(25), Fraction(25)) == "00:00:01:24"
    clip = tmp_path / "camera.mov"
    _ffmpeg("-i", _make_clip(tmp_path / "plain.mp4", seconds=1), "-c", "copy", "-timecode", "01:02:03:04", clip)
    assert probe(clip).timecode == "01:02:03:04"

    def banner(path: Path) -> str:
        return subprocess.run([ffmpeg_exe(), "-hide_banner", "-i", str(path)], capture_output=True).stderr.decode()

    for name in ("out.mov", "out.mkv"):
        stats = _video(clip, tmp_path / name, blend_interpolator)
        assert stats["timecode"] == "01:02:03:04 as 01:02:03:08", stats
        assert probe(tmp_path / name).timecode == "01:02:03:08", banner(tmp_path / name)
    assert "tmcd" in banner(tmp_path / "out.mov")  # a timecode track, as editors read it
    assert _video(clip, tmp_path / "slow.mov", blend_interpolator, slowmo=True)["timecode"] == "01:02:03:04"
    assert probe(tmp_path / "slow.mov").timecode == "01:02:03:04"  # same rate: unchanged


def test_names_with_quotes_and_accents(tmp_path, blend_interpolator):
    """An output named like "Mom's birthday" once failed at the very end (the quote broke ffmpeg's segment list,
    and the error blamed the audio); quotes, spaces and non-ASCII names work in and out."""
    folder = tmp_path / "Été 2024"
    folder.mkdir()
    clip = _make_clip(folder / "l'été à Nîmes.mp4", seconds=1)
    out = folder / "Mom's birthday – 日本.mkv"
    _video(clip, out, blend_interpolator)
    assert probe(out).frames == 24 and _audio_md5(out) == _audio_md5(clip)


def test_an_output_folder_gets_a_clear_error(tmp_path, blend_interpolator):
    clip = _make_clip(tmp_path / "in.mp4", seconds=1, audio=False)
    (tmp_path / "out").mkdir()
    with pytest.raises(VideoError) as info:
        _video(clip, tmp_path / "out", blend_interpolator)
    err = str(info.value)
    assert "is a folder: name a file in it" in err and "in_x2.mp4" in err and "%06d.png" in err, err
    assert list((tmp_path / "out").iterdir()) == []


def _interlaced_clip(path: Path) -> Path:
    """1 s of 25i (top field first): a white 32 px square crossing black at 200 px/s, 4 px per field."""
    _ffmpeg("-f", "lavfi", "-i", "color=black:size=160x96:rate=50:duration=1", "-f", "lavfi", "-i",
            "color=white:size=32x32:rate=50", "-filter_complex",
            "[0][1]overlay=x='t*200':y=32:shortest=1,interlace=scan=tff", "-c:v", "libx264", "-flags", "+ilme+ildct",
            "-x264opts", "tff=1", "-pix_fmt", "yuv420p", path)
    return path


def _combing(frames) -> float:
    """Rows against the mean of their neighbours: high where an interlaced frame's two fields disagree."""
    grey = [f.astype(np.float64).mean(axis=2) for f in frames]
    return float(np.mean([np.abs(g[1:-1] - (g[:-2] + g[2:]) / 2).mean() for g in grey]))


def test_interlaced_video_is_deinterlaced(tmp_path, blend_interpolator):
    """Interlaced video (two fields from different times in each frame) would show as combs on moving edges and
    mislead the flow: it is deinterlaced while decoding, and the run says so."""
    clip = _interlaced_clip(tmp_path / "interlaced.mp4")

    info = probe(clip)
    assert info.interlaced == "top first"
    assert _combing(read_frames(dataclasses.replace(info, interlaced=""))) > 2.5  # as stored: combed
    out = tmp_path / "out.mp4"
    assert _video(clip, out, blend_interpolator)["deinterlaced"] == "top first"
    assert not probe(out).interlaced and _combing(read_frames(probe(out))) < 1.0


def test_interlaced_video_at_field_rate(tmp_path, capsys, blend_interpolator):
    """--fields reads 25i as 50 frames/s, one per field, so the 50 moments the camera took are kept: the square,
    moving 4 px per field, is in a new place in every output frame (one per field at --factor 1), without combs."""
    clip = _interlaced_clip(tmp_path / "interlaced.mp4")
    out = tmp_path / "fields"
    out.mkdir()
    stats = _video(clip, out / "%03d.png", blend_interpolator, field_rate=True, factor=1)
    assert stats["deinterlaced"] == "top first, one frame per field" and stats["interpolated"] == 0, stats
    frames = [cv2.imread(str(p)) for p in sorted(out.glob("*.png"))]
    assert len(frames) == 50 and _combing(frames) < 1.0

    def left_edge(frame) -> float:  # the square's left edge: first column brighter than half on its rows
        row = frame[40:56, :, 1].mean(axis=0)
        return float(np.argmax(row > 128))

    steps = np.diff([left_edge(f) for f in frames[2:28]])  # (it reaches the right edge at field 32)
    assert np.all(steps > 1) and abs(float(np.median(steps)) - 4) <= 1, steps
    video = tmp_path / "fields.mp4"
    stats = _video(clip, video, blend_interpolator, field_rate=True)
    assert stats["deinterlaced"] == "top first, one frame per field" and stats["rate_out"] == "100", stats
    assert probe(video).frames == 100
    stats = _video(_make_clip(tmp_path / "p.mp4", seconds=1), tmp_path / "p_out.mp4", blend_interpolator,
                   field_rate=True)
    assert stats["fields"] == "no effect (the input is progressive)" and "deinterlaced" not in stats
    # the command line: --fields is for --video
    with pytest.raises(SystemExit) as info:
        run.main(["--frames", str(out), "--fields", "--out", str(tmp_path / "x" / "%03d.png")])
    assert info.value.code == 2 and "--fields reads interlaced video" in capsys.readouterr().err


def _alpha_clip(path: Path, codec: List[str], pix_fmt: str) -> Path:
    """A still 64 x 48 scene, 1 s at 10 fps, opaque on its left half and 25% opaque (alpha 64) on its right."""
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    "color=c=0x3080c0:size=64x48:rate=10,format=rgba,"
                    "geq=r='r(X,Y)':g='g(X,Y)':b='b(X,Y)':a='if(lt(X,32),255,64)'," + f"format={pix_fmt}",
                    "-t", "1", *codec, str(path)], check=True)
    return path


@pytest.mark.parametrize("kind", ["png-in-mov", "vp9-webm", "prores-4444"])
def test_video_with_alpha(tmp_path, blend_interpolator, kind):
    """Transparent video (png or qtrle in .mov, ProRes 4444, VP8/VP9 with alpha): written as images it keeps its
    alpha (VP9's through libvpx, which ffmpeg's own decoder drops); written as H.264 the summary says it was
    dropped and how to keep it."""
    codec, pix_fmt, suffix = {
        "png-in-mov": (["-c:v", "png"], "rgba", ".mov"),
        "vp9-webm": (["-c:v", "libvpx-vp9"], "yuva420p", ".webm"),
        "prores-4444": (["-c:v", "prores_ks", "-profile:v", "4444"], "yuva444p10le", ".mov"),
    }[kind]
    clip = _alpha_clip(tmp_path / f"a{suffix}", codec, pix_fmt)
    info = probe(clip)
    assert info.alpha and info.alpha_decoder == ("libvpx-vp9" if kind == "vp9-webm" else "")
    assert next(read_frames(info)).shape == (48, 64, 3)  # colour only unless asked
    frames = tmp_path / "frames"
    frames.mkdir()
    assert _video(clip, frames / "%04d.png", blend_interpolator, factor=2)["alpha"] == "kept"
    assert {shape[2] for shape, _ in blend_interpolator.calls} == {4}  # colour and alpha to the interpolator
    written = sorted(frames.glob("*.png"))
    assert len(written) == 20
    for path in written[:4]:  # originals and interpolated frames of a still scene alike
        alpha = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)[:, :, 3]
        alpha = alpha.astype(float) / (257.0 if alpha.dtype == np.uint16 else 1.0)  # 16-bit sources stay 16-bit
        assert np.abs(alpha[:, 4:28] - 255).max() <= 2 and np.abs(alpha[:, 36:60] - 64).max() <= 4, path.name
    stats = _video(clip, tmp_path / "out.mp4", blend_interpolator)
    assert stats["alpha"].startswith("dropped") and "%06d.png" in stats["alpha"], stats
    plain = _make_clip(tmp_path / "plain.mp4", audio=False)
    assert not probe(plain).alpha


def test_crf_and_preset_reach_every_constant_quality_encoder(tmp_path):
    """--crf and --preset used to reach x264/x265 only: VP8, VP9 and AV1 encoders ran at their default bitrate or
    quality (3-7 dB below x264 at --crf 18 on footage). Each now gets its own constant-quality options, and a lower
    --crf gives a better picture."""
    from softsplat_vfi.media.video import FrameWriter, encoder_quality_args

    # a fine grey texture moving 1-2 px per frame: hard enough that the quality setting shows
    texture = cv2.GaussianBlur(np.random.default_rng(0).uniform(0, 255, (108, 140)).astype(np.float32), (0, 0), 1.2)
    frames = [np.repeat(texture[k:k + 96, 2 * k:2 * k + 128, None], 3, 2).clip(0, 255).astype(np.uint8)
              for k in range(6)]

    def psnr_at(codec: str, crf: int) -> float:
        out = tmp_path / f"{codec}_{crf}.mkv"
        writer = FrameWriter(out, 128, 96, Fraction(12), codec=codec, crf=crf, preset="veryfast")
        for frame in frames:
            writer.write(frame)
        writer.close()
        got = list(read_frames(probe(out)))
        assert len(got) == len(frames)
        mse = np.mean([(a.astype(float) - b.astype(float)) ** 2 for a, b in zip(frames, got)])
        return 10 * np.log10(255 ** 2 / mse)

    for codec in ("libvpx-vp9", "libvpx", "libsvtav1"):
        assert psnr_at(codec, 10) > psnr_at(codec, 50) + 3.0, codec
    assert encoder_quality_args("h264_nvenc", 18, "medium") == ["-rc", "vbr", "-cq", "18", "-b:v", "0",
                                                                "-preset", "p4"]
    assert encoder_quality_args("prores_ks", 18, "medium") is None  # its own settings (run.py says so)
    with pytest.raises(ValueError, match="use one of"):
        encoder_quality_args("libx264", 18, "turbo")


def test_out_of_range_crf_and_segment_length_are_refused_before_any_work(tmp_path, capsys):
    """--crf 99 and --segment-seconds 0 used to be accepted: ffmpeg failed after the first segment, or every frame
    became a segment. Both are now one-line errors (exit status 2) naming the option and its range."""
    from softsplat_vfi.media.video import encoder_quality_args

    assert encoder_quality_args("libx264", 51, "medium")[:2] == ["-crf", "51"]
    assert encoder_quality_args("libvpx-vp9", 63, "medium")[:2] == ["-crf", "63"]
    assert encoder_quality_args("prores_ks", 99, "medium") is None  # --crf does not apply: not checked
    for codec, crf, top in (("libx264", 52, 51), ("libx264", -1, 51), ("libsvtav1", 64, 63), ("h264_nvenc", 60, 51)):
        with pytest.raises(ValueError, match=f"crf {crf} is outside {codec}'s scale: use 0-{top}"):
            encoder_quality_args(codec, crf, "medium")
    with pytest.raises(ValueError, match="^segment_seconds must be more than 0"):  # (the library's name for it)
        VideoOptions(segment_seconds=0)
    source = tmp_path / "in.mp4"
    source.write_bytes(b"")  # never read: the options are refused first
    for extra, message in ((["--crf", "99"], "--crf 99 is outside libx264's scale"),
                           (["--segment-seconds", "0"], "--segment-seconds must be more than 0"),
                           # a threshold of 2 (the range is 0-1) found no cut, without a word
                           (["--scene-threshold", "2"], "--scene-threshold 2.0: a mean grey difference, from 0 (off) "
                                                        "to 1 (default 0.12)"),
                           (["--scene-threshold", "-0.5"], "--scene-threshold -0.5: a mean grey difference"),
                           (["--dedup", "1.5"], "--dedup 1.5: a mean grey difference, from 0 (off) to 1")):
        assert run.main(["--video", str(source), "--out", str(tmp_path / "out.mp4")] + extra) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1
    with pytest.raises(ValueError, match="^scene_threshold nan"):
        VideoOptions(scene_threshold=float("nan"))


def test_prores_goes_to_mov_and_is_refused_for_mp4_before_any_work(tmp_path, capsys, blend_interpolator):
    """ProRes (4:2:2 10-bit only; mp4 cannot hold it) failed after the first segment with ffmpeg's message cut
    mid-word: the job's segments were always mp4 and the pixel format always 4:2:0. Now the encoder's pixel format
    is chosen from what it takes, segments go into a container that holds the codec, and output the container
    cannot hold is refused before any frame is interpolated."""
    from softsplat_vfi.media.video import output_pix_fmt

    assert output_pix_fmt("prores_ks", None, 96, 64, False) == "yuv422p10le"
    assert output_pix_fmt("qtrle", None, 96, 64, False) == "rgb24"  # RGB-only encoders get RGB
    assert output_pix_fmt("libx264", None, 95, 64, False) == "yuv444p"  # odd sizes: full chroma, as before
    with pytest.raises(VideoError, match="pix_fmt yuv422p10le"):
        output_pix_fmt("prores_ks", "yuv420p", 96, 64, False)
    with pytest.raises(VideoError, match="needs an even width and height"):  # SVT-AV1 takes 4:2:0 only
        output_pix_fmt("libsvtav1", None, 95, 64, False)
    clip = _make_clip(tmp_path / "in.mp4", seconds=1)
    with pytest.raises(VideoError) as info:
        _video(clip, tmp_path / "out.mp4", blend_interpolator, codec="prores_ks")
    err = str(info.value)
    assert ".mp4 cannot hold prores_ks video" in err and "use .mov" in err, err
    assert "nothing was interpolated yet" in err and not (tmp_path / "out.mp4.work").exists()
    assert not blend_interpolator.calls
    assert _video(clip, tmp_path / "out.mov", blend_interpolator, codec="prores_ks")["audio"] == "copied"
    banner = subprocess.run([ffmpeg_exe(), "-hide_banner", "-i", str(tmp_path / "out.mov")], capture_output=True,
                            text=True).stderr
    assert "Video: prores" in banner and "yuv422p10le" in banner
    assert probe(tmp_path / "out.mov").frames == 24
    # the command line names both before any work (run.video_options: no weights loaded, no frame read)
    args = run.build_parser().parse_args(["--video", str(clip), "--out", str(tmp_path / "y.mov"), "--codec",
                                          "prores_ks"])
    assert run.video_options(args).codec == "prores_ks"
    assert capsys.readouterr().err == ("note: --crf and --preset do not apply to prores_ks: it encodes with its own "
                                       "settings\n")
    code, _, err = _cli(["--video", clip, "--out", tmp_path / "x.mp4", "--codec", "no_such_encoder"], capsys)
    assert code == 2 and "ffmpeg has no encoder 'no_such_encoder'" in err and err.count("\n") == 1, err


def test_webm_output_is_vp9_and_keeps_opus_audio(tmp_path, blend_interpolator):
    """.webm output (VP8/VP9/AV1 with Vorbis/Opus only): VP9 unless --codec says otherwise, the source's Opus audio
    copied; H.264 asked for, or AAC audio, is refused before any work, naming the way out."""
    clip = tmp_path / "opus.mkv"
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=96x64:rate=12",
                    "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "1", "-c:v", "libx264",
                    "-pix_fmt", "yuv420p", "-c:a", "libopus", "-shortest", str(clip)], check=True)
    assert _video(clip, tmp_path / "out.webm", blend_interpolator)["audio"] == "copied"
    banner = subprocess.run([ffmpeg_exe(), "-hide_banner", "-i", str(tmp_path / "out.webm")], capture_output=True,
                            text=True).stderr
    assert "Video: vp9" in banner and "Audio: opus" in banner
    assert probe(tmp_path / "out.webm").frames == 24
    assert _audio_md5(tmp_path / "out.webm") == _audio_md5(clip)
    done = len(blend_interpolator.calls)
    with pytest.raises(VideoError, match="codec=libvpx-vp9.*nothing was interpolated yet"):
        _video(clip, tmp_path / "x264.webm", blend_interpolator, codec="libx264")
    with pytest.raises(VideoError, match="does not fit .webm: use .mkv"):
        _video(_make_clip(tmp_path / "aac.mp4", seconds=1), tmp_path / "aac.webm", blend_interpolator)
    assert len(blend_interpolator.calls) == done


def test_audio_args_slow_audio_with_the_picture():
    assert audio_args() == [] and audio_args("aac") == ["-c:a", "aac"]
    assert audio_args("aac", 2) == ["-c:a", "aac", "-af", "atempo=0.5"]
    assert audio_args("aac", 3)[-1] == "atempo=0.5,atempo=0.666666667"
    assert audio_args("libopus", 8)[-1] == "atempo=0.5,atempo=0.5,atempo=0.5"  # atempo's floor is 0.5 per instance
    assert audio_args("flac", 5)[-1] == "atempo=0.5,atempo=0.5,atempo=0.8"
    with pytest.raises(ValueError, match="re-encoded"):
        audio_args("copy", 2)


def test_audio_bitrate_sets_the_encoder_and_is_checked_first(tmp_path, capsys, blend_interpolator):
    assert audio_args("aac", 2, "192k") == ["-c:a", "aac", "-b:a", "192k", "-af", "atempo=0.5"]
    for bad in ("192 k", "fast", "-1k"):
        with pytest.raises(ValueError, match="e.g. 192k"):
            audio_args("aac", 1, bad)
    with pytest.raises(ValueError, match="audio_codec"):
        audio_args("copy", 1, "192k")
    clip = _make_clip(tmp_path / "in.mp4", seconds=1, audio=True)
    # the command line refuses a bitrate for copied audio before any work
    code, _, err = _cli(["--video", clip, "--out", tmp_path / "x.mp4", "--audio-bitrate", "192k"], capsys)
    assert code == 2 and "--audio-codec" in err and not (tmp_path / "x.mp4.work").exists(), err
    stats = _video(clip, tmp_path / "lo.mp4", blend_interpolator, audio_codec="aac", audio_bitrate="32k")
    assert stats["audio"] == "re-encoded (aac, 32k)", stats
    _video(clip, tmp_path / "hi.mp4", blend_interpolator, audio_codec="aac", audio_bitrate="256k")
    sizes = [sum(int(row[4]) for row in _packets(tmp_path / name, "0:a")[1]) for name in ("lo.mp4", "hi.mp4")]
    assert sizes[1] > 3 * sizes[0], sizes  # the audio took the bitrate asked for


def test_audio_codec_reencodes_for_webm_and_keeps_audio_in_slow_motion(tmp_path, blend_interpolator):
    """AAC does not fit .webm: the refusal names --audio-codec libopus, which then writes Opus audio; in slow motion
    an audio encoder keeps the audio, slowed with the picture (it used to be dropped); an unknown encoder is
    refused before any work."""
    clip = _make_clip(tmp_path / "in.mp4", seconds=1, audio=True)
    with pytest.raises(VideoError, match="audio_codec=libopus.*nothing was interpolated yet"):
        _video(clip, tmp_path / "out.webm", blend_interpolator)
    assert not blend_interpolator.calls
    assert _video(clip, tmp_path / "out.webm", blend_interpolator, audio_codec="libopus")["audio"] == \
        "re-encoded (libopus)"
    banner = subprocess.run([ffmpeg_exe(), "-hide_banner", "-i", str(tmp_path / "out.webm")], capture_output=True,
                            text=True).stderr
    assert "Audio: opus" in banner, banner
    stats = _video(clip, tmp_path / "slow.mp4", blend_interpolator, slowmo=True, factor=3, audio_codec="aac")
    assert stats["audio"] == "slowed 3x, re-encoded (aac)", stats
    audio = _packets(tmp_path / "slow.mp4", "0:a")
    seconds = sum(int(row[3]) for row in audio[1]) * audio[0]
    assert abs(seconds - 3 * probe(clip).duration) < 0.1, seconds
    with pytest.raises(VideoError) as info:
        _video(clip, tmp_path / "x.mp4", blend_interpolator, audio_codec="no-such-codec")
    err = str(info.value)
    assert "another audio_codec" in err and not (tmp_path / "x.mp4.work").exists()
    assert "encoded with no-such-codec" in err, err


def test_data_streams_are_named_not_lost_silently(tmp_path, blend_interpolator):
    """A data stream (camera telemetry, here private data in MPEG-TS) is not copied, and the run says so; a start
    timecode, stored as a data track in mov, is not counted (it is written again as the output's timecode)."""
    main = _make_clip(tmp_path / "main.mp4", size="96x64", seconds=1)
    blob = tmp_path / "telemetry.bin"
    blob.write_bytes(bytes(range(256)) * 40)
    clip = tmp_path / "with_data.ts"
    _ffmpeg("-i", main, "-f", "data", "-i", blob, "-map", "0", "-map", "1", "-c", "copy", clip)
    assert probe(clip).data_streams == 1
    timed = tmp_path / "timecode.mov"
    _ffmpeg("-i", main, "-c", "copy", "-timecode", "01:00:00:00", timed)
    info = probe(timed)
    assert info.data_streams == 0 and info.timecode
    stats = _video(clip, tmp_path / "out.mp4", blend_interpolator)
    assert stats["data streams"].startswith("1 not copied"), stats


def test_ffmpeg_failures_name_the_cause_not_its_effects(tmp_path):
    # ffmpeg prints the cause first ("Unknown encoder ...") and its effects after it ("Error opening output
    # file ..."); the error a user sees leads with the cause
    from softsplat_vfi.media.video import _run

    with pytest.raises(VideoError, match=r"encoding a test failed: .*Unknown encoder 'nosuchcodec'"):
        _run(["-y", "-loglevel", "error", "-f", "lavfi", "-i", "color=gray:s=64x64", "-frames:v", "1",
              "-c:v", "nosuchcodec", str(tmp_path / "x.mp4")], "encoding a test")


class NeighbourRecorder:
    """A NeighbourInterpolator stand-in: blends the pair, records which anchors it was given beside it."""

    def __init__(self) -> None:
        self.calls = []

    def interpolate_integer(self, one, two, times):
        raise AssertionError("linear motion: quadratic motion asks for interpolate_integer_with_neighbours")

    def interpolate_integer_with_neighbours(self, one, two, times, before, after):
        def name(side):
            return None if side is None else (int(side[0][0, 0, 0]), side[1])
        self.calls.append((int(one[0, 0, 0]), int(two[0, 0, 0]), name(before), name(after)))
        return [np.rint((1 - t) * one.astype(np.float64) + t * two).astype(one.dtype) for t in times]


def _stream(values, stamps):
    from softsplat_vfi.pipeline.schedule import thumbnail
    from softsplat_vfi.pipeline.video import _Anchor

    frames = [np.full((16, 24, 3), v, np.uint8) for v in values]
    return [_Anchor(Fraction(s), f, thumbnail(f)) for f, s in zip(frames, stamps)]


def test_quadratic_motion_gives_each_pair_the_anchors_beside_it_within_the_shot(blend_interpolator):
    """Each pair gets the anchor before and after it with their distances in units of its own interval (uneven
    where a frame is missing), none across a cut or past the ends; a resumed job asks for the same."""
    from softsplat_vfi.pipeline.schedule import make_plan
    from softsplat_vfi.pipeline.video import _intervals, _output_frames

    # frame values name the anchors; time 3 is missing (a dropped frame); a cut lies between 103 (t 5) and 200 (t 6)
    anchors = _stream([100, 101, 102, 103, 104, 200, 201, 202], [0, 1, 2, 4, 5, 6, 7, 8])
    plan = make_plan(Fraction(9), Fraction(1), 2)

    def calls(skip):
        recorder = NeighbourRecorder()
        stats = {"cuts": 0, "interpolated": 0}
        list(_output_frames(_intervals(iter(anchors), 0.12), plan, recorder, skip, stats, "quadratic"))
        return recorder.calls, stats

    made, stats = calls(lambda k: False)
    assert stats["cuts"] == 1
    assert made == [(100, 101, None, (102, 1.0)),
                    (101, 102, (100, 1.0), (103, 2.0)),
                    (102, 103, (101, 0.5), (104, 0.5)),
                    (103, 104, (102, 2.0), None),  # the next interval is the cut
                    (200, 201, None, (202, 1.0)),
                    (201, 202, (200, 1.0), None)]
    resumed, _ = calls(lambda k: k < 7)  # output frames 0-6 done: the pairs from time 3.5 on
    assert resumed == made[2:]
    # linear motion, or an interpolator without neighbours: pairs alone
    stats = {"cuts": 0, "interpolated": 0}
    list(_output_frames(_intervals(iter(anchors), 0.12), plan, blend_interpolator, lambda k: False, stats,
                        "quadratic"))
    assert len(blend_interpolator.calls) == 6
    with pytest.raises(AssertionError, match="asks for interpolate_integer_with_neighbours"):
        stats = {"cuts": 0, "interpolated": 0}
        list(_output_frames(_intervals(iter(anchors), 0.12), plan, NeighbourRecorder(), lambda k: False,
                            stats, "linear"))


def test_motion_option_is_checked():
    from softsplat_vfi.pipeline.video import VideoOptions

    assert VideoOptions().motion == "quadratic"
    with pytest.raises(ValueError, match="^motion 'cubic': use quadratic or linear"):
        VideoOptions(motion="cubic")


def test_a_clip_cut_off_a_key_frame_with_c_copy_keeps_its_own_length(tmp_path, blend_interpolator):
    """``ffmpeg -ss 1.5 -c copy`` of a 4 s mp4 with a key frame every 2 s keeps the 36 packets from the key frame
    before the cut, which its edit list tells the decoder to decode and not show. probe counted them, so the 60
    frames shown were stretched over 96 frames' time: the output's video ran 4 s beside 2.5 s of audio, its last
    frame held 1.5 s. The packets before the file's start are left out now."""
    whole, cut = tmp_path / "whole.mp4", tmp_path / "cut.mp4"
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc2=size=96x64:rate=24", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t",
                    "4", "-c:v", "libx264", "-g", "48", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", str(whole)],
                   check=True)
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-ss", "1.5", "-i", str(whole), "-c",
                    "copy", str(cut)], check=True)
    assert sum(int(row[2]) < 0 for row in _packets(cut, "0:v")[1]) == 36  # (the edit list's leading packets are there)
    info = probe(cut)
    assert (info.frames, info.start, info.duration) == (60, 0, Fraction(5, 2))
    out = tmp_path / "out.mp4"
    stats = interpolate_video(cut, out, blend_interpolator, VideoOptions(factor=2), progress=False)
    assert (stats["frames_out"], stats["audio"]) == (120, "copied")
    made = probe(out)
    assert made.frames == 120 and made.duration == Fraction(5, 2)
    shown = [f.astype(float) for f in read_frames(probe(whole))]
    first = next(read_frames(made)).astype(float)
    assert min(range(96), key=lambda k: abs(first - shown[k]).mean()) == 36


@pytest.mark.parametrize("scan", ["progressive", "interlaced", "fields"])
def test_parts_of_a_job_decode_from_near_their_first_frame_and_make_one_runs_video(tmp_path, blend_interpolator,
                                                                                    monkeypatch, caplog, scan):
    """A batch's segment tasks and torchrun's ranks each decoded the input from its start (and torchrun's to its
    end): the last of 8 parts read 7/8 of the video before its first frame. A part after the start now has ffmpeg
    seek to SEEK_MARGIN frames before its first pair, decodes up to the anchor after its frames, and counts the cuts
    before its own frames: the joined parts are one run's video, frame for frame, with one run's cut count; so does a
    resumed job, from just before its first unfinished frame. Also
    where the input is interlaced, whose first frame after a seek is deinterlaced without the one before it (and,
    read one frame per field, the first two fields)."""
    from softsplat_vfi.pipeline import video as pipeline
    from softsplat_vfi.pipeline.video import (encode_segments, finish_video_job, first_frame_to_read,
                                              plan_video_job, prepare_work)

    clip = tmp_path / "in.mp4"  # 4 s at 12 fps, a cut to smptebars after 2.5 s, a tone
    rate = 24 if scan != "progressive" else 12  # (interlaced: two frames woven into each, 12 a second)
    interlace = ",interlace=scan=tff" if scan != "progressive" else ""
    coding = ["-flags", "+ildct+ilme", "-x264opts", "tff=1"] if scan != "progressive" else []
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    f"testsrc2=size=96x64:rate={rate}:duration=2.5", "-f", "lavfi", "-i",
                    f"smptebars=size=96x64:rate={rate}:duration=1.5", "-f", "lavfi", "-i",
                    "sine=frequency=440:sample_rate=48000", "-filter_complex",
                    f"[0:v][1:v]concat=n=2:v=1{interlace}[v]", "-map", "[v]", "-map", "2:a", "-t", "4", "-c:v",
                    "libx264", *coding, "-g", "12", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", str(clip)],
                   check=True)
    options = VideoOptions(factor=2, segment_seconds=0.5, preset="ultrafast", field_rate=scan == "fields")
    alone = tmp_path / "alone.mp4"
    whole = interpolate_video(clip, alone, blend_interpolator, options, progress=False)
    assert whole["cuts"] == 1
    seeks = []
    real = pipeline.read_timed_frames
    monkeypatch.setattr(pipeline, "read_timed_frames",
                        lambda info, alpha=False, first=0: seeks.append(first) or real(info, alpha, first))
    job = plan_video_job(clip, tmp_path / "parts.mp4", options, "")
    assert bool(job.info.interlaced) == (scan != "progressive")
    prepare_work(job)
    count = job.plan.count
    assert count == (192 if scan == "fields" else 96)
    step = count // 8  # (on the segments' boundaries)
    parts = [range(0, 2 * step), range(2 * step, 5 * step), range(5 * step, 7 * step), range(7 * step, count)]
    counts = [encode_segments(job, blend_interpolator, part, progress=False, joins=False) for part in parts[:3]]
    # the rest as a resumed job makes it: the whole video asked for, decoded from just before the last part
    counts.append(encode_segments(job, blend_interpolator, range(count), progress=False, joins=False))
    assert counts[-1]["resumed_segments"] == parts[3].start // step
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]  # (no frame said lost)
    assert seeks == [first_frame_to_read(job.info.pts, job.plan, part, options) for part in parts]
    assert seeks[0] == 0 and all(seeks[1:]), seeks
    assert sum(c["cuts"] for c in counts) == 1 and sum(c["interpolated"] for c in counts) == whole["interpolated"]
    finish_video_job(job, {})
    a, b = probe(alone), probe(tmp_path / "parts.mp4")
    assert a.frames == b.frames == count
    frames = [list(read_frames(x)) for x in (a, b)]
    assert all((x == y).all() for x, y in zip(*frames))
    assert _audio_md5(alone) == _audio_md5(tmp_path / "parts.mp4")
    # with --dedup, whose anchors chain over the whole video, every part reads from the start
    deduplicated = dataclasses.replace(options, dedup_threshold=0.002)
    assert first_frame_to_read(job.info.pts, job.plan, parts[3], deduplicated) == 0


@pytest.mark.parametrize("source", ["video", "frames"])
def test_an_image_job_resumed_late_reads_from_just_before_its_first_missing_image(tmp_path, blend_interpolator,
                                                                                    monkeypatch, source):
    """A rerun of an image job decoded the whole input again to make its last missing images; it now reads from
    SEEK_MARGIN frames before the first missing one (a video seeks, a folder skips its first files), and makes
    the same images."""
    from softsplat_vfi.media import images
    from softsplat_vfi.pipeline import video as pipeline

    clip = _make_clip(tmp_path / "in.mp4", seconds=4, audio=False)
    folder = tmp_path / "frames"
    if source == "frames":
        folder.mkdir()
        for i, frame in enumerate(read_frames(probe(clip))):
            cv2.imwrite(str(folder / f"{i:04d}.png"), frame[:, :, ::-1])
    out = tmp_path / "out"
    out.mkdir()

    def job():
        if source == "video":
            return interpolate_video(clip, out / "%04d.png", blend_interpolator, VideoOptions(), progress=False)
        return interpolate_frames(folder, str(out / "%04d.png"), Fraction(12), blend_interpolator, VideoOptions(),
                                  progress=False)

    job()
    made = {p.name: p.read_bytes() for p in sorted(out.glob("*.png"))}
    assert len(made) == 96
    for name in list(made)[80:]:
        (out / name).unlink()
    seeks, reads = [], []
    real_timed, real_read = pipeline.read_timed_frames, images.read_image
    monkeypatch.setattr(pipeline, "read_timed_frames",
                        lambda info, alpha=False, first=0: seeks.append(first) or real_timed(info, alpha, first))
    monkeypatch.setattr(images, "read_image", lambda path, *a, **k: reads.append(path) or real_read(path, *a, **k))
    job()
    assert {p.name: p.read_bytes() for p in sorted(out.glob("*.png"))} == made
    # output frame 80 lies at input frame 40: read from 8 frames before the one before it
    if source == "video":
        assert seeks == [31]
    else:
        assert sum(1 for p in reads if p.parent == folder) == 1 + 48 - 31  # (the first, for its size and alpha)
