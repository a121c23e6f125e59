"""The frames the product writes are bitwise what they were before the network-interface refactor (issue 65), but
for the one change made on purpose since: the still guard (``Network.hold_still``, rules G and X in
docs/quality.md).

The SHA-256 of each output's decoded pixels (not of the file: a PNG or container encoder may change its bytes
without changing a pixel) was saved at commit 3def0eb, on the CPU with torch 2.13.0, and is compared here:
the sample pair through ``run.py``, a tiny generated video through ``run.py --video`` (quadratic paths), and
the engine on tiny frames in each of the paths the refactor touches (ensembles, tiles, alpha, flow scale, the
fast network, the published architecture). CPU float arithmetic can differ between PyTorch versions and CPU
instruction sets: if this fails on an untouched checkout, regenerate ``EXPECTED`` with ``python
-m tests.test_frames_unchanged`` at a commit whose frames are trusted and say so in the commit.
"""

import hashlib
import subprocess
from pathlib import Path
from typing import Dict, List

import cv2
import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent

# printed by `python -m tests.test_frames_unchanged` on the code of 3def0eb (CPU, torch 2.13.0): the frames before
# the still guard; the engine paths must still give them with the guard off (every refactor since kept them)
BEFORE_GUARD: Dict[str, str] = {
    "cli_pair": "635b3e788fb1524212ce7de2e407e07e83018c097266cc289dfc3fec109a2cb0",
    "cli_video": "094552395a049a27b278cb3f79f3728a9361a83c270b37df37b414347cbc8fe2",
    "float_alpha": "d848db25877ace140cf4ab47532d43d5dccfed2c5fd24a7a465468b92800a91d",
    "float_ensemble2_tiles": "76e8a979dd0bd9443fdbf9e7b0a4684279c9c29b660f3727ae26d794767fd6f3",
    "integer_half_scale": "707c3657415a8d3162f954470a2500c3a350d9c2a8aad21b477d4aa3246d7700",
    "published_float": "da1ed469354cda149efb93ff73f20771337518745a0f42cb3736969bd5a91e77",
    "published_stream": "60cae6bcd0ad9afc1e53031ef373ef9ab7ceec18e71d6ea8028be1a76c7f5751",
    "rgba_ensemble2": "846927ba01ae5341011eb9c524a29597b5f6a59211f0d0448a8b3e19e58a7304",
    "rgba_flow": "c83331ee8676b48b6d79b4aef679602912a20eb5b32cf6d58252c47cfd756355",
    "rgba_linear": "4ffdb244f56074729122a00749c6c74ec6ce53f245c8053150491896d304d2b1",
    "stream": "701e9aec4fc7796693c1571fd2cbcdd30e19745967dc497ea86968ef2acaf9a4",
    "stream_ensemble2": "e2806d208f6a080acc005fb2b19f0896de27ee12cd4c77df27516e18868d1f4a",
    "stream_ensemble4": "eeab80f13713273adad7fa38a9b122664f00c431c68cc8d72a68b81abd45b9f7",
    "stream_fast": "4eac5bd1ecc50f0dc0615d182d79bf0f3fbdf8314af9f7fbef9941e99098a5af",
    "stream_tiles": "c454fe2c329dbc5f0861ba221f42f9029afedc99745a32b4ffc493efb32152d7",
}

