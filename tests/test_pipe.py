"""YUV4MPEG2 pipes: ``run.py --video - --out -`` between two ffmpeg processes, and ``pipeline.pipe`` on in-memory
streams (layouts, rates, cuts, errors)."""

import io
import re
import subprocess
import sys
import threading
from fractions import Fraction
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pytest

from softsplat_vfi.media.video import ffmpeg_exe
from softsplat_vfi.media.y4m import Y4MError, parse_header
from softsplat_vfi.pipeline.pipe import interpolate_pipe
from softsplat_vfi.pipeline.video import VideoOptions
from tests.video_fixtures import InlineWriter

ROOT = Path(__file__).resolve().parent.parent


def _split(stream: bytes) -> Tuple[bytes, List[bytes]]:
    """(header line, frame payloads) of a whole y4m stream."""
    header_line, _, rest = stream.partition(b"\n")
    header = parse_header(header_line + b"\n", "test")
    frames = []
    while rest:
        marker, _, rest = rest.partition(b"\n")
        assert marker.startswith(b"FRAME")
        frames.append(rest[:header.frame_bytes])
        assert len(frames[-1]) == header.frame_bytes
        rest = rest[header.frame_bytes:]
    return header_line, frames


def _testsrc(frames: int, pix_fmt: str, rate: str = "24000/1001", size: str = "64x48") -> bytes:
    """A y4m stream made by ffmpeg's testsrc2 (moving patterns)."""
    return subprocess.run([ffmpeg_exe(), "-v", "error", "-f", "lavfi", "-i", f"testsrc2=size={size}:rate={rate}",
                           "-frames:v", str(frames), "-pix_fmt", pix_fmt, "-strict", "-1", "-f", "yuv4mpegpipe", "-"],
                          capture_output=True, check=True).stdout


def _framemd5(args: List[str], stdin: bytes = b"") -> Tuple[Fraction, List[int], List[str]]:
    """ffmpeg's framemd5 of its input: (time base, pts of each frame, hash of each frame)."""
    out = subprocess.run([ffmpeg_exe(), "-v", "error", *args, "-f", "framemd5", "-"], input=stdin,
                         capture_output=True, check=True).stdout.decode()
    base = Fraction(re.search(r"^#tb 0: (\d+/\d+)$", out, re.M).group(1))
    rows = [line.split(",") for line in out.splitlines() if line and not line.startswith("#")]
    return base, [int(row[2]) for row in rows], [row[5].strip() for row in rows]


