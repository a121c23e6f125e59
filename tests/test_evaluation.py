"""evaluation/: every scorer and every scoring tool goes through the common call (a method's ``interpolate`` or
``interpolate_video``), ours runs at the user's defaults with a protocol's own settings named, and the pattern set's
camera-filmed static scenes are there and the same on every run."""

import argparse
import dataclasses
import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

import benchmark_middlebury
import benchmark_xiph
import evaluation.methods
from bench import patterns as patterns_cli
from softsplat_vfi.engine.interpolator import with_weights_defaults
from evaluation import holdout, middlebury, patterns, xiph
from evaluation.methods import Benchmark, add_engine_flags, engine_options
from softsplat_vfi.media.y4m import write_y4m
from training.holdout import Triplet

ROOT = Path(__file__).resolve().parent.parent


class Recorder:
    """A method that blends the pair (the video path in the pair's dtype) and records each call."""

    label = "recorder"
    settings = {"device": "cpu", "precision": "fp32"}

    def __init__(self):
        self.calls = []

    def interpolate(self, one, two, t):
        self.calls.append(("pair", one.shape, one.dtype))
        return (1 - t) * one + t * two

    def interpolate_video(self, one, two, t, before, after):
        self.calls.append(("video", one.shape, one.dtype, before is not None, after is not None))
        return np.rint((1 - t) * one.astype(np.float64) + t * two).astype(one.dtype)


def _middlebury(root: Path) -> Path:
    rng = np.random.default_rng(0)
    for name in ("Alpha", "Beta"):
        (root / name).mkdir(parents=True)
        for file in ("frame10.png", "frame10i11.png", "frame11.png"):
            cv2.imwrite(str(root / name / file), rng.integers(0, 256, (24, 32, 3), dtype=np.uint8))
    return root


def _xiph(root: Path) -> Path:
    root.mkdir()
    yy, xx = np.mgrid[0:32, 0:48].astype(np.float32)
    write_y4m(root / "Clip.y4m", [np.stack([(np.sin((xx - 2 * i) / 6) + 1) / 2, (np.cos(yy / 5) + 1) / 2,
                                            np.full_like(xx, 0.4)], axis=2) for i in range(7)])
    return root


def _triplets():
    g = torch.Generator().manual_seed(0)
    frames = [torch.randint(0, 256, (3, 16, 24), dtype=torch.uint8, generator=g) for _ in range(5)]
    pair_only = Triplet("footage", "a", 2, 1, frames[1], frames[2], frames[3])
    moved = Triplet("footage", "a", 2, 1, frames[1], frames[2], frames[3], before=frames[0])
    return [pair_only, moved]


def test_every_scorer_goes_through_the_common_call(tmp_path):
    method = Recorder()
    result = middlebury.evaluate(method, _middlebury(tmp_path / "mb"), progress=False)
    assert [r["sequence"] for r in result["sequences"]] == ["Alpha", "Beta"]
    assert method.calls == [("pair", (24, 32, 3), np.float32)] * 2

    method = Recorder()
    scores = xiph.evaluate_clip(method, _xiph(tmp_path / "xiph") / "Clip.y4m", ["resized", "cropped"], (24, 16), 7)
    assert scores["resized"]["frames"] == scores["cropped"]["frames"] == 2 and "detail" in scores["cropped"]
    assert method.calls == [("pair", (16, 24, 3), np.float32)] * 4

    method, details = Recorder(), []
    assert holdout.triplet_scores(method, _triplets(), details).shape == (2,) and len(details) == 2
    # the pair alone as floats; a triplet with an outer neighbour along the video path, on its uint8 frames
    assert method.calls == [("pair", (16, 24, 3), np.float32), ("video", (16, 24, 3), np.uint8, True, False)]

    method = Recorder()
    scene = patterns.Scene("grid", 8, True, True, (0.0, 0.0), size=(48, 64))
    patterns.score(method, [scene])
    patterns.score(method, [scene], video=True)
    assert method.calls == [("pair", (48, 64, 3), np.float32), ("video", (48, 64, 3), np.uint16, True, True)]


