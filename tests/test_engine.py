"""engine.Interpolator: the options, the policy it owns (tiles, alpha, ensembles), and the pipeline's interface to
it. CPU, tiny frames, the committed weights loaded once per session (conftest's ``cpu_network``)."""

import logging
from dataclasses import FrozenInstanceError
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from softsplat_vfi.engine import Interpolator, InterpolatorOptions
from softsplat_vfi.engine.files import interpolate_files, output_paths


def _frames(h=24, w=40, channels=3, dtype=np.uint8, seed=0):
    rng = np.random.default_rng(seed)
    top = np.iinfo(dtype).max
    base = cv2.GaussianBlur(rng.integers(0, top, (h, w + 3, channels), dtype=dtype), (5, 5), 0)
    return np.ascontiguousarray(base[:, :w]), np.ascontiguousarray(base[:, 3:])


@pytest.mark.parametrize("field, value, words", [
    ("precision", "fp8", "use one of auto"), ("flow_scale", 0.0, r"use auto or a value in \(0, 1\]"),
    ("flow_scale", 1.5, "use auto or"), ("flow_scale", "half", "use auto or"),
    ("tile", -1, "use auto, 0"), ("tile", "big", "use auto, 0"), ("tile_overlap", 0, "use at least 1 pixel"),
    ("ensemble", 3, "use 1, 2 or 4 passes"), ("alpha", "both", "use flow or linear"),
    ("device", "tpu", "use auto, cpu, cuda or cuda:N")])
def test_options_name_what_is_wrong(field, value, words):
    """In the library's terms, the field and the fix (they named command-line flags: '--ensemble 3')."""
    with pytest.raises(ValueError, match=f"^InterpolatorOptions {field}={value!r}: {words}") as info:
        InterpolatorOptions(**{field: value})
    assert "--" not in str(info.value)


def test_options_are_frozen():
    options = InterpolatorOptions(precision="bf16")
    with pytest.raises(FrozenInstanceError):
        options.tile = 0


def test_auto_precision_is_float32_on_the_cpu_and_for_the_published_network(cpu_network):
    """"auto" (the default) runs bfloat16 only for this project's networks on GPUs with bfloat16 tensor cores; on
    the CPU it is float32, and a named precision is taken as named."""
    from softsplat_vfi.engine.interpolator import autocast_dtype
    from softsplat_vfi.model.published import PublishedNetwork

    cpu = torch.device("cpu")
    assert InterpolatorOptions().precision == "auto"
    assert Interpolator(InterpolatorOptions(), network=cpu_network).autocast_dtype is None
    assert autocast_dtype("auto", cpu, cpu_network) is None
    assert autocast_dtype("auto", cpu, PublishedNetwork()) is None
    assert autocast_dtype("bf16", cpu, cpu_network) is torch.bfloat16
    assert autocast_dtype("fp16", cpu, cpu_network) is torch.float16
    assert autocast_dtype("fp32", cpu, cpu_network) is None


@pytest.mark.cuda
def test_auto_precision_on_a_gpu(cpu_network):
    """On a GPU of compute capability 8.0 or more "auto" is bfloat16 for this project's network, float32 for the
    published one; below 8.0 float32 for both."""
    from softsplat_vfi.engine.interpolator import autocast_dtype
    from softsplat_vfi.model.published import PublishedNetwork

    gpu = torch.device("cuda")
    expected = torch.bfloat16 if torch.cuda.get_device_capability(gpu) >= (8, 0) else None
    assert autocast_dtype("auto", gpu, cpu_network) is expected
    assert autocast_dtype("auto", gpu, PublishedNetwork()) is None