def test_ffmpeg_pipe_round_trips_a_10_bit_clip_with_exact_count_and_timestamps(tmp_path):
    """ffmpeg -f yuv4mpegpipe | run.py --video - --factor 2 --out - | ffmpeg -i - out.mkv, with real processes (the
    test keeps a copy of the middle stream): 12 frames at 24000/1001 give 24 at 48000/1001, 10-bit 4:2:0 kept,
    frame j at exactly j * 1001/48000 s, and the input frames bit-exact at the even positions."""
    ff = ffmpeg_exe()
    source = tmp_path / "in.y4m"
    source.write_bytes(_testsrc(12, "yuv420p10le"))
    upstream = subprocess.Popen([ff, "-v", "error", "-i", str(source), "-strict", "-1", "-f", "yuv4mpegpipe", "-"],
                                stdout=subprocess.PIPE)
    tool = subprocess.Popen([sys.executable, str(ROOT / "run.py"), "--video", "-", "--factor", "2", "--out", "-",
                             "--model", "fast"], stdin=upstream.stdout, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    upstream.stdout.close()
    stream, err = tool.communicate()
    assert (upstream.wait(), tool.returncode) == (0, 0), err.decode()
    assert "frames_in 12, frames_out 24" in err.decode() and "rate_out 48000/1001" in err.decode()
    # stderr is no terminal here: a loading line and plain lines, never \r-joined updates (issue 67)
    assert err.decode().startswith("loading torch and the network") and "\r" not in err.decode()
    # the stream: 10-bit 4:2:0 at 48000/1001, the input frames bit-exact at the even positions
    header, frames = _split(stream)
    assert header == b"YUV4MPEG2 W64 H48 F48000:1001 Ip A1:1 C420p10 XYSCSS=420P10"
    assert len(frames) == 24
    assert [frames[2 * i] for i in range(12)] == _split(source.read_bytes())[1]
    # ffmpeg's y4m reader times frame j at exactly j * 1001/48000 s
    base, pts, hashes = _framemd5(["-f", "yuv4mpegpipe", "-i", "-"], stream)
    assert (base, pts) == (Fraction(1001, 48000), list(range(24)))
    # ... and encodes all 24 into out.mkv, which rounds times to milliseconds
    out = tmp_path / "out.mkv"
    subprocess.run([ff, "-v", "error", "-f", "yuv4mpegpipe", "-i", "-", "-c:v", "ffv1", str(out)], input=stream,
                   check=True)
    base, pts, decoded = _framemd5(["-i", str(out)])
    assert [round(p * base * 1000) for p in pts] == [round(Fraction(j * 1001, 48000) * 1000) for j in range(24)]
    assert decoded == hashes  # lossless: the same 24 frames


def _stream(frames: List[np.ndarray], colour: str = "C420jpeg", rate: str = "25:1", tags: str = "Ip A1:1") -> bytes:
    """A y4m stream of the given Y, U, V planes per frame (already in the layout's sizes and dtype)."""
    height, width = frames[0][0].shape
    head = f"YUV4MPEG2 W{width} H{height} F{rate} {tags} {colour}\n".encode()
    return head + b"".join(b"FRAME\n" + b"".join(p.tobytes() for p in planes) for planes in frames)


def _planes(value: int, shape: Tuple[int, int], chroma: Tuple[int, int], dtype: str, u: int, v: int):
    return (np.full(shape, value, dtype), np.full(chroma, u, dtype), np.full(chroma, v, dtype))


def _run_pipe(stream: bytes, interpolator, **options) -> Tuple[dict, bytes]:
    sink = io.BytesIO()
    stats = interpolate_pipe(io.BytesIO(stream), sink, interpolator, VideoOptions(**options), progress=False)
    return stats, sink.getvalue()


@pytest.mark.parametrize("colour, chroma, dtype, top", [
    ("C420jpeg", (4, 6), "u1", 255), ("C422", (8, 6), "u1", 255), ("C444", (8, 12), "u1", 255),
    ("C420p10", (4, 6), "<u2", 1023), ("C422p10", (8, 6), "<u2", 1023), ("C444p10", (8, 12), "<u2", 1023),
    ("C444p12", (8, 12), "<u2", 4095)])
def test_each_layout_and_depth_keeps_its_header_and_converts_back_closely(colour, chroma, dtype, blend_interpolator,
                                                                         top):
    """8, 10 and 12 bits at 4:2:0, 4:2:2 and 4:4:4: the header is kept except its rate, originals are bit-exact,
    and an interpolated frame between two frames of one (in-gamut) colour comes back that colour (to 1 code per 8
    bits)."""
    scale = (top + 1) // 256
    frames = [_planes(v * scale, (8, 12), chroma, dtype, 120 * scale, 136 * scale) for v in (60, 60, 120, 120)]
    stats, out = _run_pipe(_stream(frames, colour, tags="Ip A4:3 XCOLORRANGE=LIMITED"), blend_interpolator, factor=2)
    header, payloads = _split(out)
    assert header == f"YUV4MPEG2 W12 H8 F50:1 Ip A4:3 XCOLORRANGE=LIMITED {colour}".encode()
    assert stats["frames_out"] == 8 == len(payloads)
    for i, planes in enumerate(frames):
        assert payloads[2 * i] == b"".join(p.tobytes() for p in planes)
    between = np.frombuffer(payloads[1], dtype).astype(int)  # frames 0 and 1 are equal: t = 0.5 is that frame
    original = np.frombuffer(payloads[0], dtype).astype(int)
    assert np.abs(between - original).max() <= scale


def test_fps_conversion_and_slow_motion_count_as_for_files(blend_interpolator):
    frames = [_planes(16 + 20 * i, (8, 12), (4, 6), "u1", 128, 128) for i in range(10)]
    stats, out = _run_pipe(_stream(frames, rate="25:1"), blend_interpolator, fps=Fraction(60))
    assert _split(out)[0].split()[3] == b"F60:1"
    assert stats["frames_out"] == len(_split(out)[1]) == 24  # 10 frames at 25 fps last 0.4 s: 24 at 60 fps
    stats, out = _run_pipe(_stream(frames, rate="30000:1001"), blend_interpolator, factor=3, slowmo=True)
    assert _split(out)[0].split()[3] == b"F30000:1001" and len(_split(out)[1]) == 30


def test_a_cut_is_copied_not_interpolated(blend_interpolator):
    dark = [_planes(20, (8, 12), (4, 6), "u1", 128, 128) for _ in range(4)]
    bright = [_planes(230, (8, 12), (4, 6), "u1", 128, 128) for _ in range(4)]
    stats, out = _run_pipe(_stream(dark + bright), blend_interpolator, factor=2)
    payloads = _split(out)[1]
    assert stats["cuts"] == 1 and len(payloads) == 16
    originals = [b"".join(p.tobytes() for p in planes) for planes in dark + bright]
    assert payloads[7] in originals  # the frame between the shots is one of them, not a blend
    assert len(blend_interpolator.calls) == 6  # 7 pairs, the one across the cut not interpolated


def test_a_truncated_stream_ends_the_output_at_whole_frames_and_says_so(blend_interpolator):
    frames = [_planes(16 + 20 * i, (8, 12), (4, 6), "u1", 128, 128) for i in range(5)]
    stream = _stream(frames)
    sink = io.BytesIO()
    with pytest.raises(Y4MError, match=r"ended inside frame 4 .* output ends after 8 frames, interpolated from the 4 "):
        interpolate_pipe(io.BytesIO(stream[:-10]), sink, blend_interpolator, VideoOptions(factor=2), progress=False)
    assert len(_split(sink.getvalue())[1]) == 8


@pytest.mark.parametrize("stream, message", [
    (b"", "not a YUV4MPEG2 stream"), (b"RIFF....", "not a YUV4MPEG2 stream"),
    (b"YUV4MPEG2 W12 H8 F25:1 Cmono\n", "Cmono is not supported"),
    (b"YUV4MPEG2 W12 H8 C420\n", "needs a frame size and a frame rate"),
    (b"YUV4MPEG2 W12 H8 F25:1 C420\n", "holds no frames")])
def test_streams_it_cannot_read_are_named(stream, message, blend_interpolator):
    with pytest.raises(Y4MError, match=message):
        _run_pipe(stream, blend_interpolator)


def _cli(stdin: bytes, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), "--video", "-", "--model", "fast", *args],
                          input=stdin, capture_output=True, cwd=ROOT)