def test_the_scoring_tools_score_the_method_the_common_call_builds(tmp_path, monkeypatch, capsys):
    """The command lines are thin: each builds ours through evaluation.methods.ours (here a recorder), prints the
    protocol's header and scores through the common call."""
    built = []

    def fake_ours(options, label=None, hold_still=True, network=None):
        built.append(options)
        method = Recorder()
        method.label = label or str(options.weights)
        return method

    monkeypatch.setattr(evaluation.methods, "ours", fake_ours)
    monkeypatch.setattr(benchmark_middlebury, "ours", fake_ours)
    monkeypatch.setattr(benchmark_xiph, "ours", fake_ours)
    out = tmp_path / "mb.json"
    assert benchmark_middlebury.main(["--data", str(_middlebury(tmp_path / "mb")), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["precision"] == "fp32"  # the method's own settings, reported
    assert benchmark_xiph.main(["--data", str(_xiph(tmp_path / "xiph")), "--size", "24x16"]) == 0
    assert patterns_cli.main(["--weights", str(ROOT / "softsplat_vfi" / "weights" / "fast.safetensors"), "--quick",
                              "--no-camera"]) == 0
    printed = capsys.readouterr().out
    ours = ROOT / "softsplat_vfi" / "weights" / "network.safetensors"
    assert f"Middlebury (tile 0; uint8 output, t = 0.5): {ours}: device cpu, precision fp32" in printed
    assert "Xiph (tile 0" in printed and "patterns (tile 0" in printed
    # ours at the user's defaults (run.py's options of the same flags), whole frames as the protocols score them
    assert [(o.precision, o.flow_scale, o.cuda_graphs, o.tile) for o in built] == [("auto", None, True, 0)] * 3
    assert [with_weights_defaults(o).flow_scale for o in built] == ["auto", "auto", 1.0]  # each file's own


def test_ours_runs_at_the_users_defaults_and_a_protocol_names_its_own():
    parser = argparse.ArgumentParser()
    add_engine_flags(parser)
    protocol = Benchmark("probe", engine=(("tile", 0), ("precision", "fp32")), note="a published table's settings")
    options = engine_options(parser.parse_args([]), protocol)
    assert options.weights == ROOT / "softsplat_vfi" / "weights" / "network.safetensors"
    assert (options.flow_scale, options.cuda_graphs, options.tile, options.precision) == (None, True, 0, "fp32")
    assert with_weights_defaults(options).flow_scale == "auto"  # the file's own default, as run.py runs it
    # a weights file runs at the flow scale it states; another flag as run.py takes it
    fast = engine_options(parser.parse_args(["--eager"]), Benchmark("plain"),
                          ROOT / "softsplat_vfi" / "weights" / "fast.safetensors")
    assert (fast.flow_scale, fast.cuda_graphs, fast.precision, fast.tile) == (None, False, "auto", "auto")
    assert with_weights_defaults(fast).flow_scale == 1.0
    assert engine_options(parser.parse_args(["--flow-scale", "0.5"]), Benchmark("plain")).flow_scale == 0.5
    assert protocol.header(Recorder()) == ("probe (tile 0, precision fp32; a published table's settings): "
                                           "recorder: device cpu, precision fp32")


def test_our_method_is_the_engines_pair_and_video_calls(cpu_interpolator):
    ours = evaluation.methods.Ours(cpu_interpolator, "ours")
    rng = np.random.default_rng(1)
    frames = [rng.integers(0, 256, (32, 48, 3), dtype=np.uint8) for _ in range(4)]
    floats = [f.astype(np.float32) / 255 for f in frames]
    np.testing.assert_array_equal(ours.interpolate(floats[1], floats[2], 0.5), cpu_interpolator(*floats[1:3])[0])
    video = ours.interpolate_video(frames[1], frames[2], 0.5, frames[0], frames[3])
    expected = cpu_interpolator.interpolate_integer_with_neighbours(frames[1], frames[2], [0.5], (frames[0], 1.0),
                                                                   (frames[3], 1.0))[0]
    np.testing.assert_array_equal(video, expected)
    assert ours.settings["precision"] == "auto (float32)" and ours.settings["cuda_graphs"] is True


def test_the_static_scenes_come_as_cameras_film_them_the_same_on_every_run():
    chosen = patterns.scenes()
    exact_static = [s for s in chosen if s.static and not s.camera]
    filmed = [s for s in chosen if s.camera]
    assert len(filmed) == len(exact_static) and all(s.static for s in filmed)
    assert {s.camera for s in filmed} == set(patterns.CAMERAS)
    assert {s.crf for s in filmed if s.camera == "h264"} == set(patterns.CRFS)
    assert len({s.name for s in chosen}) == len(chosen)
    assert [s.camera for s in patterns.scenes(quick=True)] == ["", *patterns.CAMERAS]
    assert not any(s.camera for s in patterns.scenes(camera=False))
    # the quick set filmed at a ninth of its pixels (120 x 160 for 360 x 640: the cameras do not depend on the size)
    quick = [dataclasses.replace(s, size=(120, 160)) for s in patterns.scenes(quick=True)]
    grid = quick[0]
    exact = [patterns.render(grid, t) for t in (0.0, 1.0)]
    first = {}
    for scene in quick[1:]:
        frames = [patterns.filmed(scene, t) for t in (0.0, 1.0)]
        first[scene.name] = [f.copy() for f in frames]
        # never bit-static, yet close to the scene
        assert not np.array_equal(frames[0], frames[1]), scene.name
        assert max(np.abs(f - e).mean() for f, e in zip(frames, exact)) < 0.03, scene.name
    step = np.hypot(*patterns.camera_offset(patterns.scenes(quick=True)[3], 1.0))
    assert patterns.JITTER[0] <= step <= patterns.JITTER[1]
    for cache in (patterns.render, patterns.filmed, patterns._h264):
        cache.cache_clear()
    for scene in quick[1:]:
        for frame, again in zip(first[scene.name], (patterns.filmed(scene, t) for t in (0.0, 1.0))):
            np.testing.assert_array_equal(frame, again)


def test_the_pattern_summary_keeps_the_exact_set_apart_and_says_the_guards_effect():
    rows = [{"camera": "", "static": True, "psnr": 30.0, "far_psnr": 40.0, "detail": 1.0},
            {"camera": "", "static": False, "psnr": 20.0, "far_psnr": 30.0, "detail": 0.5},
            {"camera": "noise", "static": True, "psnr": 10.0, "far_psnr": 12.0, "detail": 0.1}]
    summary = patterns.summarise(rows)
    assert summary["psnr"] == 25.0 and summary["far_psnr_static"] == 40.0 and summary["worst_far_psnr"] == 30.0
    assert summary["far_psnr_noise"] == 12.0 and np.isnan(summary["far_psnr_jitter"])
    off = patterns.summarise([dict(r, far_psnr=r["far_psnr"] - 2) for r in rows])
    effect = patterns.guard_effect(summary, off)
    assert effect["static"] == effect["noise"] == pytest.approx(2.0) and np.isnan(effect["h264"])
