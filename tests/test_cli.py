"""run.py (pair mode) and benchmark_middlebury.py end to end on small generated images, on the CPU."""

import dataclasses
import json
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

import benchmark_middlebury
import run

ROOT = Path(__file__).resolve().parent.parent


def _pair(tmp_path, h=37, w=53, channels=3, dtype=np.uint8, suffix=".png"):
    rng = np.random.default_rng(0)
    top = 255 if dtype == np.uint8 else 65535
    base = rng.integers(0, top, size=(h, w + 4, channels) if channels > 1 else (h, w + 4), dtype=dtype)
    base = cv2.GaussianBlur(base, (5, 5), 0)
    one, two = tmp_path / f"one{suffix}", tmp_path / f"two{suffix}"
    cv2.imwrite(str(one), base[:, :w])
    cv2.imwrite(str(two), base[:, 4:])
    return one, two


def _run(args, capsys):
    code = run.main([str(a) for a in args] + ["--device", "cpu"])
    out, err = capsys.readouterr()
    return code, out, err


def test_pair_gives_frame_of_same_size(tmp_path, capsys):
    one, two = _pair(tmp_path)
    out = tmp_path / "mid.png"
    code, stdout, _ = _run(["--one", one, "--two", two, "--out", out], capsys)
    assert code == 0 and "wrote" in stdout
    img = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    assert img.shape == (37, 53, 3) and img.dtype == np.uint8
    assert not list(tmp_path.glob(".tmp-*"))


def test_a_users_file_at_a_pairs_out_is_kept_unless_overwrite(tmp_path, capsys, monkeypatch):
    """Pair mode replaced an unrelated file at --out without a word, and refused --overwrite. Now as for videos:
    the file is kept and the job refused in one line naming --overwrite (-y), before the network loads; -y
    replaces it; a rerun replaces the program's own output, until anyone changes it."""
    import softsplat_vfi.engine.interpolator
    from softsplat_vfi.engine.files import interpolate_files
    from softsplat_vfi.media.files import OutputError

    one, two = _pair(tmp_path)
    out = tmp_path / "mid.png"
    out.write_bytes(b"the user's")
    with monkeypatch.context() as patched:
        patched.setattr(softsplat_vfi.engine.interpolator, "Interpolator",
                        lambda *a, **k: pytest.fail("the network was loaded"))
        code, _, err = _run(["--one", one, "--two", two, "--out", out], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err == f"error: {out} exists, and this program did not write it: it is kept -- choose another --out " \
                  f"name, or add --overwrite (-y) to replace it (nothing was interpolated yet)\n"
    assert out.read_bytes() == b"the user's"
    assert _run(["--one", one, "--two", two, "--out", out, "-y"], capsys)[0] == 0
    assert cv2.imread(str(out)).shape == (37, 53, 3)
    assert _run(["--one", one, "--two", two, "--out", out, "--time", 0.25], capsys)[0] == 0  # its own: replaced
    with out.open("ab") as f:
        f.write(b"\0")  # changed since: no longer the program's
    with pytest.raises(OutputError, match="did not write it: it is kept"):
        interpolate_files(one, two, out, [0.5], "not loaded")
    assert _run(["--one", one, "--two", two, "--out", out, "--overwrite"], capsys)[0] == 0


def _black_png(path, width, height, rows=100):
    """A valid RGB PNG of black pixels, small on disk however large: its zlib stream is one deflate block of
    ``rows`` rows, repeated (each ends in a full flush, so none refers to another), with the Adler-32 of all-zero
    data, (n mod 65521) << 16 | 1."""
    row = bytes(1 + 3 * width)  # filter type 0, then black pixels
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = deflate.compress(row * rows) + deflate.flush(zlib.Z_FULL_FLUSH)
    adler = (len(row) * height % 65521) << 16 | 1
    stream = b"\x78\xda" + block * (height // rows) + b"\x03\x00" + adler.to_bytes(4, "big")  # (03 00: the last block)

    def chunk(kind, data):
        return len(data).to_bytes(4, "big") + kind + data + zlib.crc32(kind + data).to_bytes(4, "big")

    header = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 2, 0, 0, 0])  # 8-bit RGB
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", stream) + chunk(b"IEND", b""))
    return path