@pytest.mark.parametrize("stream, args, message", [
    (b"", [], "standard input: empty, not a YUV4MPEG2 stream (nothing came"),
    (np.random.default_rng(0).bytes(1000), [], "standard input: not a YUV4MPEG2 stream"),
    (b"not a video\n", [], "standard input: not a YUV4MPEG2 stream"),
    (b"YUV4MPEG2 W12 H8 F25:1 Cmono\n", [], "chroma layout Cmono is not supported"),
    (b"YUV4MPEG2 W12 H8 C420\n", [], "needs a frame size and a frame rate"),
    (b"YUV4MPEG2 W12 H8 F25:1 C420\n", [], "standard input: the stream holds no frames"),
    (b"YUV4MPEG2 W12 H8 F25:1 C420\nGARBAGE", [], "frame 0 has no FRAME marker"),
    (b"YUV4MPEG2 W12 H8 F25:1 C420\n", ["--factor", "5000"], "--factor 5000: at most 1000 output frames"),
])
def test_the_cli_names_a_stream_it_cannot_read_before_torch_loads(stream, args, message):
    """Each of these was one clear line, but only after torch and the network had loaded (7-84 s): the header,
    and whether a frame follows it, are read first."""
    script = ("import sys, run\n"
              "code = run.main(sys.argv[1:])\n"
              "print('exit', code, 'torch' in sys.modules, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", script, "--video", "-", "--out", "-", *args], input=stream,
                          capture_output=True, cwd=ROOT, timeout=60)
    *said, last = proc.stderr.decode().splitlines()
    assert last == "exit 2 False" and proc.stdout == b"", proc.stderr
    assert len(said) == 1 and said[0].startswith("error: ") and message in said[0], said