# the same, printed with the still guard (rule G, docs/quality.md) on, as shipped, since session 60 with its flat
# neighbourhoods judged over 21 px (rule X)
EXPECTED: Dict[str, str] = {
    "cli_pair": "90390ebc2d5e1c0bda6c2f7761f00dcdef2c5fb8678ea75e5451c6fd16764de2",
    "cli_video": "58e1d09ce28ae6378722040bb7ea127d82c71dc63e0f79fe0773ba6b7cdb0255",
    "float_alpha": "a1e891eea66025c78f96481dd9582e9e3d7909994ddd0d0a8b85e79f9bd79ed0",
    "float_ensemble2_tiles": "797e2386960bf22f3f0604471d43306e0dacb4dc486dbb17703b8644d617ef8f",
    "integer_half_scale": "526d2a5acb069a5bc626271780fa60b147101eb4497e9984197ce25cfc5c7542",
    "published_float": "da1ed469354cda149efb93ff73f20771337518745a0f42cb3736969bd5a91e77",
    "published_stream": "60cae6bcd0ad9afc1e53031ef373ef9ab7ceec18e71d6ea8028be1a76c7f5751",
    "rgba_ensemble2": "dc6ae3dcd85d65f35e1cf3f8aa1b9274f2de4cada8afb16729e213a164ce46fe",
    "rgba_flow": "ba9fb6a027cd8fda834e178d339e406948d7df947e851a69e32a1e274f4ac063",
    "rgba_linear": "fd0e38f826984ff3147eab0e31d5fefd12d35bd8e9fc2203aa878ba9b6dbc67f",
    "stream": "175742df447222f906fa133a729c358fa604bf28d7ea939cbaa1413d53d83fbb",
    "stream_ensemble2": "00656cb4cf63f9819f38f8def2025cb197610c50c38346dfa177593886ec468f",
    "stream_ensemble4": "6d00527396312eba209d154422b291718af507b246493db2352593b2c990a8f5",
    "stream_fast": "7018e7f9a1d8e6e6ab335e4da57f01ba99e0e9bbf57e9eb5aad63ee0b9acec20",
    "stream_tiles": "2fc5e174bb89844c3f299c8e79bf1dfb0d851764d4a63833e38c9358451cfefc",
}