def test_job_id_is_what_resumed_video_jobs_are_keyed_by(cpu_network, tmp_path):
    """The resume key of a video job: the settings, and the weights file's content, so that a job resumed after the
    file at that path changed (an update of the repository's weights) starts afresh instead of mixing networks."""
    options = InterpolatorOptions(weights="w.safetensors", precision="fp16", flow_scale=0.5, ensemble=2)
    interpolator = Interpolator(options, network=cpu_network)
    # every option declared to change the frames (engine.options), and what the interpolator resolved
    assert interpolator.job_id == ("alpha=flow autocast=torch.float16 compile=False cuda_graphs=True device=cpu "
                                   "ensemble=2 flow_scale=0.5 precision=fp16 tile=auto tile_overlap=None "
                                   "weights=w.safetensors weights_sha256=")
    weights = tmp_path / "w.safetensors"
    ids = []
    for content in (b"one", b"three", b"three"):
        weights.write_bytes(content)
        # (a flow scale given: these bytes are no weights file to read a default from)
        ids.append(Interpolator(InterpolatorOptions(weights=str(weights), flow_scale=1.0), network=cpu_network).job_id)
    assert ids[0] != ids[1] == ids[2] and ids[1].endswith(f"weights={weights} weights_sha256={ids[1][-16:]}")


def test_integer_frames_are_the_networks_own(cpu_network, cpu_interpolator):
    """The engine adds policy, not arithmetic: its frames are model.inference's, bit for bit."""
    from softsplat_vfi.model.inference import interpolate, interpolate_integer

    one, two = _frames()
    ours = cpu_interpolator.interpolate_integer(one, two, [0.25, 0.5])
    assert [o.shape for o in ours] == [one.shape] * 2 and all(o.dtype == np.uint8 for o in ours)
    for a, b in zip(ours, interpolate_integer(cpu_network, one, two, [0.25, 0.5])):
        np.testing.assert_array_equal(a, b)
    floats = [one.astype(np.float32) / 255, two.astype(np.float32) / 255]
    np.testing.assert_array_equal(cpu_interpolator(*floats)[0], interpolate(cpu_network, *floats)[0])
    # tensors in, tensors of the same form out
    tensor = torch.from_numpy(floats[0]).permute(2, 0, 1)
    assert cpu_interpolator(tensor, tensor, [0.5])[0].shape == tensor.shape


def test_times_are_checked(cpu_interpolator):
    one, two = _frames()
    for times in ([0.0], [1.0], [0.5, 1.2], []):
        with pytest.raises(ValueError, match="time"):
            cpu_interpolator.interpolate_integer(one, two, times)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_alpha_moves_with_the_flow_or_is_mixed_linearly(cpu_network, dtype):
    from softsplat_vfi.model.inference import interpolate_integer_alpha

    one, two = _frames(channels=4, dtype=dtype)
    flow = Interpolator(InterpolatorOptions(tile=0), network=cpu_network)
    assert flow.moves_alpha(*one.shape[:2])
    moved = flow.interpolate_integer(one, two, [0.5])[0]
    np.testing.assert_array_equal(moved, interpolate_integer_alpha(cpu_network, one, two, [0.5])[0])
    expected_alpha = np.rint((one[:, :, 3].astype(np.float64) + two[:, :, 3]) / 2)
    colour = flow.interpolate_integer(one[:, :, :3].copy(), two[:, :, :3].copy(), [0.5])[0]
    for options in (InterpolatorOptions(tile=0, alpha="linear"), InterpolatorOptions(tile=0, ensemble=2),
                    InterpolatorOptions(tile=16, tile_overlap=4)):
        interpolator = Interpolator(options, network=cpu_network)
        assert not interpolator.moves_alpha(*one.shape[:2]), options
        mixed = interpolator.interpolate_integer(one, two, [0.5])[0]
        assert mixed.shape == one.shape and mixed.dtype == dtype
        assert np.abs(mixed[:, :, 3] - expected_alpha).max() <= 1, options
        if options.alpha == "linear":  # the colour is the plain colour interpolation
            np.testing.assert_array_equal(mixed[:, :, :3], colour)


