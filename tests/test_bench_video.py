"""bench.bench_video's stage table (issue 85) on the CPU, tiny: every stage, for both kinds of clip, side by side."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from bench import bench_video
from softsplat_vfi.media.video import ffmpeg_exe

ROOT = Path(__file__).resolve().parent.parent
FAST = ROOT / "softsplat_vfi" / "weights" / "fast.safetensors"

# every stage the table has with one network and the two presets (the graphs' row is CUDA's alone)
STAGES = ["decode", "decode + rgb24", "read_frames", "read_frames + thumbnails", "rgb24 pipe alone",
          "rgb24 pipe + yuv420p", "yuv420p conversion (one thread)", "x264 veryfast", "x264 veryfast, rgb24 in",
          "x264 veryfast, yuv420p in", "x264 medium", "x264 medium, rgb24 in", "x264 medium, yuv420p in",
          "mux, audio copied", "network fast, route", "network fast, route ms per frame",
          "network fast, eager pair ms", "pipeline set-up s", "pipeline fast veryfast", "pipeline copy veryfast",
          "pipeline fast medium", "pipeline copy medium", "pipeline copy veryfast, one segment"]

# the table's header: the machine, and what the network's rows ran
NOTES = [f"machine: {os.cpu_count()} CPU cores, cpu",
         "network fast: fast.safetensors on cpu, autocast none, flow scale 1.0, CUDA graphs off, compile off"]


def natural_clip(path: Path) -> Path:
    """A few frames of a photograph (the seed example's first frame) panned across: natural content, no audio."""
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-loop", "1", "-i",
                    str(ROOT / "images" / "one.png"), "-vf", "scale=320:-2,crop=128:72:x='t*60':y=20", "-r", "12",
                    "-t", "0.5", "-c:v", "libx264", "-pix_fmt", "yuv420p", str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    folder = tmp_path_factory.mktemp("bench_video")
    clip = natural_clip(folder / "pan.mp4")
    out = folder / "table.json"
    printed = io.StringIO()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # (tiny frames: torch's thread pool only waits, and far longer on a loaded machine)
    try:
        with contextlib.redirect_stdout(printed):
            code = bench_video.main(["--clips", "synthetic", str(clip), "--size", "128x72", "--frames", "4",
                                     "--weights", str(FAST), "--device", "cpu", "--json", str(out)])
    finally:
        torch.set_num_threads(threads)
    saved = json.loads(out.read_text())
    assert saved["notes"] == NOTES
    return code, saved["rows"], printed.getvalue()


def test_the_table_has_every_stage_for_both_kinds_of_clip(table: tuple) -> None:
    code, rows, _ = table
    assert code == 0
    clips = list(dict.fromkeys(row["clip"] for row in rows))
    assert clips == ["synthetic", "natural pan"]
    for clip in clips:
        found = {row["stage"]: row for row in rows if row["clip"] == clip}
        assert list(found) == STAGES, clip
        for stage, row in found.items():
            assert row["value"] > 0, (clip, stage)
            assert row["size"] == "128x72" and row["frames_in"] == 4 and row["device"] == "cpu"
            # every rate says how many CPU cores (this process's and ffmpeg's) its stage kept busy
            assert (row["cores"] is not None and row["cores"] > 0) == row["unit"].endswith("fps"), (clip, stage)
    units = {row["stage"]: row["unit"] for row in rows}
    assert units["decode"] == "in fps" and units["pipeline fast veryfast"] == "out fps"
    assert units["network fast, eager pair ms"] == "ms" and units["pipeline set-up s"] == "s"


def test_the_table_prints_a_column_per_clip(table: tuple) -> None:
    _, rows, out = table
    lines = out.splitlines()
    assert lines[:2] == NOTES
    assert "synthetic: testsrc2 128x72 at 24/s, 4 frames, audio yes" in lines
    # the natural clip had no audio: the bench gave it the tone, so the mux and the pipeline copy audio on both
    assert "natural pan: pan.mp4 128x72 at 12/s, 4 frames, audio yes" in lines
    assert "| stage | unit | synthetic | natural pan |" in lines
    body = [line for line in lines if line.startswith("| ") and not line.startswith("| stage")]
    assert [line.split(" | ")[0][2:] for line in body] == STAGES
    assert all(len(line.split(" | ")) == 4 for line in body)
    assert body[0].startswith("| decode | in fps | ") and body[0].endswith(" cores) |")
    # one JSON line per measurement came first, as it was made (a run cut short keeps what it measured)
    assert [json.loads(line) for line in lines if line.startswith("{")] == rows


def test_a_natural_clip_shorter_than_the_frames_asked_is_looped(tmp_path: Path) -> None:
    clip = bench_video.make_clip(str(natural_clip(tmp_path / "pan.mp4")), tmp_path, (36, 64), 9)
    assert (clip.info.frames, clip.info.width, clip.info.height, clip.info.has_audio) == (9, 64, 36, True)
    assert clip.made == "pan.mp4 128x72 at 12/s, looped 6 -> 9 frames, lanczos to 64x36"


def test_the_encoders_take_the_frames_forwards_then_backwards() -> None:
    frames = [np.full((1, 1, 3), k, np.uint8) for k in range(4)]
    assert [int(f[0, 0, 0]) for f in bench_video.ping_pong(frames, 10)] == [0, 1, 2, 3, 2, 1, 0, 1, 2, 3]
    assert [int(f[0, 0, 0]) for f in bench_video.ping_pong(frames[:1], 3)] == [0, 0, 0]


def test_the_table_names_bad_arguments(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        bench_video.main(["--clips", "synthetic", "--frames", "2", "--device", "cpu"])
    assert "--frames must be at least 3" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_video.main(["--clips", "synthetic", "--weights", "missing.safetensors", "--device", "cpu"])
    assert "--weights missing.safetensors: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_video.main(["--clips", "synthetic", "--device", "gpu"])
    assert "--device 'gpu' is not a device: use auto, cpu, cuda or cuda:N" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # (before any clip is made)
        bench_video.main(["--clips", "synthetic", "--compiled", "--device", "cpu"])
    assert "torch.compile needs the network on a CUDA device" in capsys.readouterr().err


def test_the_video_rows_pipeline_without_a_network_has_the_engines_segments(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """--video --stages: its copying stand-in stood without a device, so on a GPU it made a CPU's segments (6 frames
    at 1080p) and the row timed their closing; it now runs on the engine's device, as the stage table's does."""
    from softsplat_vfi.pipeline.video import VideoOptions, device_type, segment_frames

    clip = bench_video.make_clip("synthetic", tmp_path, (36, 64), 6)
    timed = []

    def time_pipeline(video, step, options):
        timed.append(step)
        return 0.5, 12, {}

    monkeypatch.setattr(bench_video, "time_pipeline", time_pipeline)
    row = bench_video.stage_rows(clip.path, clip.info, torch.device("cuda"), VideoOptions())
    assert device_type(timed[0]) == "cuda" and row["pipeline_without_network_fps"] == 24.0 and row["decode_fps"] > 0
    assert segment_frames(clip.info.rate * 2, 1920, 1080, VideoOptions(), device_type(timed[0])) == 480
