"""Batch jobs (pipeline/batch.py): run.py --batch on this machine and on a local Ray cluster of 2 CPU workers.

Every output is compared with run.py --video on the same input alone (made here once, in this process): its decoded
frames with their timestamps and its audio packets, byte for byte. The clips are small and the network is the fast
one, so that the cluster's tasks are short; one Ray instance serves the module."""

import os
import signal
import subprocess
import sys
import threading
import _thread
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import pytest

import run
from softsplat_vfi.media.video import ffmpeg_exe
from softsplat_vfi.pipeline import batch

ROOT = Path(__file__).resolve().parent.parent
# 24 output frames/s (12 in, --factor 2): segments of 6 frames, 2 segments a task; the long clip's 36 frames make
# 6 segments and 3 tasks
COMMON = ["--device", "cpu", "--model", "fast", "--segment-seconds", "0.25"]
RAY = ["--ray", "auto", "--segments-per-task", "2"]


def _clip(path: Path, seconds: float, size: str = "96x64", audio: bool = False, cut: bool = False) -> Path:
    """An x264 clip of testsrc2 (with a tone where ``audio``; with a cut to smptebars half-way where ``cut``)."""
    args = [ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
            f"testsrc2=size={size}:rate=12:duration={seconds / 2 if cut else seconds}"]
    if cut:
        args += ["-f", "lavfi", "-i", f"smptebars=size={size}:rate=12:duration={seconds / 2}",
                 "-filter_complex", "[0:v][1:v]concat=n=2:v=1[v]", "-map", "[v]"]
    if audio:
        args += ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-c:a", "aac", "-shortest"]
    subprocess.run(args + ["-t", str(seconds), "-c:v", "libx264", "-pix_fmt", "yuv420p", str(path)], check=True)
    return path


def _rows(path: Path, stream: str, decode: bool) -> List[str]:
    """A stream's framemd5 rows (stream, dts, pts, duration, size, hash): of its decoded frames, or its packets."""
    codec = [] if decode else ["-c", "copy"]
    out = subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-i", str(path), "-map", stream, *codec,
                          "-f", "framemd5", "-"], capture_output=True, check=True).stdout.decode()
    return [line for line in out.splitlines() if line and not line.startswith("#")]


def _content(path: Path) -> Dict[str, List[str]]:
    """What must be byte-identical: the decoded frames (with their times) and the audio packets."""
    return {"video": _rows(path, "0:v", True), "audio": _rows(path, "0:a?", False)}


def _main(args, capsys):
    code = run.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """Four short real clips (two with audio, one with a cut, one long enough for 3 segment tasks), a corrupt
    one, and each good one's output from run.py --video alone."""
    folder = tmp_path_factory.mktemp("clips")
    inputs = folder / "in"
    inputs.mkdir()
    made = {"tone": _clip(inputs / "tone.mp4", 0.5, audio=True),
            "tone2": _clip(inputs / "tone2.mkv", 0.5, size="80x48", audio=True),
            "cut": _clip(inputs / "cut.mp4", 1.0, cut=True),
            "long": _clip(inputs / "long.mp4", 1.5)}
    (inputs / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(4000))
    alone = folder / "alone"
    alone.mkdir()
    references = {}
    for name, source in made.items():
        out = alone / source.name
        assert run.main([*map(str, ["--video", source, "--out", out]), *COMMON]) == 0
        references[name] = _content(out)
    assert references["tone"]["audio"] and references["tone2"]["audio"]
    return inputs, made, references


@pytest.fixture(scope="module")
def cluster():
    """A local Ray instance of 2 CPU workers for the module; the batches connect to it (--ray auto in a process
    connected already keeps its connection)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR",
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    yield ray
    ray.shutdown()


def _check_outputs(out_dir: Path, made: dict, references: dict) -> None:
    for name, source in made.items():
        assert _content(out_dir / source.name) == references[name], name
        assert not (out_dir / f"{source.name}.work").exists()


def test_a_batch_on_ray_equals_each_video_alone_and_a_corrupt_input_fails_alone(tmp_path, clips, cluster, capsys):
    inputs, made, references = clips
    code, out, err = _main(["--batch", inputs, "--out-dir", tmp_path, *COMMON, *RAY], capsys)
    assert code == 1, err  # one job failed
    _check_outputs(tmp_path, made, references)
    errors = [line for line in err.splitlines() if line.startswith("[")]
    assert len(errors) == 1 and "broken.mp4" in errors[0] and "error:" in errors[0]
    table = out[out.index("job  input"):]
    assert table.count(" done ") == 4 and table.count(" failed ") == 1
    assert "5 jobs: 4 done, 0 kept from before, 1 failed" in table
    assert "Ray: 2 tasks at once on 2 CPUs" in err
    # the long clip was 3 tasks of 2 segments, on segment boundaries
    assert batch.split_frames(36, 6, 2) == [range(0, 12), range(12, 24), range(24, 36)]
    # a rerun keeps every finished output (the same job keys) and fails the corrupt input again
    code, out, err = _main(["--batch", inputs, "--out-dir", tmp_path, *COMMON, *RAY], capsys)
    assert code == 1 and "5 jobs: 0 done, 4 kept from before, 1 failed" in out
    _check_outputs(tmp_path, made, references)


def _running_tasks() -> List[int]:
    """The processes of Ray workers running a segment task now (Ray titles each by its function)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(b"ray::_segment_task"):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def _batch_acting_when(condition: Callable[[], bool], action: Callable[[], None], args: list,
                       capsys) -> Tuple[int, str, str]:
    """``_main(args)``, with a thread beside it that runs ``action`` once ``condition`` comes true, unless the batch
    returned first. No deadline of its own: on a loaded machine the workers' start (each imports torch and loads
    the network) took longer than one, and a watcher that gave up left the batch to run to its end uninterrupted
    (exit 0 where the test waited for 130)."""
    ended = threading.Event()

    def watch() -> None:
        while not condition():
            if ended.is_set():
                return
            time.sleep(0.02)
        action()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        return _main(args, capsys)
    finally:
        ended.set()
        watcher.join(timeout=10)


