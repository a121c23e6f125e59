"""Output safety on CPU: atomic writes with umask permissions, one-line errors for file-system failures, checks
before the work. The process runs as root on the test machines, which ignores permissions (a chmod'ed folder stays
writable), so failures are simulated by making the OS calls raise the errno the kernel would."""

import errno
import os
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest

import run
from softsplat_vfi.media import files
from softsplat_vfi.media.files import (OutputError, atomic_write, check_folder, check_not_input, errno_in,
                                       ffmpeg_os_error)
from softsplat_vfi.media.images import ImageError, check_image_outputs, read_image, write_image


def _fail_in(monkeypatch, folder: Path, code: int, call: str = "open"):
    """Make ``os.<call>`` raise ``code`` for paths inside ``folder`` (others go through)."""
    real = getattr(os, call)

    def fake(path, *args, **kwargs):
        if Path(path).parent == folder:
            raise OSError(code, os.strerror(code), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, call, fake)


def _image(h=24, w=32):
    return np.random.default_rng(0).random((h, w, 3)).astype(np.float32)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_images_get_the_permissions_the_umask_gives(tmp_path, mask):
    """mkstemp's 0600 once survived the rename: outputs were private while videos were 0644."""
    old = os.umask(mask)
    try:
        write_image(tmp_path / "a.png", _image())
        atomic_write(tmp_path / "b.bin", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.png").stat().st_mode & 0o777 == 0o666 & ~mask
    assert (tmp_path / "b.bin").stat().st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.parametrize("code, cause, fix", [
    (errno.EROFS, "read-only", "writable disk"),
    (errno.EACCES, "permission denied", "folder you may write to"),
    (errno.ENOSPC, "no space left", "free some space"),
    (errno.EDQUOT, "quota", "free some of your space"),
])
def test_a_failed_image_write_names_path_and_cause_and_leaves_nothing(tmp_path, monkeypatch, code, cause, fix):
    out = tmp_path / "mid.png"
    _fail_in(monkeypatch, tmp_path, code)
    with pytest.raises(OutputError) as info:
        write_image(out, _image())
    message = str(info.value)
    assert str(out) in message and cause in message and fix in message and "\n" not in message
    # advice for the cause found only
    others = {"writable disk", "folder you may write to", "free some space", "free some of your space"} - {fix}
    assert not any(other in message for other in others), message
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


def test_disk_full_mid_write_removes_the_partial_file(tmp_path, monkeypatch):
    real = os.write
    calls = []

    def write(fd, data):
        calls.append(len(data))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data[:100])  # a short write: the rest goes in a second call, which fails

    monkeypatch.setattr(os, "write", write)
    out = tmp_path / "mid.png"
    out.write_bytes(b"the user's old file")
    with pytest.raises(OutputError, match="no space left"):
        write_image(out, _image(64, 64))
    monkeypatch.undo()
    # the old file under the final name is untouched, and no temporary file is left
    assert out.read_bytes() == b"the user's old file" and [p.name for p in tmp_path.iterdir()] == ["mid.png"]


def test_the_folder_removed_mid_run_is_one_line(tmp_path):
    folder = tmp_path / "gone"
    folder.mkdir()
    shutil.rmtree(folder)
    with pytest.raises(OutputError, match="folder no longer exists"):
        write_image(folder / "x.png", _image())


def test_check_folder_finds_read_only_and_full_folders_before_any_work(tmp_path, monkeypatch):
    check_folder(tmp_path, need=1000)
    assert list(tmp_path.iterdir()) == []  # the probe file is gone
    with pytest.raises(OutputError, match="does not exist"):
        check_folder(tmp_path / "missing")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 5000, 5000))
    with pytest.raises(OutputError, match=r"writes about 1.0 MB, 5.0 KB is free.*nothing was interpolated"):
        check_folder(tmp_path, need=10**6)
    _fail_in(monkeypatch, tmp_path, errno.EROFS)
    with pytest.raises(OutputError, match=f"cannot write into {tmp_path}: the file system is read-only"):
        check_folder(tmp_path)


def test_an_output_that_is_an_input_is_refused(tmp_path):
    one = tmp_path / "one.png"
    one.write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.png").symlink_to(one)
    for out in (one, tmp_path / "sub" / ".." / "one.png", tmp_path / "link.png"):
        with pytest.raises(OutputError, match="the input is never overwritten"):
            check_not_input([tmp_path / "other.png", out], [tmp_path / "two.png", one])
    check_not_input([tmp_path / "mid.png"], [one])  # a new name is fine
    with pytest.raises(OutputError, match="is the input"):
        check_image_outputs([one], [one], 32, 24)