def test_a_pair_too_large_for_memory_is_refused_before_any_allocation(tmp_path, capsys, monkeypatch):
    """A valid 20000 x 20000 PNG pair (1.2 MB each) ended in numpy's 17-line _ArrayMemoryError after 58 s on a
    24 GB machine. Its header says its size: the pair is refused in one line before it is decoded, where what it
    takes (engine.files.pair_memory: whole frames are held, so tiles cannot help) exceeds the memory free."""
    import softsplat_vfi.engine.files
    import softsplat_vfi.engine.interpolator
    import softsplat_vfi.media.images

    small = cv2.imread(str(_black_png(tmp_path / "small.png", 48, 300)), cv2.IMREAD_UNCHANGED)
    assert small.shape == (300, 48, 3) and not small.any()  # the helper's PNGs decode
    one, two = (_black_png(tmp_path / name, 20000, 20000) for name in ("one.png", "two.png"))
    assert one.stat().st_size < 2 * 10**6 and softsplat_vfi.media.images.image_size(one) == (20000, 20000)
    assert softsplat_vfi.engine.files.pair_memory(20000, 20000) > 24 * 10**9  # more than that machine had
    # 60 bytes a pixel: what the pair path took, measured (61 a pixel between 1200 x 1200 and 2400 x 2400)
    pair_memory = softsplat_vfi.engine.files.pair_memory
    assert pair_memory(2400, 2400) - pair_memory(1200, 1200) == 60 * (2400**2 - 1200**2)
    assert pair_memory(100, 100, outputs=3, alpha=True) > pair_memory(100, 100)
    with monkeypatch.context() as patched:
        patched.setattr(softsplat_vfi.engine.files, "memory_available", lambda: 16 * 2**30)
        patched.setattr(softsplat_vfi.media.images, "read_image", lambda path: pytest.fail("decoded"))
        patched.setattr(softsplat_vfi.engine.interpolator, "Interpolator",
                        lambda *a, **k: pytest.fail("the network was loaded"))
        code, _, err = _run(["--one", one, "--two", two, "--out", tmp_path / "mid.png"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: {one} is 20000x20000: interpolating a pair that size takes at least 22.9 GiB of "
                          f"memory, 16.0 GiB is free (whole frames are held; --tile bounds only the network's share) "
                          f"-- scale the frames down first"), err
    # a format whose header is not read (WebP) is sized once decoded, before the network loads
    webp = _pair(tmp_path, suffix=".webp")
    monkeypatch.setattr(softsplat_vfi.engine.files, "memory_available", lambda: 0)
    monkeypatch.setattr(softsplat_vfi.engine.interpolator, "Interpolator",
                        lambda *a, **k: pytest.fail("the network was loaded"))
    code, _, err = _run(["--one", webp[0], "--two", webp[1], "--out", tmp_path / "mid.png"], capsys)
    assert code == 2 and err.startswith(f"error: {webp[0]} is 53x37: ") and err.count("\n") == 1, err
    assert not (tmp_path / "mid.png").exists()


def test_ensemble_mode_writes_a_close_frame(tmp_path, capsys):
    one, two = _pair(tmp_path)
    single, ensembled = tmp_path / "single.png", tmp_path / "ens.png"
    assert _run(["--one", one, "--two", two, "--out", single], capsys)[0] == 0
    assert _run(["--one", one, "--two", two, "--out", ensembled, "--ensemble", 4], capsys)[0] == 0
    a = cv2.imread(str(single)).astype(np.float32)
    b = cv2.imread(str(ensembled)).astype(np.float32)
    # the same network averaged over its mirrored and reversed passes: close, and not the identical frame
    assert a.shape == b.shape and 0 < np.abs(a - b).mean() < 4.0
    with pytest.raises(SystemExit):
        run.main(["--one", str(one), "--two", str(two), "--out", str(ensembled), "--ensemble", "3"])


def test_several_times_and_name_pattern(tmp_path, capsys):
    one, two = _pair(tmp_path)
    code, _, _ = _run(["--one", one, "--two", two, "--out", tmp_path / "f_{i}.png", "--time", 0.25, 0.5, 0.75], capsys)
    assert code == 0
    assert sorted(p.name for p in tmp_path.glob("f_*.png")) == ["f_0.png", "f_1.png", "f_2.png"]


def test_16_bit_rgba_and_gray_inputs(tmp_path, capsys):
    one, two = _pair(tmp_path, channels=4, dtype=np.uint16)
    out = tmp_path / "mid16.png"
    assert _run(["--one", one, "--two", two, "--out", out], capsys)[0] == 0
    img = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    assert img.dtype == np.uint16 and img.shape[2] == 4
    gray_dir = tmp_path / "gray"
    gray_dir.mkdir()
    one, two = _pair(gray_dir, channels=1)
    assert _run(["--one", one, "--two", two, "--out", gray_dir / "mid.jpg"], capsys)[0] == 0


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_a_grey_pair_gives_a_grey_frame(tmp_path, capsys, dtype):
    """A grey PNG pair came out RGB, its channels up to 5 levels apart (the network's three outputs): now grey, one
    channel, at the inputs' depth."""
    one, two = _pair(tmp_path, channels=1, dtype=dtype)
    out = tmp_path / "mid.png"
    assert _run(["--one", one, "--two", two, "--out", out], capsys)[0] == 0
    mid = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    assert mid.shape == (37, 53) and mid.dtype == dtype
    a, b = (cv2.imread(str(p), cv2.IMREAD_UNCHANGED).astype(np.float64) for p in (one, two))
    assert np.abs(mid - (a + b) / 2).mean() < np.abs(a - b).mean()  # a frame between them, not another picture


def _moving_sprite(folder, xs, size=(96, 128)):
    """BGRA images of one textured, opaque 32 x 32 square at each x of ``xs`` over a transparent background."""
    texture = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    paths = []
    for i, x in enumerate(xs):
        img = np.zeros((*size, 4), np.uint8)
        img[32:64, x:x + 32, :3] = texture
        img[32:64, x:x + 32, 3] = 255
        paths.append(folder / f"{i:04d}.png")
        cv2.imwrite(str(paths[-1]), img)
    return paths


def _opaque_iou(alpha, x, size=(96, 128)):
    """Overlap of the alpha's nearly opaque part (over 75%) with the square at ``x``."""
    expected = np.zeros(size, bool)
    expected[32:64, x:x + 32] = True
    shown = alpha > 191
    return (shown & expected).sum() / (shown | expected).sum()


def test_alpha_moves_with_the_flow(tmp_path, capsys):
    """A transparent sprite moving 20 px: the middle frame's alpha is one square halfway (trained weights), not the
    two half-transparent squares a linear mix gives (whose overlap with the halfway square is 0.38); with
    --ensemble or --alpha linear the alpha is mixed linearly; --frames moves it the same way, or mixes it."""
    one, two = _moving_sprite(tmp_path, (30, 50))
    out = tmp_path / "mid.png"
    assert _run(["--one", one, "--two", two, "--out", out], capsys)[0] == 0
    mid = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)
    assert mid.shape == (96, 128, 4) and _opaque_iou(mid[:, :, 3], 40) > 0.9
    for option in (["--ensemble", "2"], ["--alpha", "linear"]):
        assert _run(["--one", one, "--two", two, "--out", out, *option], capsys)[0] == 0
        mixed = cv2.imread(str(out), cv2.IMREAD_UNCHANGED)[:, :, 3]
        assert np.abs(mixed[40, 35].astype(int) - 128) <= 1 and _opaque_iou(mixed, 40) < 0.5, option
    frames, outdir = tmp_path / "frames", tmp_path / "out"
    frames.mkdir()
    outdir.mkdir()
    _moving_sprite(frames, (30, 50, 70))
    code, stdout, _ = _run(["--frames", frames, "--input-fps", "10", "--factor", "2", "--scene-threshold", "0",
                            "--out", outdir / "%04d.png"], capsys)
    assert code == 0 and "alpha kept" in stdout
    for j, x in ((1, 40), (3, 60)):
        assert _opaque_iou(cv2.imread(str(outdir / f"{j:04d}.png"), cv2.IMREAD_UNCHANGED)[:, :, 3], x) > 0.9
    linear = tmp_path / "linear"
    linear.mkdir()
    assert _run(["--frames", frames, "--input-fps", "10", "--factor", "2", "--scene-threshold", "0", "--alpha",
                 "linear", "--out", linear / "%04d.png"], capsys)[0] == 0
    assert _opaque_iou(cv2.imread(str(linear / "0001.png"), cv2.IMREAD_UNCHANGED)[:, :, 3], 40) < 0.5