def test_a_worker_killed_mid_task_is_retried_and_the_output_is_unchanged(tmp_path, clips, cluster, capsys):
    inputs, made, references = clips
    work = tmp_path / "long.mp4.work"
    killed: List[int] = []

    def kill_running_tasks() -> None:
        for pid in _running_tasks():
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    # a segment being written (a .part file) while tasks run: the workers running them are killed mid-task
    code, out, err = _batch_acting_when(
        lambda: any(p.name.startswith("seg_") and ".part" in p.name for p in work.glob("*")) and _running_tasks(),
        kill_running_tasks, ["--batch", made["long"], "--out-dir", tmp_path, *COMMON, *RAY], capsys)
    assert killed, "no task was running to kill"
    assert code == 0, err
    _check_outputs(tmp_path, {"long": made["long"]}, references)


def test_a_rerun_after_an_interrupt_redoes_only_the_unfinished_segments(tmp_path, clips, cluster, capsys):
    inputs, made, references = clips
    work = tmp_path / "long.mp4.work"
    code, out, err = _batch_acting_when(lambda: any(work.glob("seg_*-*.mp4")), _thread.interrupt_main,  # Ctrl-C
                                        ["--batch", made["long"], "--out-dir", tmp_path, *COMMON, *RAY], capsys)
    assert code == 130 and "interrupted" in out and "run the same batch again to resume" in err
    assert not (tmp_path / "long.mp4").exists()
    finished_at_interrupt = sorted(p.name for p in work.glob("seg_*-*.mp4"))
    assert 1 <= len(finished_at_interrupt) < 6
    # output frames j of 36 at --factor 2: the odd ones are interpolated, but the last (35, the last input frame
    # held); a segment seg_A-B holds frames A to B - 1
    spans = [tuple(int(v) for v in name[4:-4].split("-")) for name in finished_at_interrupt]
    kept = sum(1 for a, b in spans for j in range(a, b) if j % 2 and j < 35)
    code, out, err = _main(["--batch", made["long"], "--out-dir", tmp_path, *COMMON, *RAY], capsys)
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("[1] wrote"))
    assert f"{17 - kept} interpolated" in line and f"{len(finished_at_interrupt)} segments resumed" in line
    _check_outputs(tmp_path, {"long": made["long"]}, references)


def test_a_batch_without_ray_runs_here_without_importing_it(tmp_path, clips, capsys, monkeypatch):
    """No --ray: the jobs run in this process, one after another (an import of Ray would fail here), with the
    same outputs; an output name two inputs share fails the later job, alone."""
    inputs, made, references = clips
    monkeypatch.setitem(sys.modules, "ray", None)
    other = tmp_path / "other"
    other.mkdir()
    twin = other / made["tone"].name
    twin.write_bytes(made["tone"].read_bytes())
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, out, err = _main(["--batch", made["tone"], twin, "--out-dir", out_dir, *COMMON], capsys)
    assert code == 1
    _check_outputs(out_dir, {"tone": made["tone"]}, references)
    errors = [line for line in err.splitlines() if line.startswith("[")]
    assert len(errors) == 1 and "[2] error:" in errors[0] and "same output name as job 1" in errors[0]
    assert "2 jobs: 1 done, 0 kept from before, 1 failed" in out


def test_batch_mistakes_are_one_line(tmp_path, capsys):
    for args, words in ((["--batch", "x.mp4"], "--batch needs --out-dir"),
                        (["--out-dir", tmp_path, "--video", "x.mp4", "--out", "y.mp4"], "--out-dir: batch flags"),
                        (["--batch", "x.mp4", "--out-dir", tmp_path, "--out", "y.mp4"], "--out: a single job's"),
                        (["--batch", "x.mp4", "--out-dir", tmp_path, "--segments-per-task", "0"], "use 1 or more")):
        with pytest.raises(SystemExit) as exit_:
            run.main([str(a) for a in args])
        assert exit_.value.code == 2 and words in capsys.readouterr().err
    code, _, err = _main(["--batch", tmp_path / "none-*.mp4", "--out-dir", tmp_path, "--device", "cpu"], capsys)
    assert code == 2 and "matches no file" in err
    code, _, err = _main(["--batch", "x.mp4", "--out-dir", tmp_path / "missing", "--device", "cpu"], capsys)
    assert code == 2 and "no such folder" in err