def test_pair_outputs_are_checked_for_room(tmp_path, monkeypatch):
    """Each output needs about what the largest input of its format takes."""
    one = tmp_path / "one.png"
    one.write_bytes(b"x" * 60_000)
    check_image_outputs([tmp_path / "a.png", tmp_path / "b.png"], [one], 1920, 1080)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 10**5, 10**5))
    check_image_outputs([tmp_path / "a.png"], [one], 1920, 1080)
    check_image_outputs([tmp_path / "a.jpg", tmp_path / "b.jpg"], [one], 1920, 1080)  # no jpg input: not counted
    with pytest.raises(OutputError, match="not enough space"):
        check_image_outputs([tmp_path / "a.png", tmp_path / "b.png"], [one], 1920, 1080)


def test_ffmpeg_messages_are_read_for_their_cause():
    text = "[out#0/mp4 @ 0x5] Could not write header (incorrect codec parameters ?): No space left on device"
    assert errno_in(text) == errno.ENOSPC
    assert errno_in("x.mp4: Read-only file system") == errno.EROFS
    assert errno_in("Invalid data found when processing input") is None
    message = str(ffmpeg_os_error(text, "out.mp4", resume="rerun the same command to resume"))
    assert message.startswith("cannot write out.mp4: no space left") and message.endswith("to resume")