def test_identical_frames_interpolate_to_nearly_the_frame(tmp_path, capsys):
    one, _ = _pair(tmp_path)
    out = tmp_path / "same.png"
    assert _run(["--one", one, "--two", one, "--out", out], capsys)[0] == 0
    a = cv2.imread(str(one)).astype(np.float32)
    b = cv2.imread(str(out)).astype(np.float32)
    # trained weights: no motion means no change, up to a few grey levels
    assert np.abs(a - b).mean() < 4.0


@pytest.mark.parametrize("case", ["missing", "corrupt", "sizes", "empty_file", "out_folder", "in_ext", "out_ext",
                                  "bad_time", "bad_device", "too_many_times", "one_is_a_folder", "out_is_a_folder",
                                  "out_is_stdout"])
def test_user_errors_exit_cleanly(tmp_path, capsys, case):
    one, two = _pair(tmp_path)
    out = tmp_path / "mid.png"
    args = ["--one", one, "--two", two, "--out", out]
    if case == "missing":
        args[1] = tmp_path / "nope.png"
    elif case == "corrupt":
        bad = tmp_path / "bad.png"
        bad.write_bytes(b"\x89PNG not really")
        args[1] = bad
    elif case == "sizes":
        other = tmp_path / "other.png"
        cv2.imwrite(str(other), np.zeros((20, 30, 3), np.uint8))
        args[3] = other
    elif case == "empty_file":
        empty = tmp_path / "empty.png"
        empty.write_bytes(b"")
        args[1] = empty
    elif case == "out_folder":
        out = tmp_path / "no" / "such" / "mid.png"
        args[5] = out
    elif case == "in_ext":
        weird = tmp_path / "one.xyz"
        shutil.copy(one, weird)
        args[1] = weird
    elif case == "out_ext":
        out = tmp_path / "mid.xyz"
        args[5] = out
    elif case == "bad_time":
        args += ["--time", "1.5"]
    elif case == "bad_device":
        args += ["--device", "tpu"]
    elif case == "too_many_times":  # an image each: bounded, as a video's --factor is
        args += ["--time", *[f"{(k + 1) / 1002:.6f}" for k in range(1001)]]
    elif case in ("one_is_a_folder", "out_is_a_folder"):  # both said "unsupported extension ''"
        (tmp_path / "dir").mkdir()
        args[1 if case == "one_is_a_folder" else 5] = tmp_path / "dir"
    elif case == "out_is_stdout":
        args[5] = "-"
    code = run.main([str(a) for a in args] + ([] if case == "bad_device" else ["--device", "cpu"]))
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    said = {"too_many_times": "--time: 1001 times, more than the 1000",
            "one_is_a_folder": f"{tmp_path / 'dir'} is a folder, not an image file: name an image in it, or read the "
                               f"folder as frames with --frames",
            "out_is_a_folder": f"{tmp_path / 'dir'} is a folder: name an image file in it, such as",
            "out_is_stdout": "--out -: images are written to files: name one, such as mid.png"}
    assert said.get(case, "") in err, err
    assert not out.exists()
    assert not list(out.parent.glob(".tmp-*")) if out.parent.exists() else True