def test_auto_tiles_are_decided_once_per_size(cpu_network, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="softsplat_vfi")  # (the engine's notes: logging records)
    import softsplat_vfi.model.inference as inference

    monkeypatch.setattr(inference, "fit_tile",
                        lambda h, w, device, factor=1.0, whole_extra=0: 16 if max(h, w) > 30 else 0)
    interpolator = Interpolator(InterpolatorOptions(tile="auto", tile_overlap=4), network=cpu_network)
    one, two = _frames()
    assert interpolator.tile_for(24, 40) == 16 and interpolator.tile_for(24, 40) == 16
    assert interpolator.tile_for(24, 24) == 0
    err = caplog.text
    assert err.count("processing in 16-pixel tiles") == 1 and "40x24" in err
    assert interpolator.interpolate_integer(one, two, [0.5])[0].shape == one.shape
    assert Interpolator(InterpolatorOptions(tile=0), network=cpu_network).tile_for(4000, 8000) == 0


def test_cuda_graphs_only_apply_on_cuda(cpu_interpolator):
    assert cpu_interpolator.cuda_graphs_for(24, 40) is None


def test_pipeline_hands_the_engine_frames_with_alpha(tmp_path, blend_interpolator, cpu_interpolator):
    """The pipeline's FrameInterpolator interface: an object with ``interpolate_integer`` gets RGBA frames as they
    are (the engine decides how alpha moves); the engine itself runs a frame folder end to end."""
    from softsplat_vfi.pipeline.video import FrameInterpolator, VideoOptions, interpolate_frames

    assert isinstance(cpu_interpolator, FrameInterpolator) and isinstance(blend_interpolator, FrameInterpolator)
    frames = tmp_path / "frames"
    frames.mkdir()
    for i, seed in enumerate((1, 2, 3)):
        cv2.imwrite(str(frames / f"{i:03d}.png"), _frames(channels=4, seed=seed)[0])
    options = VideoOptions(factor=2, scene_threshold=0)
    for name, interpolator in (("stub", blend_interpolator), ("engine", cpu_interpolator)):
        out = tmp_path / name
        out.mkdir()
        stats = interpolate_frames(frames, str(out / "%03d.png"), Fraction(10), interpolator, options,
                                   progress=False)
        assert stats["frames_out"] == 6 and stats["interpolated"] == 2 and stats["alpha"].startswith("kept")
        assert cv2.imread(str(out / "001.png"), cv2.IMREAD_UNCHANGED).shape == (24, 40, 4)
    assert [shape for shape, _ in blend_interpolator.calls] == [(24, 40, 4)] * 2


def test_output_paths():
    assert output_paths(Path("mid.png"), [0.5]) == [Path("mid.png")]
    assert [p.name for p in output_paths("f.png", [0.25, 0.75])] == ["f-0.png", "f-1.png"]
    assert [p.name for p in output_paths("f_{t}.png", [0.25, 0.75])] == ["f_0.250.png", "f_0.750.png"]
    with pytest.raises(ValueError, match="same file name"):
        output_paths("f_{t}.png", [0.2501, 0.2502])
    # other fields or a lone brace were a KeyError / IndexError traceback (exit 1)
    for name in ("f{x}.png", "f_{i}_{x}.png", "f{0}.png", "f{}.png", "f{.png"):
        with pytest.raises(ValueError, match=r"braces in the name may hold only \{i\} .* or \{t\}"):
            output_paths(name, [0.25, 0.75])


def test_pair_files_are_checked_before_the_weights_load(tmp_path, monkeypatch):
    import softsplat_vfi.engine.interpolator

    def no_loading(*args):
        raise AssertionError("the weights were loaded before the inputs were checked")

    monkeypatch.setattr(softsplat_vfi.engine.interpolator, "load_network", no_loading)
    one, two = tmp_path / "one.png", tmp_path / "two.png"
    for path, frame in zip((one, two), _frames()):
        cv2.imwrite(str(path), frame)
    cv2.imwrite(str(tmp_path / "small.png"), _frames(h=8, w=8)[0])
    options = InterpolatorOptions(device="cpu")
    for args, words in (((one, two, tmp_path / "none" / "mid.png"), "does not exist"),
                        ((one, two, tmp_path / "mid.xyz"), "extension"),
                        ((one, tmp_path / "small.png", tmp_path / "mid.png"), "differ in size"),
                        ((one, two, one), "input")):
        with pytest.raises(ValueError, match=words):
            interpolate_files(*args, interpolator=options)
    with pytest.raises(ValueError, match="time"):
        interpolate_files(one, two, tmp_path / "mid.png", [1.0], options)


