"""benchmark_xiph.py offline, on a small generated y4m clip and a folder of png frames."""

import json

import cv2
import numpy as np
import pytest

import benchmark_xiph
from softsplat_vfi.media.y4m import Y4MError, read_y4m, write_y4m


def _clip(n=7, h=64, w=96):
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    frames = []
    for i in range(n):
        img = np.stack([(np.sin((xx - 2 * i) / 6) + 1) / 2, (np.cos((yy + i) / 5) + 1) / 2,
                        np.full_like(xx, 0.4)], axis=2)
        frames.append(img.astype(np.float32))
    return frames


def test_y4m_round_trip(tmp_path):
    frames = _clip()
    path = tmp_path / "clip.y4m"
    write_y4m(path, frames)
    back = list(read_y4m(path))
    assert len(back) == len(frames)
    # 8-bit 4:2:0 loses chroma detail; the luma-dominated error stays small
    assert np.abs(back[3] - frames[3]).mean() < 0.03
    assert len(list(read_y4m(path, limit=2))) == 2


def test_y4m_truncated_and_not_y4m(tmp_path):
    path = tmp_path / "clip.y4m"
    write_y4m(path, _clip(3))
    data = path.read_bytes()
    (tmp_path / "cut.y4m").write_bytes(data[:-100])
    with pytest.raises(Y4MError, match="truncated"):
        list(read_y4m(tmp_path / "cut.y4m"))
    (tmp_path / "bad.y4m").write_bytes(b"hello\n")
    with pytest.raises(Y4MError, match="not a YUV4MPEG2"):
        list(read_y4m(tmp_path / "bad.y4m"))


def test_benchmark_runs_offline_on_y4m_and_png_folder(tmp_path):
    data = tmp_path / "xiph"
    data.mkdir()
    frames = _clip()
    write_y4m(data / "Generated.y4m", frames)
    folder = data / "Pngs"
    folder.mkdir()
    for i, f in enumerate(frames):
        cv2.imwrite(str(folder / f"{i:03d}.png"), np.rint(f[:, :, ::-1] * 255).astype(np.uint8))
    out = tmp_path / "r.json"
    code = benchmark_xiph.main(["--data", str(data), "--size", "48x32", "--device", "cpu", "--json", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert set(result["clips"]) == {"Generated", "Pngs"}
    for clip in result["clips"].values():
        # of frames 0..6, the even frames with both neighbours are 2 and 4
        assert clip["resized"]["frames"] == 2 and clip["cropped"]["frames"] == 2
        assert clip["resized"]["psnr"] > 20


def test_benchmark_errors(tmp_path, capsys):
    assert benchmark_xiph.main(["--data", str(tmp_path / "none"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "media.xiph.org" in err and "nothing is downloaded" in err
    with pytest.raises(SystemExit):  # the project fetches no data: there is no option for it
        benchmark_xiph.main(["--data", str(tmp_path / "none"), "--download"])
    assert benchmark_xiph.main(["--data", str(tmp_path), "--size", "big", "--device", "cpu"]) == 2
    assert "--size" in capsys.readouterr().err