def test_weights_and_device_mistakes_are_said_before_the_network_loads(tmp_path, capsys, monkeypatch):
    """A garbage --weights file and --device cuda on a machine without a GPU were found once torch and the network
    had loaded (7-60 s): the file's first bytes and the GPU drivers' device files say so at once."""
    import softsplat_vfi.engine.options
    from safetensors.numpy import save_file

    one, two = _pair(tmp_path)
    out = tmp_path / "mid.png"
    (tmp_path / "noise.safetensors").write_bytes(np.random.default_rng(0).bytes(100))
    (tmp_path / "text.pth").write_text("not a checkpoint\n")
    save_file({"x": np.zeros(2, np.float32)}, str(tmp_path / "other.safetensors"))  # no network config
    for name, words in (("noise.safetensors", "not a safetensors weights file (no header)"),
                        ("text.pth", "not a PyTorch checkpoint (neither a zip nor a pickle)"),
                        ("other.safetensors", "a safetensors file without this project's network config")):
        code, _, err = _run(["--one", one, "--two", two, "--out", out, "--weights", tmp_path / name], capsys)
        assert code == 2 and err.count("\n") == 1 and "loading" not in err, err
        assert err.startswith(f"error: --weights {tmp_path / name}: {words}"), err
        assert " -- pass a file written by train.py (weights/network.safetensors, " in err, err
    monkeypatch.setattr(softsplat_vfi.engine.options, "GPU_DEVICE_FILES", (str(tmp_path / "no-driver"),))
    for device in ("cuda", "cuda:1"):
        code = run.main(["--one", str(one), "--two", str(two), "--out", str(out), "--device", device])
        err = capsys.readouterr().err
        assert code == 2 and err == f"error: --device {device}: this machine has no CUDA GPU (no NVIDIA, ROCm or WSL " \
                                    f"GPU driver found) -- use --device cpu, or auto\n", err
    assert not out.exists()


@pytest.mark.parametrize("allocate, words", [
    (lambda: np.empty((200000, 200000, 3), np.float32), "for an array with shape (200000, 200000, 3)"),
    (lambda: torch.empty(10**14), "you tried to allocate 400000000000000 bytes"),
])
def test_running_out_of_memory_is_one_line(tmp_path, capsys, monkeypatch, allocate, words):
    """A valid 20000 x 20000 PNG pair on a 24 GB machine ended in numpy's 17-line _ArrayMemoryError traceback."""
    import softsplat_vfi.engine.files

    def interpolate_files(*args, **kwargs):
        allocate()

    monkeypatch.setattr(softsplat_vfi.engine.files, "interpolate_files", interpolate_files)
    one, two = _pair(tmp_path)
    code, _, err = _run(["--one", one, "--two", two, "--out", tmp_path / "mid.png"], capsys)
    assert code == 1 and err.count("\n") == 1 and err.startswith("error: not enough memory (") and words in err, err
    assert err.rstrip().endswith("scale them down first, try a smaller --tile (e.g. --tile 512), or free some memory")
    monkeypatch.setattr(softsplat_vfi.engine.files, "interpolate_files", lambda *a, **k: torch.zeros(2).view(3))
    with pytest.raises(RuntimeError, match="invalid for input of size"):  # other errors are not taken for it
        _run(["--one", one, "--two", two, "--out", tmp_path / "mid.png"], capsys)