def test_a_truncated_png_gives_one_clean_line(tmp_path, capfd):
    """OpenCV's decoder printed libpng's "libpng error: Read Error" before the clean message."""
    path = tmp_path / "cut.png"
    cv2.imwrite(str(path), (np.random.default_rng(1).random((64, 64, 3)) * 255).astype(np.uint8))
    whole = path.read_bytes()
    assert read_image(path)[0].shape == (64, 64, 3)
    path.write_bytes(whole[: len(whole) // 2])
    capfd.readouterr()
    with pytest.raises(ImageError, match="truncated"):
        read_image(path)
    assert "libpng" not in capfd.readouterr().err


def test_a_truncated_jpeg_is_refused_not_decoded_half_grey(tmp_path, capfd):
    """A cut JPEG got the catch-all "cannot be read as an image (corrupt or not an image)"; it now says what is
    wrong, as a cut PNG does. Progressive JPEGs (several scans) and trailing bytes after the end marker still read."""
    picture = (np.random.default_rng(3).random((64, 64, 3)) * 255).astype(np.uint8)
    path, progressive = tmp_path / "cut.jpg", tmp_path / "progressive.jpg"
    cv2.imwrite(str(path), picture)
    cv2.imwrite(str(progressive), picture, [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])
    assert progressive.read_bytes().count(b"\xff\xda") > 1
    progressive.write_bytes(progressive.read_bytes() + b"trailing bytes")
    assert read_image(progressive)[0].shape == (64, 64, 3)
    whole = path.read_bytes()
    assert read_image(path)[0].shape == (64, 64, 3)
    path.write_bytes(whole[: len(whole) * 2 // 3])
    capfd.readouterr()
    with pytest.raises(ImageError, match="the JPEG file is truncated"):
        read_image(path)
    assert "JPEG" not in capfd.readouterr().err


def test_damaged_images_give_one_clean_line(tmp_path, capfd):
    """A PNG damaged inside its picture data printed "libpng error: IDAT: ..." first, and a cut TIFF two lines of
    OpenCV's log ("[ERROR:0@0.01] ... TIFF_Error ...")."""
    picture = (np.random.default_rng(2).random((64, 64, 3)) * 255).astype(np.uint8)
    png, tif = tmp_path / "bad.png", tmp_path / "cut.tif"
    cv2.imwrite(str(png), picture)
    data = bytearray(png.read_bytes())
    start = data.find(b"IDAT") + 20
    data[start:start + 10] = b"\xff" * 10
    png.write_bytes(bytes(data))
    cv2.imwrite(str(tif), picture)
    tif.write_bytes(tif.read_bytes()[: tif.stat().st_size // 2])
    level = cv2.utils.logging.getLogLevel()
    capfd.readouterr()
    with pytest.raises(ImageError, match="damaged: its IDAT chunk fails its checksum"):
        read_image(png)
    with pytest.raises(ImageError, match="cannot be read as an image"):
        read_image(tif)
    err = capfd.readouterr().err
    assert "libpng" not in err and "ERROR" not in err and "TIFF" not in err, err
    assert cv2.utils.logging.getLogLevel() == level  # OpenCV's logging as it was


def test_pair_mode_refuses_a_read_only_folder_before_any_work(tmp_path, monkeypatch, capsys):
    """The output folder is checked before the weights load (engine.interpolator.load_network, which the CLI's
    Interpolator calls): here the loader records its call and stops the run, so a writable folder shows the patch
    is the loader actually used."""
    import softsplat_vfi.engine.interpolator
    from softsplat_vfi.model.weights import WeightsError

    loaded = []

    def loader(*args):
        loaded.append(args)
        raise WeightsError("the stand-in loader stopped the run")

    monkeypatch.setattr(softsplat_vfi.engine.interpolator, "load_network", loader)
    images = Path(__file__).resolve().parent.parent / "images"
    pair = ["--one", str(images / "one.png"), "--two", str(images / "two.png"), "--device", "cpu"]
    code = run.main(pair + ["--out", str(tmp_path / "mid.png")])  # a writable folder: the weights are asked for
    assert code == 2 and len(loaded) == 1 and "stand-in loader" in capsys.readouterr().err
    out_dir = tmp_path / "ro"
    out_dir.mkdir()
    _fail_in(monkeypatch, out_dir, errno.EROFS)
    code = run.main(pair + ["--out", str(out_dir / "mid.png")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "read-only" in err and "Traceback" not in err, err
    assert len(loaded) == 1 and list(out_dir.iterdir()) == []


def test_files_module_imports_nothing_of_the_model():
    assert "import torch" not in Path(files.__file__).read_text()


def test_pair_mode_refuses_an_output_that_is_an_input(tmp_path, capsys):
    """--out equal to --one replaced the input image, exit 0 (video mode refused the same mistake)."""
    images = Path(__file__).resolve().parent.parent / "images"
    one, two = tmp_path / "one.png", tmp_path / "two.png"
    shutil.copy(images / "one.png", one)
    shutil.copy(images / "two.png", two)
    before = one.read_bytes()
    for out in (one, tmp_path / "." / "two.png"):
        code = run.main(["--one", str(one), "--two", str(two), "--out", str(out), "--device", "cpu"])
        err = capsys.readouterr().err
        assert code == 2 and "is the input" in err and err.count("\n") == 1, err
    assert one.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["one.png", "two.png"]


def test_the_join_is_not_retried_without_streams_when_the_disk_is_full(tmp_path, monkeypatch):
    """Leaving subtitles out helps a muxer that refuses them, never a full disk: one remux, not three."""
    import softsplat_vfi.media.video as mv

    tries, cause = [], []

    def failing(args, what):
        tries.append(args)
        raise mv.VideoError(f"{what}: {cause[0]}")

    monkeypatch.setattr(mv, "_run", failing)
    out = tmp_path / "out.mkv"
    join = dict(with_audio=True, with_subtitles=True, timecode="01:00:00:00")
    cause[:] = ["[out#0/mkv] Error writing trailer: No space left on device"]
    with pytest.raises(OutputError, match="no space left on the disk"):
        mv.concat_and_mux([tmp_path / "seg.mp4"], tmp_path / "in.mkv", out, **join)
    assert len(tries) == 1 and "1:s?" in tries[0]
    # a refusal that names no file-system cause still drops what the container refuses, step by step
    tries.clear()
    cause[:] = ["Subtitle codec 94213 is not supported"]
    with pytest.raises(mv.VideoError):
        mv.concat_and_mux([tmp_path / "seg.mp4"], tmp_path / "in.mkv", out, **join)
    assert len(tries) == 3


@pytest.mark.parametrize("suffix", [".png", ".tif", ".jpg", ".webp", ".bmp"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("channels, keep_alpha", [(3, True), (4, True), (4, False)])
def test_an_integer_frame_is_written_as_its_float_values_would_be(tmp_path, suffix, dtype, channels, keep_alpha):
    """write_frame (the video tool's image outputs) skips the float round trip, and writes the bytes write_image
    writes for the frame on [0, 1] at its depth: 8-bit formats round 16-bit frames the same way."""
    from softsplat_vfi.media.images import write_frame

    top = np.iinfo(dtype).max
    frame = np.random.default_rng(channels).integers(0, top + 1, (20, 24, channels)).astype(dtype)
    values = frame.astype(np.float32) / top
    write_image(tmp_path / f"float{suffix}", values[:, :, :3], values[:, :, 3] if channels == 4 and keep_alpha
                else None, 16 if dtype == np.uint16 else 8)
    write_frame(tmp_path / f"integer{suffix}", frame, keep_alpha)
    assert (tmp_path / f"integer{suffix}").read_bytes() == (tmp_path / f"float{suffix}").read_bytes()