def _digest(arrays: List[np.ndarray]) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.shape}{a.dtype}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _frames(size=(48, 64), count=6, alpha=False) -> List[np.ndarray]:
    """Tiny frames: a gradient, a ball moving to the right faster and faster, a bar moving left."""
    h, w = size
    yy, xx = np.mgrid[0:h, 0:w]
    frames = []
    for i in range(count):
        f = np.zeros((h, w, 4 if alpha else 3), np.uint8)
        f[..., 0], f[..., 1], f[..., 2] = (xx * 4 + yy * 2) % 256, (yy * 5) % 256, 96
        if alpha:
            f[..., 3] = 255
        ball = (xx - (10 + 5 * i + i * i // 2)) ** 2 + (yy - (20 + 2 * i)) ** 2 < 64
        f[ball, :3] = [250, 200, 40]
        if alpha:
            f[ball, 3] = 120
        f[30:40, 40 - 3 * i:50 - 3 * i, :3] = [30, 60, 220]
        frames.append(f)
    return frames


def _write_clip(path: Path) -> Path:
    """The frames of ``_frames`` as a lossless (FFV1) 12 frames/s clip: decoding gives them back exactly."""
    from media.video import ffmpeg_exe

    frames = _frames()
    h, w = frames[0].shape[:2]
    subprocess.run([ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
                    "-s", f"{w}x{h}", "-r", "12", "-i", "-", "-c:v", "ffv1", "-pix_fmt", "bgr0", str(path)],
                   input=b"".join(f.tobytes() for f in frames), check=True)
    return path


def _read_pngs(paths) -> List[np.ndarray]:
    return [cv2.imread(str(p), cv2.IMREAD_UNCHANGED) for p in sorted(paths)]


def cli_pair(tmp: Path) -> str:
    import run

    out = tmp / "mid.png"
    code = run.main(["--one", str(ROOT / "images/one.png"), "--two", str(ROOT / "images/two.png"),
                     "--out", str(out), "--device", "cpu"])
    assert code == 0
    return _digest(_read_pngs([out]))


def cli_video(tmp: Path) -> str:
    import run

    clip = _write_clip(tmp / "clip.mkv")
    (tmp / "out").mkdir()
    code = run.main(["--video", str(clip), "--out", str(tmp / "out" / "%06d.png"), "--device", "cpu"])
    assert code == 0
    frames = _read_pngs((tmp / "out").glob("*.png"))
    assert len(frames) == 12
    return _digest(frames)


def _engine(**options):
    from engine import Interpolator, InterpolatorOptions

    options.setdefault("device", "cpu")
    return Interpolator(InterpolatorOptions(**options))


def _stream(interp, frames, times=(0.25, 0.5, 0.75)) -> List[np.ndarray]:
    """What the video pipeline asks of the engine: each pair with the frames beside it (quadratic paths)."""
    outs = []
    for i in range(len(frames) - 1):
        before = (frames[i - 1], 1.0) if i > 0 else None
        after = (frames[i + 2], 1.0) if i + 2 < len(frames) else None
        outs += interp.interpolate_integer_with_neighbours(frames[i], frames[i + 1], list(times), before, after)
    return outs


def _published_network():
    """The published architecture with seeded random weights (its trained weights are not in the repository)."""
    from model.published import PublishedNetwork

    with torch.random.fork_rng():  # without changing the random numbers of later tests
        torch.manual_seed(0)
        return PublishedNetwork().eval()


def engine_cases() -> Dict[str, callable]:
    from engine import Interpolator, InterpolatorOptions

    fast = ROOT / "weights" / "fast.safetensors"
    rgb, rgba = _frames(), _frames(alpha=True)
    floats = [f.astype(np.float32) / 255 for f in rgb[:2]]
    return {
        "stream": lambda: _digest(_stream(_engine(tile=0), rgb[:4])),
        "stream_ensemble2": lambda: _digest(_stream(_engine(tile=0, ensemble=2), rgb[:4], (0.5,))),
        "stream_ensemble4": lambda: _digest(_stream(_engine(tile=0, ensemble=4), rgb[:3], (0.5,))),
        "stream_tiles": lambda: _digest(_stream(_engine(tile=40, tile_overlap=8), rgb[:3], (0.5,))),
        "stream_fast": lambda: _digest(_stream(_engine(weights=fast, tile=0), rgb[:4], (0.5,))),
        "integer_half_scale": lambda: _digest(_engine(tile=0, flow_scale=0.5).interpolate_integer(rgb[1], rgb[2])),
        "rgba_flow": lambda: _digest(_stream(_engine(tile=0), rgba[:3], (0.5,))),
        "rgba_linear": lambda: _digest(_engine(tile=0, alpha="linear").interpolate_integer(rgba[1], rgba[2])),
        "rgba_ensemble2": lambda: _digest(_engine(tile=0, ensemble=2).interpolate_integer(rgba[1], rgba[2])),
        "float_alpha": lambda: _digest(sum(_engine(tile=0).interpolate_with_alpha(
            floats[0], floats[1], floats[0][..., 0], floats[1][..., 1], [0.3, 0.6]), [])),
        "float_ensemble2_tiles": lambda: _digest(_engine(tile=40, tile_overlap=8, ensemble=2)(floats[0], floats[1])),
        "published_stream": lambda: _digest(_stream(Interpolator(InterpolatorOptions(device="cpu", tile=0),
                                                                 network=_published_network()), rgb[:3], (0.5,))),
        "published_float": lambda: _digest(Interpolator(InterpolatorOptions(device="cpu", tile=0),
                                                        network=_published_network())(floats[0], floats[1])),
    }


def test_sample_pair_through_run_py_is_unchanged(tmp_path):
    assert cli_pair(tmp_path) == EXPECTED["cli_pair"]


def test_video_through_run_py_is_unchanged(tmp_path):
    assert cli_video(tmp_path) == EXPECTED["cli_video"]


@pytest.mark.parametrize("case", sorted(engine_cases()))
def test_engine_paths_are_unchanged(case):
    assert engine_cases()[case]() == EXPECTED[case]


@pytest.fixture
def without_still_guard():
    """The shipped networks as the engine caches them, with model.warp.still_weight's guard off for the test."""
    from engine.interpolator import load_network

    nets = [load_network(ROOT / "weights" / name, torch.device("cpu"))
            for name in ("network.safetensors", "fast.safetensors")]
    for net in nets:
        net.hold_still = False
    yield
    for net in nets:
        net.hold_still = True


@pytest.mark.parametrize("case", sorted(engine_cases()))
def test_engine_paths_without_the_still_guard_give_the_frames_of_3def0eb(case, without_still_guard):
    """The refactors of issues 65-67 changed no frame: only the guard did, on purpose."""
    assert engine_cases()[case]() == BEFORE_GUARD[case]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "a").mkdir()
        (Path(tmp) / "b").mkdir()
        found = {"cli_pair": cli_pair(Path(tmp) / "a"), "cli_video": cli_video(Path(tmp) / "b")}
    found.update({name: case() for name, case in engine_cases().items()})
    for name in sorted(found):
        print(f'    "{name}": "{found[name]}",')