def _main(stdin: bytes, monkeypatch, capsys, *args: str) -> Tuple[int, bytes, str]:
    """``run.main`` as ``run.py --video - --model fast ARGS`` runs it, in this process (a process of its own costs
    seconds of imports), on ``stdin``'s bytes: its exit code, what it wrote on stdout and on stderr."""
    import run

    sink = io.BytesIO()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(sink, write_through=True))
    code = run.main(["--video", "-", "--model", "fast", *args])
    sys.stdout.flush()
    return code, sink.getvalue(), capsys.readouterr().err


def test_the_cli_says_a_truncated_stream_in_one_line_and_exits_non_zero(monkeypatch, capsys):
    stream = _testsrc(4, "yuv420p")
    code, out, err = _main(stream[:-100], monkeypatch, capsys, "--out", "-")
    assert code == 2 and "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        "error: standard input: the stream ended inside frame 3 (4508 of its 4608 bytes): was the program writing it "
        "stopped?; the output ends after 6 frames, interpolated from the 3 whole frames read"]
    assert len(_split(out)[1]) == 6


def test_the_cli_says_a_closed_output_pipe_in_one_line_and_exits_non_zero():
    stream = _testsrc(40, "yuv420p")
    tool = subprocess.Popen([sys.executable, str(ROOT / "run.py"), "--video", "-", "--out", "-", "--model", "fast"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)

    def feed() -> None:
        try:
            tool.stdin.write(stream)
            tool.stdin.close()
        except BrokenPipeError:  # the tool stopped reading
            pass

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    tool.stdout.read(10)  # the header's start, then the reader leaves
    tool.stdout.close()
    err = tool.stderr.read().decode()
    feeder.join(timeout=60)
    assert tool.wait(timeout=60) == 1 and "Traceback" not in err and "Exception ignored" not in err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        "error: the output pipe was closed by the program reading it (nothing more could be written)"]


def test_the_cli_refuses_a_pipe_into_a_file():
    proc = _cli(_testsrc(2, "yuv420p"), "--out", "out.mp4")
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode().startswith("error: --video - reads a YUV4MPEG2 stream and writes one: use --out -")


def test_the_original_bytes_are_found_while_the_prefetch_thread_decodes():
    """The input frames are decoded in the prefetch thread, which appends to the reader's recent originals while
    the writing side looks a frame up there: iterating the deque itself raised "deque mutated during iteration"
    (seen 1466 times in 200000 lookups with thread switches forced every microsecond)."""
    from softsplat_vfi.pipeline.pipe import _Reader

    reader = _Reader(io.BytesIO(), None)
    frames = [np.zeros(1) for _ in range(64)]
    stop = threading.Event()

    def decode() -> None:
        i = 0
        while not stop.is_set():
            reader.originals.append((frames[i % 64], bytes([i % 64])))
            i += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    worker = threading.Thread(target=decode)
    worker.start()
    try:
        found = [reader.original(frames[k % 64]) for k in range(50000)]
    finally:
        stop.set()
        worker.join()
        sys.setswitchinterval(interval)
    assert all(data in (b"", bytes([k % 64])) for k, data in enumerate(found))
    assert any(found)