def test_pair_files_with_an_interpolator(tmp_path, cpu_interpolator):
    one, two = tmp_path / "one.png", tmp_path / "two.png"
    for path, frame in zip((one, two), _frames(channels=4, dtype=np.uint16)):
        cv2.imwrite(str(path), frame)
    paths = interpolate_files(one, two, tmp_path / "mid_{i}.png", [0.3, 0.6], cpu_interpolator)
    for path in paths:
        image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        assert image.shape == (24, 40, 4) and image.dtype == np.uint16


def _moving_frames(count, seed=0):
    """``count`` 48 x 64 uint8 frames of one texture moving along a curve (a few px per frame)."""
    texture = cv2.GaussianBlur(np.random.default_rng(seed).integers(0, 256, (96, 128, 3)).astype(np.uint8), (5, 5), 0)
    return [np.ascontiguousarray(texture[10 + i * i // 2:58 + i * i // 2, 20 + 3 * i:84 + 3 * i]) for i in range(count)]


def test_quadratic_motion_counts_the_flow_states_it_keeps(cpu_network, monkeypatch, caplog):
    """``--tile auto``: whole frames along quadratic paths also hold 3 pairs' flow states (per ensemble pass); where
    one pair fits in free memory but not beside them, the pair moves at constant velocity on whole frames (said once)
    rather than running out of memory mid-video."""
    caplog.set_level(logging.INFO, logger="softsplat_vfi")  # (the engine's notes: logging records)
    import softsplat_vfi.model.inference as inference

    frames = _moving_frames(4, seed=2)
    height, width = frames[0].shape[:2]
    need = inference.needed_memory(height, width, torch.device("cpu"), inference.memory_factor(cpu_network))
    states = 3 * inference.state_memory(height, width, cpu_network)
    sides = ((frames[0], 1.0), (frames[3], 1.0))
    outs = {}
    for name, free in (("ample", 10 * (need + states)), ("short", (need + states / 2) / 0.8)):
        monkeypatch.setattr(inference, "available_memory", lambda device, free=free: int(free))
        engine = Interpolator(InterpolatorOptions(tile="auto"), network=cpu_network)
        assert engine.tile_for(height, width) == 0  # one pair fits whole either way
        outs[name] = engine.interpolate_integer_with_neighbours(frames[1], frames[2], [0.5], *sides)[0]
        outs[name + " linear"] = engine.interpolate_integer(frames[1], frames[2], [0.5])[0]
    np.testing.assert_array_equal(outs["short"], outs["short linear"])
    assert np.abs(outs["ample"].astype(int) - outs["ample linear"].astype(int)).max() > 0
    assert "not beside the flows of 3 pairs it keeps" in caplog.text


def test_quadratic_stream_estimates_each_pair_once(cpu_network, monkeypatch):
    """interpolate_integer_with_neighbours on consecutive pairs of a stream: one flow estimate per pair (the
    neighbours' flows are the neighbouring pairs'), the same frames as a fresh interpolator's for any one pair, and
    with no neighbour on either side the linear frames exactly."""
    frames = _moving_frames(5)
    counted = []
    estimate = cpu_network.estimate_flow
    monkeypatch.setattr(cpu_network, "estimate_flow", lambda *a, **k: counted.append(1) or estimate(*a, **k))
    stream = Interpolator(InterpolatorOptions(tile=0), network=cpu_network)
    outs = []
    for i in range(4):
        before = (frames[i - 1], 1.0) if i > 0 else None
        after = (frames[i + 2], 1.0) if i < 3 else None
        outs.append(stream.interpolate_integer_with_neighbours(frames[i], frames[i + 1], [0.5], before, after)[0])
    assert len(counted) == 4
    fresh = Interpolator(InterpolatorOptions(tile=0), network=cpu_network)
    again = fresh.interpolate_integer_with_neighbours(frames[1], frames[2], [0.5], (frames[0], 1.0), (frames[3], 1.0))
    np.testing.assert_array_equal(again[0], outs[1])
    alone = fresh.interpolate_integer_with_neighbours(frames[1], frames[2], [0.25, 0.5], None, None)
    for a, b in zip(alone, fresh.interpolate_integer(frames[1], frames[2], [0.25, 0.5])):
        np.testing.assert_array_equal(a, b)
    assert np.abs(outs[1].astype(int) - alone[1].astype(int)).max() > 0  # the neighbours moved pixels


def test_quadratic_motion_falls_back_to_linear_where_it_cannot_run(cpu_network, caplog):
    """Frames with alpha and tiles move at constant velocity, said once (a note: logging, INFO)."""
    caplog.set_level(logging.INFO, logger="softsplat_vfi")  # (the engine's notes: logging records)
    frames = _moving_frames(4)
    with_alpha = [np.dstack([f, np.full(f.shape[:2], 255, np.uint8)]) for f in frames]
    interpolator = Interpolator(InterpolatorOptions(tile=0), network=cpu_network)
    out = interpolator.interpolate_integer_with_neighbours(with_alpha[1], with_alpha[2], [0.5], (with_alpha[0], 1.0),
                                                           (with_alpha[3], 1.0))
    np.testing.assert_array_equal(out[0], interpolator.interpolate_integer(with_alpha[1], with_alpha[2], [0.5])[0])
    interpolator.interpolate_integer_with_neighbours(with_alpha[1], with_alpha[2], [0.5], (with_alpha[0], 1.0), None)
    assert caplog.text.count("here (frames with alpha) frames move at constant velocity") == 1
    tiled = Interpolator(InterpolatorOptions(tile=32, tile_overlap=8), network=cpu_network)
    out = tiled.interpolate_integer_with_neighbours(frames[1], frames[2], [0.5], (frames[0], 1.0), None)
    np.testing.assert_array_equal(out[0], tiled.interpolate_integer(frames[1], frames[2], [0.5])[0])
    assert "here (tiles) frames move at constant velocity" in caplog.text


@pytest.mark.parametrize("passes", [2, 4])
def test_quadratic_ensemble_stream_estimates_each_pair_once_per_pass(cpu_network, monkeypatch, passes):
    """--ensemble along quadratic paths: each pass's flows are estimated once per pair of the stream (a pass's
    neighbours' flows are its neighbouring pairs'), any one pair gives the frames a fresh interpolator gives, and
    they are the ensemble's four-frame frames (``EnsembleNetwork.forward_four``, as the held-out margin scores
    them) to the rounding of uint8."""
    from softsplat_vfi.model.ensemble import with_ensemble

    frames = _moving_frames(5, seed=2)
    counted = []
    estimate = cpu_network.estimate_flow
    monkeypatch.setattr(cpu_network, "estimate_flow", lambda *a, **k: counted.append(1) or estimate(*a, **k))
    stream = Interpolator(InterpolatorOptions(tile=0, ensemble=passes), network=cpu_network)
    outs = []
    for i in range(4):
        before = (frames[i - 1], 1.0) if i > 0 else None
        after = (frames[i + 2], 1.0) if i < 3 else None
        outs.append(stream.interpolate_integer_with_neighbours(frames[i], frames[i + 1], [0.5], before, after)[0])
    assert len(counted) == 4 * passes
    fresh = Interpolator(InterpolatorOptions(tile=0, ensemble=passes), network=cpu_network)
    again = fresh.interpolate_integer_with_neighbours(frames[1], frames[2], [0.5], (frames[0], 1.0), (frames[3], 1.0))
    np.testing.assert_array_equal(again[0], outs[1])
    tensors = [torch.from_numpy(f).permute(2, 0, 1)[None].float() / 255.0 for f in frames[:4]]
    with torch.no_grad():
        reference = with_ensemble(cpu_network, passes).forward_four(*tensors, (0.5,))[0].clamp(0, 1)
    reference = (reference[0].permute(1, 2, 0) * 255).round().to(torch.uint8).numpy()
    assert np.abs(outs[1].astype(int) - reference.astype(int)).max() <= 1
    single = Interpolator(InterpolatorOptions(tile=0), network=cpu_network).interpolate_integer_with_neighbours(
        frames[1], frames[2], [0.5], (frames[0], 1.0), (frames[3], 1.0))[0]
    assert np.abs(outs[1].astype(int) - single.astype(int)).max() > 0  # the other passes changed pixels


def _stream(interpolator, frames, start):
    """Every pair of ``frames`` along quadratic paths, as the video pipeline calls them: with ``start``, all pairs
    started first and their frames waited for after (the pipeline's write-behind thread); else each waited for."""
    calls = []
    for i in range(len(frames) - 1):
        before = (frames[i - 1], 1.0) if i > 0 else None
        after = (frames[i + 2], 1.0) if i < len(frames) - 2 else None
        call = interpolator.start_integer_with_neighbours if start else interpolator.interpolate_integer_with_neighbours
        calls.append(call(frames[i], frames[i + 1], [0.25, 0.5], before, after))
    return [[frame.result() for frame in made] if start else made for made in calls]


def test_a_stream_uploads_each_frame_once_and_started_frames_are_the_waited_ones(cpu_network, monkeypatch):
    """Along quadratic paths each frame crosses to the device once (``PairStates.upload``), not once per pair it is
    in, and frames started and waited for later are those waited for at once, byte for byte."""
    import softsplat_vfi.model.inference as inference

    frames = _moving_frames(5, seed=4)
    uploaded = []
    upload = inference._upload_integer
    monkeypatch.setattr(inference, "_upload_integer", lambda x, *a: uploaded.append(id(x)) or upload(x, *a))
    options = InterpolatorOptions(tile=0)
    started = _stream(Interpolator(options, network=cpu_network), frames, start=True)
    assert sorted(uploaded) == sorted(id(f) for f in frames)
    waited = _stream(Interpolator(options, network=cpu_network), frames, start=False)
    for a, b in zip(started, waited):
        for x, y in zip(a, b):
            assert x.dtype == np.uint8 and x.shape == frames[0].shape
            np.testing.assert_array_equal(x, y)


@pytest.mark.cuda
@pytest.mark.parametrize("graphs", [True, False])
def test_cuda_started_frames_are_the_waited_ones(graphs):
    """On a GPU the frames go up and come back through page-locked memory, copied without waiting; all of a stream's
    pairs queued before any is waited for give the frames of each pair waited for at once (CUDA graphs and eager)."""
    from softsplat_vfi.engine.interpolator import load_network
    from softsplat_vfi.engine.options import DEFAULT_WEIGHTS

    net = load_network(DEFAULT_WEIGHTS, torch.device("cuda"))
    frames = _moving_frames(6, seed=5)
    options = InterpolatorOptions(tile=0, precision="bf16", cuda_graphs=graphs)
    started = _stream(Interpolator(options, network=net), frames, start=True)
    waited = _stream(Interpolator(options, network=net), frames, start=False)
    for a, b in zip(started, waited):
        for x, y in zip(a, b):
            # softsplat's atomic sums make two runs differ by a rounding step at a few pixels; a frame read before
            # its copy finished, or another pair's, would differ everywhere
            difference = np.abs(x.astype(int) - y.astype(int))
            assert difference.max() <= 1 and (difference > 0).mean() < 0.01


@pytest.mark.cuda
def test_quadratic_cuda_graphs_match_the_eager_network():
    """GraphedPairs(neighbours=True) replays the quadratic synthesis: the same frames as eager (bf16 rounding)."""
    from softsplat_vfi.engine.interpolator import load_network
    from softsplat_vfi.engine.options import DEFAULT_WEIGHTS

    net = load_network(DEFAULT_WEIGHTS, torch.device("cuda"))
    frames = _moving_frames(4)
    results = []
    for graphs in (True, False):
        interpolator = Interpolator(InterpolatorOptions(tile=0, precision="bf16", cuda_graphs=graphs), network=net)
        results.append(interpolator.interpolate_integer_with_neighbours(frames[1], frames[2], [0.3, 0.5],
                                                                        (frames[0], 0.5), (frames[3], 2.0)))
    for a, b in zip(*results):
        assert np.abs(a.astype(int) - b.astype(int)).mean() < 0.5


def test_the_video_tools_quadratic_frames_are_those_the_held_out_margin_scores(cpu_network):
    """The video tool's flows to the neighbours are the neighbouring pairs' backward and forward flows, and the
    held-out evaluation (``Network.forward_four``) estimates the same pairs in one batch, so the frames agree to the
    rounding of uint8."""
    frames = _moving_frames(4, seed=3)
    ours = Interpolator(InterpolatorOptions(tile=0), network=cpu_network).interpolate_integer_with_neighbours(
        frames[1], frames[2], [0.5], (frames[0], 1.0), (frames[3], 1.0))[0]
    tensors = [torch.from_numpy(f).permute(2, 0, 1)[None].float() / 255.0 for f in frames]
    with torch.no_grad():
        reference = cpu_network.forward_four(*tensors, (0.5,))[0].clamp(0, 1)
    reference = (reference[0].permute(1, 2, 0) * 255).round().to(torch.uint8).numpy()
    assert np.abs(ours.astype(int) - reference.astype(int)).max() <= 1
    # a shot's first and last pairs: one neighbour, the other side at constant velocity, in both
    for before, after in (((frames[0], 1.0), None), (None, (frames[3], 1.0))):
        ours = Interpolator(InterpolatorOptions(tile=0), network=cpu_network).interpolate_integer_with_neighbours(
            frames[1], frames[2], [0.5], before, after)[0]
        with torch.no_grad():
            reference = cpu_network.forward_four(tensors[0] if before else None, tensors[1], tensors[2],
                                                 tensors[3] if after else None, (0.5,))[0].clamp(0, 1)
        reference = (reference[0].permute(1, 2, 0) * 255).round().to(torch.uint8).numpy()
        assert np.abs(ours.astype(int) - reference.astype(int)).max() <= 1


def test_flow_scale_auto_runs_every_path_and_matches_scale_one_where_no_pair_is_checked(cpu_network, monkeypatch):
    """--flow-scale auto goes through pairs, ensembles and the video tool's quadratic path; where no pair moves over
    the threshold it gives scale 1's frames exactly, and where every pair is checked it estimates half-scale flow."""
    import softsplat_vfi.model.network

    frames = [_frames(seed=s)[0] for s in range(4)]
    neighbours = ((frames[0], 1.0), (frames[3], 1.0))
    monkeypatch.setattr(softsplat_vfi.model.network, "AUTO_MOTION_PX", 1e9)
    outs = {}
    for scale in (1.0, "auto"):
        for passes in (1, 2):
            engine = Interpolator(InterpolatorOptions(device="cpu", flow_scale=scale, ensemble=passes),
                                  network=cpu_network)
            outs[scale, passes] = (engine.interpolate_integer(frames[1], frames[2], [0.5])[0],
                                   engine.interpolate_integer_with_neighbours(frames[1], frames[2], [0.5],
                                                                              *neighbours)[0])
    for passes in (1, 2):
        for a, b in zip(outs[1.0, passes], outs["auto", passes]):
            assert np.array_equal(a, b)
    asked = []
    flows_at = softsplat_vfi.model.network.Network._flows_at
    monkeypatch.setattr(softsplat_vfi.model.network, "AUTO_MOTION_PX", -1.0)
    monkeypatch.setattr(softsplat_vfi.model.network.Network, "_flows_at",
                        lambda self, *args: asked.append(args[-1]) or flows_at(self, *args))
    engine = Interpolator(InterpolatorOptions(device="cpu", flow_scale="auto"), network=cpu_network)
    assert engine.interpolate_integer(frames[1], frames[2], [0.5])[0].shape == frames[1].shape
    assert asked == [1.0, 0.5]


def test_every_network_implements_the_one_interface(cpu_network):
    """The network, its ensembles and the published architecture are ``model.interface.InterpolationNetwork``s,
    and their capability flags are what the engine decides by (no class checks)."""
    from softsplat_vfi.model.ensemble import with_ensemble
    from softsplat_vfi.model.interface import InterpolationNetwork
    from softsplat_vfi.model.published import PublishedNetwork

    with torch.random.fork_rng():  # leave later tests' random numbers as they were
        published = PublishedNetwork()
    flags = ("flow_alpha", "quadratic_paths", "cuda_graphs", "tiles", "bf16_autocast")
    expected = {
        "network": (cpu_network, (True, True, True, True, True), cpu_network, 1),
        "ensemble": (with_ensemble(cpu_network, 4), (False, True, False, True, True), cpu_network, 4),
        "published": (published, (False, False, False, True, False), published, 1),
        "published ensemble": (with_ensemble(published, 2), (False, False, False, True, False), published, 2),
    }
    for name, (net, capabilities, base, passes) in expected.items():
        assert isinstance(net, InterpolationNetwork), name
        assert tuple(getattr(net, flag) for flag in flags) == capabilities, name
        assert net.base is base and net.passes == passes, name


def test_published_ensemble_moves_at_constant_velocity_in_a_stream(caplog):
    """An ensemble of the published network has no quadratic paths: a stream's pairs move at constant velocity (said
    once), as the published network alone does. (Before the interface, the engine sent any ensemble down the
    quadratic path, where the published network has no flow states: AttributeError.)"""
    caplog.set_level(logging.INFO, logger="softsplat_vfi")  # (the engine's notes: logging records)
    from softsplat_vfi.model.published import PublishedNetwork

    with torch.random.fork_rng():  # seeded weights, without changing the random numbers of later tests
        torch.manual_seed(0)
        net = PublishedNetwork().eval()
    engine = Interpolator(InterpolatorOptions(device="cpu", tile=0, ensemble=2), network=net)
    frames = [np.full((32, 48, 3), 40 * i, np.uint8) for i in range(3)]
    out = engine.interpolate_integer_with_neighbours(frames[1], frames[2], [0.5], (frames[0], 1.0), None)
    assert len(out) == 1 and out[0].shape == (32, 48, 3) and out[0].dtype == np.uint8
    assert caplog.text.count("(the published network) frames move at constant velocity") == 1


def test_a_weights_file_loads_once_by_any_path_and_again_once_rewritten(tmp_path, monkeypatch):
    """load_network keys its networks by the file's real path, size and modification time: the same file through a
    relative path, an absolute one or a link is one load, and a file rewritten since (a new export) loads again."""
    import os
    import shutil

    from softsplat_vfi.engine import interpolator
    from softsplat_vfi.engine.options import DEFAULT_WEIGHTS

    loads = []
    monkeypatch.setattr("softsplat_vfi.model.weights.load_any", lambda path, device: loads.append(path) or object())
    monkeypatch.setattr(interpolator, "_LOADED", {})
    weights = tmp_path / "w.safetensors"
    shutil.copyfile(DEFAULT_WEIGHTS.parent / "fast.safetensors", weights)
    (tmp_path / "link.safetensors").symlink_to(weights)
    monkeypatch.chdir(tmp_path)
    cpu = torch.device("cpu")
    first = interpolator.load_network(weights, cpu)
    assert interpolator.load_network(Path("w.safetensors"), cpu) is first
    assert interpolator.load_network(Path("link.safetensors"), cpu) is first and len(loads) == 1
    os.utime(weights, ns=(weights.stat().st_atime_ns, weights.stat().st_mtime_ns + 10 ** 9))
    assert interpolator.load_network(weights, cpu) is not first and len(loads) == 2
    # a missing file is the loader's to report, under the path as given (and nothing is kept for it)
    interpolator.load_network(Path("missing.safetensors"), cpu)
    assert loads[-1] == Path("missing.safetensors") and len(interpolator._LOADED) == 2