def test_cli_subprocess_reports_one_line_and_no_traceback(tmp_path):
    """A pair-mode mistake and --help answer without importing torch (over a second; they took 3 s on 2 cores)."""
    mistake = [str(ROOT / "run.py"), "--one", str(tmp_path / "a.png"), "--two", str(tmp_path / "b.png"), "--out",
               str(tmp_path / "c.png"), "--device", "cpu"]
    proc = subprocess.run([sys.executable, *mistake], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    for args, code in ((mistake, 2), ([str(ROOT / "run.py"), "--help"], 0)):
        proc = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True,
                              cwd=tmp_path)
        imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "import time" in line]
        assert proc.returncode == code and "numpy" in imported and "torch" not in imported, args[1:]


def test_help_names_each_default_once(capsys):
    with pytest.raises(SystemExit) as info:
        run.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert info.value.code == 0 and "(default: None)" not in text and "(default 2) (default" not in text
    assert "(default: False)" not in text  # (on the switches: --slowmo, --fields, --overwrite, --no-space-check)
    assert "(default 2)" in text and "(default: auto)" in text and "(default: 0.12)" in text


@pytest.mark.parametrize("argv", [["--time", "abc"], ["--one", "a.png"], ["--ensemble", "3"], ["--video"]])
def test_usage_mistakes_are_one_line(argv, capsys):
    """argparse printed its 13-line usage before the error."""
    with pytest.raises(SystemExit) as info:
        run.main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert err.rstrip().endswith("(python run.py --help lists the options)")


@pytest.mark.parametrize("argv, words", [
    (["--video", "in.mp4", "--one", "a.png", "--out", "o.mp4"], "--one: it applies to a pair of images, not to "
                                                               "--video or --frames"),
    (["--frames", "dir", "--one", "a.png", "--two", "b.png", "--time", "0.3", "--out", "o/%06d.png"],
     "--one, --two, --time: they apply to a pair of images"),
    (["--video", "in.mp4", "--input-fps", "30", "--out", "o.mp4"], "--input-fps is the frame rate of --frames input"),
    (["--one", "a.png", "--two", "b.png", "--out", "m.png", "--factor", "4", "--crf", "20"],
     "--factor, --crf: they apply to --video and --frames, not to a pair of images (--one, --two): leave them out"),
])
def test_options_the_mode_would_ignore_are_refused(argv, words, capsys):
    """--one/--two beside --video were ignored without a word; so were a pair's video options."""
    with pytest.raises(SystemExit) as info:
        run.main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.startswith(f"error: {words}") and err.count("\n") == 1, err


def test_importing_run_has_no_side_effects():
    code = "import run, sys; print(sorted(m for m in sys.modules if m.startswith('model')))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]"


def test_published_estimate_api():
    g = torch.Generator().manual_seed(0)
    one = torch.rand(3, 33, 47, generator=g)
    outs = run.estimate(one, one.roll(2, dims=2), [0.3, 0.7])
    assert len(outs) == 2
    for out in outs:
        assert out.shape == (3, 33, 47) and out.device.type == "cpu"
        assert 0.0 <= float(out.min()) and float(out.max()) <= 1.0


def test_api_rejects_nan_and_empty(cpu_interpolator):
    frame = np.zeros((16, 16, 3), np.float32)
    with pytest.raises(ValueError, match="NaN"):
        cpu_interpolator(frame * np.nan, frame)
    with pytest.raises(ValueError, match="empty"):
        cpu_interpolator(np.zeros((0, 16, 3), np.float32), np.zeros((0, 16, 3), np.float32))