@pytest.mark.parametrize("depth", [8, 10])
@pytest.mark.parametrize("full_range", [False, True])
def test_saturated_colours_convert_to_the_samples_the_formulas_give(depth, full_range):
    """Pure colours at both ends of the range, through rgb16_to_yuv and back: each plane within one step of what
    the BT.709 formulas give, rounded and clipped (in full range pure blue's Cb and pure red's Cr land half a step
    above the depth's top and must stay at the top, not wrap to 0), and back within one step of the depth."""
    from softsplat_vfi.media.y4m import frame_planes, rgb16_to_yuv, yuv_to_rgb16

    colour = "420jpeg" if depth == 8 else f"420p{depth}"
    line = f"YUV4MPEG2 W1280 H720 F25:1 Ip C{colour}{' XCOLORRANGE=FULL' if full_range else ''}\n".encode()
    header = parse_header(line, "test")
    top = (1 << depth) - 1
    black, span, cspan = (0, top, top) if full_range else (16 << (depth - 8), 219 << (depth - 8), 224 << (depth - 8))
    mid = 1 << (depth - 1)
    kr, kb = 0.2126, 0.0722
    for rgb in ((0, 0, 0), (1, 1, 1), (0, 0, 1), (1, 0, 0), (0, 1, 0), (1, 1, 0), (0, 1, 1)):
        r, g, b = rgb
        luma = kr * r + (1 - kr - kb) * g + kb * b
        expected = [min(max(round(x), 0), top) for x in (black + span * luma, mid + cspan * (b - luma) / (2 - 2 * kb),
                                                         mid + cspan * (r - luma) / (2 - 2 * kr))]
        frame = np.empty((720, 1280, 3), np.uint16)
        frame[:] = np.array(rgb, np.uint16) * 65535
        y, u, v = frame_planes(rgb16_to_yuv(frame, header), header)
        got = [int(y[0, 0]), int(u[0, 0]), int(v[0, 0])]
        # within one step: some of these fall exactly halfway (cyan's Cr is 0.5 in full range 8-bit)
        assert all(abs(a - b) <= 1 for a, b in zip(got, expected)), (rgb, got, expected)
        assert all(len(np.unique(p)) == 1 for p in (y, u, v))
        back = yuv_to_rgb16(rgb16_to_yuv(frame, header), header).astype(np.int64)
        assert np.abs(back - frame).max() <= 65535 / top * 1.5


class _GatedSink(io.BytesIO):
    """A sink whose second frame's write (the first interpolated one at x2) waits up to ``patience`` seconds for
    ``event``, and records whether it came."""

    def __init__(self, event: threading.Event, patience: float) -> None:
        super().__init__()
        self.event, self.patience = event, patience
        self.frames = 0
        self.overlapped = None

    def write(self, data: bytes) -> int:
        if data.startswith(b"FRAME"):
            self.frames += 1
            if self.frames == 2:
                self.overlapped = self.event.wait(self.patience)
        return super().write(data)


def test_frames_are_converted_and_written_behind_the_interpolator(blend_interpolator, monkeypatch):
    """Output frame 1 (interpolated) is written while the next pair is interpolated: its write waits for the
    interpolator's second call, which a pipe writing on the interpolator's thread could not make meanwhile. The
    bytes are those of the pipe writing each frame as it is made."""
    second_call = threading.Event()
    calls = []

    class Counting:
        def interpolate_integer(self, one, two, times):
            calls.append(times)
            if len(calls) == 2:
                second_call.set()
            return blend_interpolator.interpolate_integer(one, two, times)

    stream = _testsrc(6, "yuv420p")
    sink = _GatedSink(second_call, patience=20.0)
    interpolate_pipe(io.BytesIO(stream), sink, Counting(), VideoOptions(factor=2), progress=False)
    assert sink.overlapped is True and len(calls) == 5
    import softsplat_vfi.pipeline.pipe

    monkeypatch.setattr(softsplat_vfi.pipeline.pipe, "WriteBehind", InlineWriter)
    _, serial = _run_pipe(stream, blend_interpolator, factor=2)
    assert sink.getvalue() == serial and sink.frames == len(_split(serial)[1]) == 12


def test_a_pipe_runs_opencv_on_its_callers_threads(blend_interpolator):
    """OpenCV's own thread pool is set to one thread when a pipe starts: the pipe's threads convert side by side,
    and the pool beside them cost a core for nothing (F75)."""
    import cv2

    cv2.setNumThreads(3)
    try:
        frames = [_planes(16 + 20 * i, (8, 12), (4, 6), "u1", 128, 128) for i in range(3)]
        _run_pipe(_stream(frames), blend_interpolator)
        assert cv2.getNumThreads() == 1
    finally:
        cv2.setNumThreads(1)  # (conftest's setting for every test)