def _middlebury_folder(root: Path, names=("Alpha", "Beta"), shift=6) -> Path:
    """Middlebury's layout (<Sequence>/frame10.png, frame11.png, frame10i11.png) over a smooth texture moving
    ``shift`` pixels to the left, the true middle frame halfway."""
    rng = np.random.default_rng(3)
    for name in names:
        texture = cv2.GaussianBlur(rng.integers(0, 256, (48, 80 + shift, 3), dtype=np.uint8), (7, 7), 0)
        (root / name).mkdir(parents=True)
        for file, x in (("frame10.png", 0), ("frame10i11.png", shift // 2), ("frame11.png", shift)):
            cv2.imwrite(str(root / name / file), texture[:, x:x + 80])
    return root


def test_middlebury_benchmark_on_two_sequences(tmp_path):
    from skimage.metrics import peak_signal_noise_ratio

    data = _middlebury_folder(tmp_path / "mb")
    out = tmp_path / "result.json"
    assert benchmark_middlebury.main(["--data", str(data), "--device", "cpu", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [r["sequence"] for r in result["sequences"]] == ["Alpha", "Beta"]
    assert result["ensemble"] == 1 and result["device"] == "cpu" and result["compile"] is False
    # the committed weights beat a plain frame blend on both
    for row in result["sequences"]:
        a, b = (cv2.imread(str(data / row["sequence"] / f)).astype(np.float64) for f in ("frame10.png", "frame11.png"))
        truth = cv2.imread(str(data / row["sequence"] / "frame10i11.png"))
        blend = peak_signal_noise_ratio(truth, np.rint((a + b) / 2).astype(np.uint8), data_range=255)
        assert row["psnr"] > blend + 3, (row, blend)


def test_benchmarks_say_a_wrong_data_folder_before_the_network_loads(tmp_path, capsys, monkeypatch):
    """Middlebury's missing data was said once the network had loaded (7-63 s); Xiph's once torch had."""
    import benchmark_xiph
    import softsplat_vfi.engine.interpolator

    def loading(*args, **kwargs):
        raise AssertionError("the network was loaded")

    monkeypatch.setattr(softsplat_vfi.engine.interpolator, "Interpolator", loading)
    assert benchmark_middlebury.main(["--data", str(tmp_path), "--device", "cpu"]) == 2
    assert "no <Sequence>/frame10i11.png" in capsys.readouterr().err
    assert benchmark_middlebury.main(["--data", str(tmp_path / "missing"), "--device", "cpu"]) == 2
    assert "no <Sequence>/frame10i11.png" in capsys.readouterr().err  # one line, not a FileNotFoundError traceback
    for data in (tmp_path, tmp_path / "missing"):
        assert benchmark_xiph.main(["--data", str(data), "--device", "cpu"]) == 2
        assert capsys.readouterr().err.startswith("error: ")
    script = "import sys, benchmark_xiph; print(benchmark_xiph.main(sys.argv[1:]), 'torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", script, "--data", str(tmp_path / "missing")], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.stdout.split() == ["2", "False"] and proc.stderr.startswith("error: "), proc.stderr


def test_middlebury_benchmark_compile_flag_reaches_the_engine(tmp_path, capsys):
    """``--compile`` (run.py's flag, from the same declaration) scores the compiled network: on the CPU the engine
    refuses it with run.py's one line, before any frame."""
    data = _middlebury_folder(tmp_path / "mb", names=("Alpha",))
    assert benchmark_middlebury.main(["--data", str(data), "--device", "cpu", "--compile"]) == 2
    out, err = capsys.readouterr()
    assert "torch.compile needs the network on a CUDA device" in err and "Alpha" not in out


def test_tiled_interpolation_has_no_seams(cpu_network):
    """Tiles cross-fade: the tiled frame is close to the whole-frame one and has no step at tile borders."""
    from softsplat_vfi.model.inference import RunSettings, interpolate, tile_layout
    from scripts.diagnose.patterns import patterns

    net = cpu_network
    # the probe's smooth random texture moving 2 px, 300 x 200: not its stripes, which repeat, so a flow one period
    # off matches them too and the whole frame can go wrong where tiles do not (a flow limit, not a tiling one)
    one, _, two = patterns()["noise"]
    whole = interpolate(net, one, two, [0.5])[0]
    tiled = interpolate(net, one, two, [0.5], RunSettings(tile=128, overlap=32))[0]
    # 128-px tiles give the flow less context than the whole frame: measured mean difference 0.00110 with the
    # default weights (0.00082 with the fast ones), bound at 18% above; seams are checked below
    assert np.abs(whole - tiled)[8:-8, 8:-8].mean() < 0.0013
    # column differences where tiles start and end are no larger than elsewhere
    length, starts = tile_layout(300, 128, 32)
    assert length <= 128 and starts[0] == 0 and starts[-1] + length == 300
    assert all(b - a <= length - 32 for a, b in zip(starts, starts[1:]))  # neighbours share >= the overlap
    cols = np.abs(np.diff(tiled - whole, axis=1)).mean(axis=(0, 2))
    edges = ([x for s in starts[1:] for x in (s - 1, s)]
             + [x for s in starts[:-1] for x in (s + length - 2, s + length - 1)])
    assert cols[edges].max() < 3 * np.median(cols)  # measured 1.4x (default weights) and 1.8x (fast)
    with pytest.raises(ValueError, match="overlap"):
        interpolate(net, one, two, [0.5], RunSettings(tile=64, overlap=40))


def test_fit_tile_whole_frames_when_they_fit_else_largest_tiles():
    from softsplat_vfi.model.inference import fit_tile

    cpu, gpu, gib = torch.device("cpu"), torch.device("cuda"), 2**30
    assert fit_tile(2160, 3840, gpu, available=139 * gib) == 0  # 4K and 8K whole on an H200
    assert fit_tile(4320, 7680, gpu, available=139 * gib) == 0
    assert fit_tile(2160, 3840, cpu, available=22 * gib) == 0
    assert fit_tile(4320, 7680, cpu, available=22 * gib) == 4096  # 8K on a 24 GB machine: tiles
    assert fit_tile(4320, 7680, gpu, available=22 * gib) == 3072
    assert fit_tile(4320, 7680, gpu, available=1 * gib) == 512  # the smallest, tried anyway


def test_wider_networks_are_given_more_memory_per_pixel():
    """The default network (width 2) took 2.23x the fast one's memory per pixel (CPU, 1080p): a 4K pair on a 24 GB
    machine fitted whole with the fast network's figure but needs tiles with its own."""
    from softsplat_vfi.model.inference import fit_tile, memory_factor
    from softsplat_vfi.model.network import Network, NetworkConfig

    cpu, gib = torch.device("cpu"), 2**30
    assert memory_factor(Network(NetworkConfig())) == 1.0
    assert memory_factor(Network(NetworkConfig().widened(2))) == pytest.approx(2.23)
    assert memory_factor(Network(NetworkConfig().widened(0.5))) == 1.0  # narrower: the fast figure, to be safe
    assert memory_factor(object()) == 1.0  # no config (the published network): as before
    assert fit_tile(2160, 3840, cpu, available=22 * gib) == 0
    assert fit_tile(2160, 3840, cpu, available=22 * gib, factor=2.23) == 3072


def test_state_memory_is_what_a_flow_state_holds():
    """``state_memory`` (what quadratic motion's ``PairStates`` keeps per pair) equals the bytes of a real
    ``FlowState`` of padded frames, for the fast and the default network's configs."""
    from softsplat_vfi.model.inference import state_memory
    from softsplat_vfi.model.network import Network, NetworkConfig

    for config in (NetworkConfig(), NetworkConfig().widened(2)):
        net = Network(config).eval()
        with torch.no_grad():
            state = net.estimate_flow(*torch.rand(2, 1, 3, 64, 96))
        tensors = [state.one, state.two, state.flow_fwd, state.flow_bwd, state.metric_one, state.metric_two,
                   *state.feats_one, *state.feats_two]
        assert state_memory(45, 67, net) == sum(x.numel() * x.element_size() for x in tensors)
    assert state_memory(45, 67, object()) == 0


def test_auto_tile_engages_when_memory_is_short(tmp_path, monkeypatch, capsys):
    import softsplat_vfi.model.inference as inference

    monkeypatch.setattr(inference, "TILE_SIZES", (256, 128))
    monkeypatch.setattr(inference, "available_memory", lambda device: int(128 * 128 * 1100 * 1.5))
    one, two = _pair(tmp_path, h=160, w=200)  # needs more than the 128 x 128 that fits: 2 x 2 tiles
    out = tmp_path / "mid.png"
    code = run.main(["--one", str(one), "--two", str(two), "--out", str(out), "--device", "cpu",
                     "--tile-overlap", "16"])
    err = capsys.readouterr().err
    assert code == 0 and cv2.imread(str(out)).shape == (160, 200, 3)
    assert err.count("processing in 128-pixel tiles") == 1 and "200x160 frames" in err and "--tile 0" in err


def test_any_tile_size_works_without_naming_an_overlap(tmp_path, capsys):
    """--tile N alone: the overlap defaults to 128 px, or a quarter of a tile under 512 px (128 px tiles failed with
    "needs an overlap between 1 and 63 pixels" before); a named overlap still wins and is still checked."""
    from softsplat_vfi.engine import InterpolatorOptions

    assert [InterpolatorOptions().overlap_for(n) for n in (64, 128, 511, 512, 2048)] == [16, 32, 127, 128, 128]
    assert InterpolatorOptions(tile_overlap=40).overlap_for(128) == 40
    one, two = _pair(tmp_path, h=160, w=200)
    out = tmp_path / "mid.png"
    assert run.main(["--one", str(one), "--two", str(two), "--out", str(out), "--device", "cpu", "--tile", "128"]) == 0
    assert cv2.imread(str(out)).shape == (160, 200, 3)
    code = run.main(["--one", str(one), "--two", str(two), "--out", str(out), "--device", "cpu", "--tile", "128",
                     "--tile-overlap", "64"])
    assert code == 2 and "overlap between 1 and 63" in capsys.readouterr().err


def test_compile_needs_cuda(cpu_network):
    from softsplat_vfi.engine import Interpolator, InterpolatorOptions
    from softsplat_vfi.model.runtime import compile_network

    with pytest.raises(ValueError, match="^torch.compile needs the network on a CUDA device, and it is on cpu"):
        compile_network(cpu_network)
    # the engine names its field: compile (run.py says --compile: softsplat_vfi.engine.options.cli_message)
    with pytest.raises(ValueError, match="^compile=True: torch.compile needs the network on a CUDA device") as caught:
        Interpolator(InterpolatorOptions(compile=True), network=cpu_network)
    assert caught.value.field == "compile"


def test_compile_says_it_compiles(cpu_network, monkeypatch, caplog):
    """--compile's pause on the first pair is announced, as a note (logging, INFO: a command line shows it on
    stderr; the compile itself needs a GPU: here a stand-in)."""
    import logging

    import softsplat_vfi.model.runtime
    from softsplat_vfi.engine import Interpolator, InterpolatorOptions

    monkeypatch.setattr(softsplat_vfi.model.runtime, "compile_network", lambda net: net)
    with caplog.at_level(logging.INFO, logger="softsplat_vfi"):
        Interpolator(InterpolatorOptions(compile=True), network=cpu_network)
    assert "compile: the network compiles on the first pair" in caplog.text


def test_compile_needs_triton(monkeypatch):
    """Without Triton (torch builds that lack it) --compile stops before any work with a line naming the fix,
    instead of failing inside Inductor on the first pair."""
    import importlib.util

    from softsplat_vfi.model.runtime import check_compilable

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "triton" else real(name, *a))
    with pytest.raises(ValueError, match="pip install triton"):
        check_compilable(torch.device("cuda"))


def test_model_names_the_two_shipped_networks():
    """--model picks a file in weights/: the default network is the wider one with two flow passes below the
    coarsest level, `fast` the original size."""
    import run
    from softsplat_vfi.model.network import NetworkConfig
    from softsplat_vfi.model.weights import read_config

    parser = run.build_parser()
    default = run.interpolator_options(parser.parse_args(["--one", "a.png", "--two", "b.png", "--out", "m.png"]))
    fast = run.interpolator_options(parser.parse_args(["--one", "a.png", "--two", "b.png", "--out", "m.png",
                                                       "--model", "fast"]))
    assert Path(default.weights).name == "network.safetensors" and Path(fast.weights).name == "fast.safetensors"
    two_passes = dataclasses.replace(NetworkConfig().widened(2), flow_iterations=(1, 2, 2, 2))
    assert read_config(default.weights) == two_passes
    assert read_config(fast.weights) == NetworkConfig()
    message = "--model nope: there is no weights/nope.safetensors; use one of fast, network"
    with pytest.raises(ValueError, match=message):
        run.interpolator_options(parser.parse_args(["--one", "a.png", "--two", "b.png", "--out", "m.png",
                                                    "--model", "nope"]))


def test_flow_scale_defaults_to_the_weights_files_own():
    """Pairs, videos and frame sequences without --flow-scale run at the flow scale the weights file states, as the
    engine resolves it (``engine.interpolator.with_weights_defaults``): auto for the default network (it passed its
    held-out rules for two frames and along quadratic paths), by --model or by path, 1 for the fast one; a number
    or auto given is kept for all."""
    import run
    from softsplat_vfi.engine.interpolator import with_weights_defaults

    parser = run.build_parser()
    pair = ["--one", "a.png", "--two", "b.png", "--out", "m.png"]
    video = ["--video", "in.mp4", "--out", "out.mp4"]
    frames = ["--frames", "dir", "--out", "out-%04d.png"]

    def scale(argv):
        return with_weights_defaults(run.interpolator_options(parser.parse_args(argv))).flow_scale

    assert run.interpolator_options(parser.parse_args(pair)).flow_scale is None  # left to the weights
    assert scale(pair) == scale(video) == scale(frames) == "auto"
    assert scale(pair + ["--weights", "weights/network.safetensors"]) == "auto"  # by path as by name
    assert scale(pair + ["--flow-scale", "0.5"]) == 0.5
    assert scale(video + ["--flow-scale", "1"]) == 1.0
    assert scale(video + ["--model", "fast"]) == scale(pair + ["--model", "fast"]) == 1.0
    assert scale(pair + ["--weights", "weights/fast.safetensors", "--flow-scale", "auto"]) == "auto"


def test_precision_flags():
    """No flag leaves the precision to the engine (auto: bfloat16 for this project's networks on GPUs of compute
    capability 8.0 and up, float32 elsewhere); --fp32, --fp16 and --bf16 name one, and only one may be given."""
    import run

    parser = run.build_parser()
    pair = ["--one", "a.png", "--two", "b.png", "--out", "m.png"]
    assert run.interpolator_options(parser.parse_args(pair)).precision == "auto"
    for name in ("fp32", "fp16", "bf16"):
        assert run.interpolator_options(parser.parse_args(pair + [f"--{name}"])).precision == name
    with pytest.raises(SystemExit):
        parser.parse_args(pair + ["--fp32", "--bf16"])
