"""The ComfyUI node pack (integrations/comfyui) on the CPU without ComfyUI: its declared interface, its outputs
against the engine's, and the way ComfyUI loads it from a clone of the repository."""

import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest
import torch

from softsplat_vfi.engine.about import WEIGHTS_TERMS
from softsplat_vfi.integrations.comfyui import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS
from softsplat_vfi.integrations.comfyui.nodes import (MODEL_TYPE, SoftsplatInterpolate, SoftsplatModel,
                                                      SoftsplatModelLoader, load_model, output_count, quantize)

ROOT = Path(__file__).resolve().parent.parent


def _moving_texture(count: int, height: int = 48, width: int = 64) -> torch.Tensor:
    """``count`` frames of a smooth random texture moving right and down, faster and faster (B x H x W x 3)."""
    import cv2

    rng = np.random.default_rng(66)
    texture = cv2.GaussianBlur(rng.random((height + 120, width + 120, 3)).astype(np.float32), (0, 0), 2.0)
    texture = (texture - texture.min()) / (texture.max() - texture.min())
    frames = [texture[k + k * k // 8:][:height, 2 * k + k * k // 4:][:, :width] for k in range(count)]
    return torch.from_numpy(np.stack(frames)).contiguous()


def _interpolate(model, images, multiplier=2, fps=24.0, target_fps=0.0, scene_threshold=0.12, dedup=0.0,
                 loop=False, motion="quadratic", mask=None):
    return SoftsplatInterpolate().interpolate(model, images, multiplier, fps, target_fps, scene_threshold, dedup,
                                              loop, motion, mask)


def test_the_pack_declares_its_nodes_as_comfyui_reads_them():
    assert set(NODE_CLASS_MAPPINGS) == set(NODE_DISPLAY_NAME_MAPPINGS) == {"SoftsplatModelLoader",
                                                                           "SoftsplatInterpolate"}
    for cls in NODE_CLASS_MAPPINGS.values():
        assert callable(getattr(cls(), cls.FUNCTION))
        assert len(cls.RETURN_TYPES) == len(cls.RETURN_NAMES)
        assert WEIGHTS_TERMS in cls.DESCRIPTION
        types = cls.INPUT_TYPES()
        assert set(types) <= {"required", "optional"}
        for spec in [*types["required"].values(), *types.get("optional", {}).values()]:
            assert isinstance(spec, tuple) and isinstance(spec[0], (str, list))
            assert len(spec) == 1 or isinstance(spec[1], dict)


def test_the_loader_follows_comfyui_core_and_gives_its_own_model_type():
    required = SoftsplatModelLoader.INPUT_TYPES()["required"]
    assert required["model_name"][0] == ["default", "fast"] and required["model_name"][1]["default"] == "default"
    assert required["device"][0] == ["auto", "cpu", "cuda"]
    assert required["precision"][0] == ["auto", "fp32", "fp16", "bf16"]
    assert SoftsplatModelLoader.INPUT_TYPES()["optional"]["weights_path"][0] == "STRING"
    assert (SoftsplatModelLoader.RETURN_TYPES, SoftsplatModelLoader.RETURN_NAMES) == ((MODEL_TYPE,), ("interp_model",))
    assert SoftsplatModelLoader.CATEGORY == "loaders" and MODEL_TYPE != "INTERP_MODEL"


def test_the_interpolate_node_takes_images_and_a_multiplier_or_rates():
    types = SoftsplatInterpolate.INPUT_TYPES()
    required = types["required"]
    assert list(required)[:3] == ["interp_model", "images", "multiplier"]  # ComfyUI core's FrameInterpolate's
    assert required["interp_model"] == (MODEL_TYPE,) and required["images"] == ("IMAGE",)
    assert required["multiplier"][0] == "INT" and required["multiplier"][1]["default"] == 2
    for name in ("fps", "target_fps", "scene_threshold", "dedup_threshold"):
        assert required[name][0] == "FLOAT"
    assert required["loop"][0] == "BOOLEAN" and required["motion"][0] == ["quadratic", "linear"]
    assert types["optional"]["mask"][0] == "MASK"
    assert SoftsplatInterpolate.RETURN_TYPES == ("IMAGE", "FLOAT", "MASK")
    assert SoftsplatInterpolate.CATEGORY == "image/video"


@pytest.fixture(scope="module")
def fast_model() -> SoftsplatModel:
    """The loader node with model_name fast on the CPU. (The default network takes about 2.5 s a pair even at 48 x 64
    on this project's 2-core CPU machine, over a minute for this test; run once by hand it matched exactly too.)"""
    model, = SoftsplatModelLoader().load("fast", "cpu", "auto")
    return model


def test_doubling_16_frames_equals_the_engine_exactly(fast_model):
    """16 frames of 48 x 64: every input frame comes back as it was, and every frame between them is, bit for bit, the
    engine's ``interpolate_integer_with_neighbours`` on the same 16-bit frames, with the frames beside each pair as
    the video tool gives them (none beyond the clip's ends)."""
    images = _moving_texture(16)
    out, fps, mask = _interpolate(fast_model, images)
    assert out.shape == (31, 48, 64, 3) and out.dtype == torch.float32 and fps == 48.0 and mask.shape == (31, 48, 64)
    engine = fast_model.new_engine()  # an engine of its own, on the same network
    assert engine is not fast_model.new_engine() and engine.network is fast_model.new_engine().network
    frames = [quantize(image) for image in images]
    worst = 0.0
    for i in range(15):
        before = (frames[i - 1], 1.0) if i > 0 else None
        after = (frames[i + 2], 1.0) if i + 2 < 16 else None
        middle, = engine.interpolate_integer_with_neighbours(frames[i], frames[i + 1], [0.5], before, after)
        expected = torch.from_numpy(middle.astype(np.float32) / 65535.0)
        worst = max(worst, float((out[2 * i + 1] - expected).abs().max()))
        assert torch.equal(out[2 * i], images[i])
    assert torch.equal(out[30], images[15])
    assert worst == 0.0
    # and the frames are interpolations: each lies between its neighbours, not a copy of one
    assert not torch.equal(out[1], out[0]) and not torch.equal(out[1], out[2])



class _Interrupted(Exception):
    """ComfyUI's InterruptProcessingException, as the stand-in raises it."""


@pytest.fixture
def comfy(monkeypatch) -> SimpleNamespace:
    """A stand-in for ComfyUI's hooks: ``comfy.utils.ProgressBar`` (each step's value in ``steps``, the network's calls
    between them in ``events``) and ``comfy.model_management.throw_exception_if_processing_interrupted``, which raises
    once Cancel is pressed (``cancel_on``: the network call, counted in ``events``, during which it is pressed)."""
    hooks = SimpleNamespace(totals=[], steps=[], events=[], cancel_on=None, cancelled=False, raised=0)

    class ProgressBar:
        def __init__(self, total: int) -> None:
            hooks.totals.append(total)
            self.current = 0

        def update(self, value: int) -> None:
            self.current += value
            hooks.steps.append(self.current)
            hooks.events.append("progress")

    def throw_exception_if_processing_interrupted() -> None:
        if hooks.cancelled:
            hooks.cancelled = False
            hooks.raised += 1
            raise _Interrupted()

    def network_call(name: str) -> None:
        hooks.events.append(name)
        hooks.cancelled |= sum(e != "progress" for e in hooks.events) == hooks.cancel_on

    package, utils, management = (ModuleType(name) for name in ("comfy", "comfy.utils", "comfy.model_management"))
    utils.ProgressBar = ProgressBar
    management.throw_exception_if_processing_interrupted = throw_exception_if_processing_interrupted
    package.utils, package.model_management = utils, management
    for module in (package, utils, management):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    hooks.network_call = network_call
    return hooks


@pytest.fixture
def counted(fast_model, comfy, monkeypatch) -> SoftsplatModel:
    """The fast model with its network's flow estimates ("flow") and frame syntheses ("synthesize") in
    ``comfy.events``."""
    network = fast_model.new_engine().network
    for name, method in (("flow", network.estimate_flow), ("synthesize", network.synthesize)):
        def call(*args, _name=name, _method=method, **kwargs):
            comfy.network_call(_name)
            return _method(*args, **kwargs)
        monkeypatch.setattr(network, method.__name__, call)
    return fast_model


def test_progress_advances_once_per_output_frame_as_each_is_made(counted, comfy):
    """4 frames tripled (10 output frames): ComfyUI's bar of 10 steps goes 1, 2, ... 10, each step after its own
    frame's synthesis alone (copied frames: none), each pair's flows estimated once; and the frames, made one t at a
    time, equal the engine's with both t's of a pair in one call, bit for bit."""
    images = _moving_texture(4)
    out, _, _ = _interpolate(counted, images, 3)
    assert comfy.totals == [10] and comfy.steps == list(range(1, 11))
    between = " ".join(comfy.events).split("progress")
    assert [part.split().count("synthesize") for part in between[:-1]] == [0, 1, 1, 0, 1, 1, 0, 1, 1, 0]
    assert comfy.events.count("flow") == 3 and between[-1] == ""
    engine = counted.new_engine()
    engine.lazy_frames = False  # the pair's frames from one call
    frames = [quantize(image) for image in images]
    for i in range(3):
        before = (frames[i - 1], 1.0) if i > 0 else None
        after = (frames[i + 2], 1.0) if i + 2 < 4 else None
        expected = engine.interpolate_integer_with_neighbours(frames[i], frames[i + 1], [1 / 3, 2 / 3], before, after)
        for s, frame in enumerate(expected, 1):
            assert torch.equal(out[3 * i + s], torch.from_numpy(frame.astype(np.float32) / 65535.0))


@pytest.mark.parametrize("cancel_on, finished", [(3, 2), (4, 3)])
def test_cancel_stops_the_work_after_the_frame_in_progress(counted, comfy, cancel_on, finished):
    """Cancel pressed during a network call (3: the first frame's synthesis, after the pair's two flow estimates; 4:
    the second's): the frame in progress is finished and counted, and ComfyUI's interrupt check raises before the
    next, with no network call after the Cancel (before, both t's of a pair were made in one call)."""
    comfy.cancel_on = cancel_on
    with pytest.raises(_Interrupted):
        _interpolate(counted, _moving_texture(3), 3)
    assert comfy.raised == 1 and comfy.steps == list(range(1, finished + 1))
    calls = [e for e in comfy.events if e != "progress"]
    assert len(calls) == cancel_on and calls == ["flow", "flow", "synthesize", "synthesize"][:cancel_on]


def test_cancel_between_pairs_of_an_engine_that_makes_a_pair_at_once(comfy):
    """An engine that makes each pair's frames in one call (here linear motion): Cancel during the second pair's call
    stops the work there, before a third call (the first pair's 4 frames counted, the second's not)."""

    class Counted(_Blend):
        def interpolate_integer(self, one, two, times):
            comfy.network_call("pair")
            return super().interpolate_integer(one, two, times)

    comfy.cancel_on = 2
    with pytest.raises(_Interrupted):
        _interpolate(SoftsplatModel(Counted, Path("blend"), ""), _moving_texture(6), 4, motion="linear")
    assert comfy.events.count("pair") == 2 and comfy.steps == [1, 2, 3, 4]


def test_outside_comfyui_the_hooks_do_nothing(blend):
    assert "comfy" not in sys.modules
    out, _, _ = _interpolate(blend, _moving_texture(3), 2)
    assert out.shape[0] == 5

class _Blend:
    """A stand-in network: integer frames (3 or 4 channels) mixed linearly in time."""

    def interpolate_integer(self, one, two, times):
        return [np.rint((1 - t) * one.astype(np.float64) + t * two.astype(np.float64)).astype(one.dtype)
                for t in times]


@pytest.fixture
def blend() -> SoftsplatModel:
    return SoftsplatModel(_Blend, Path("blend"), "")


@pytest.mark.parametrize("multiplier, target_fps, loop, count, fps", [
    (2, 0.0, False, 11, 48.0), (3, 0.0, False, 16, 72.0), (3, 0.0, True, 18, 72.0), (1, 0.0, False, 6, 24.0),
    (2, 60.0, False, 13, 60.0), (2, 60.0, True, 15, 60.0)])
def test_counts_and_rates(blend, multiplier, target_fps, loop, count, fps):
    """(B - 1) x multiplier + 1 frames (ComfyUI core's count), B x multiplier with loop; a target rate gives the
    frames at j / target up to the last frame (or until the first would come again)."""
    out, rate, _ = _interpolate(blend, _moving_texture(6), multiplier, 24.0, target_fps, loop=loop)
    assert (out.shape[0], rate) == (count, fps)
    assert output_count(6, Fraction(24), Fraction(int(fps)), loop) == count


def test_loop_interpolates_from_the_last_frame_back_to_the_first(blend):
    images = _moving_texture(4)
    out, _, _ = _interpolate(blend, images, 2, loop=True, scene_threshold=0.0)
    assert out.shape[0] == 8 and torch.equal(out[6], images[3])
    expected = (quantize(images[3]).astype(np.float64) + quantize(images[0])) / 2
    assert np.abs(out[7].numpy() * 65535 - np.rint(expected)).max() < 0.02


def test_ntsc_rates_are_exact(blend):
    _, rate, _ = _interpolate(blend, _moving_texture(3), 2, 23.976)
    assert rate == float(Fraction(48000, 1001))


def test_no_frame_is_made_across_a_cut(blend):
    images = torch.cat([torch.full((4, 48, 64, 3), 0.1), torch.full((4, 48, 64, 3), 0.9)])
    out, _, _ = _interpolate(blend, images, 2)
    assert out.shape[0] == 15
    assert torch.equal(out[7], images[3]) or torch.equal(out[7], images[4])  # between the shots: one of them
    assert float(out[1].mean()) == pytest.approx(0.1, abs=1e-4)


def test_the_mask_moves_with_the_frames(blend):
    images = _moving_texture(3)
    mask = torch.stack([torch.zeros(48, 64), torch.ones(48, 64), torch.zeros(48, 64)])
    out, _, out_mask = _interpolate(blend, images, 2, scene_threshold=0.0, mask=mask)
    assert out.shape[0] == 5 and out_mask.shape == (5, 48, 64)
    assert torch.equal(out_mask[0], mask[0]) and torch.equal(out_mask[2], mask[1]) and torch.equal(out_mask[4], mask[2])
    assert float(out_mask[1].min()) == pytest.approx(0.5, abs=1e-4) == float(out_mask[3].max())


@pytest.mark.parametrize("images, mask, fps, message", [
    (torch.zeros(4, 48, 64, 4), None, 24.0, "SplitImageWithAlpha"),
    (torch.zeros(4, 48, 64, 3), torch.zeros(4, 32, 64), 24.0, "one 48 x 64 mask per image"),
    (torch.zeros(4, 48, 64, 3), None, 0.0, "give the source frame rate")])
def test_inputs_it_cannot_use_are_named(blend, images, mask, fps, message):
    with pytest.raises(ValueError, match=message):
        _interpolate(blend, images, 2, fps, mask=mask)


def test_a_missing_weights_file_is_named():
    with pytest.raises(ValueError, match="weights_path .*nope.safetensors: no such file"):
        load_model("default", "cpu", "auto", "nope.safetensors")


# a stand-in for another node pack that puts its own folder on the import path and has top-level ``model`` and
# ``engine`` modules, as many packs do
_OTHER_PACK = {
    "__init__.py": "import os, sys\nsys.path.insert(0, os.path.dirname(__file__))\nimport engine, model\n"
                   "NODE_CLASS_MAPPINGS = {'OtherNode': engine.OtherNode}\n",
    "engine.py": "import model\n\nclass OtherNode:\n    def run(self):\n        return model.answer()\n",
    "model.py": "def answer():\n    return 42\n",
}


@pytest.mark.parametrize("ours_first", [True, False], ids=["ours first", "theirs first"])
def test_the_pack_works_beside_a_pack_with_top_level_model_and_engine(tmp_path, ours_first):
    """As ComfyUI's load_custom_node does: each pack's __init__.py by file location, under its folder's name, in a
    process whose import path does not hold the repository; in either order both packs' nodes then run (ours with
    the fast model). Every import inside softsplat_vfi is relative, so ours loads as ``<folder>.softsplat_vfi``
    and takes no top-level name: the other pack's ``engine`` and ``model`` stay its own."""
    other = tmp_path / "custom_nodes" / "other_pack"
    other.mkdir(parents=True)
    for name, text in _OTHER_PACK.items():
        (other / name).write_text(text)
    packs = [str(ROOT), str(other)] if ours_first else [str(other), str(ROOT)]
    script = textwrap.dedent(f"""
        import importlib.util, os, sys
        import torch
        loaded = {{}}
        for path in {packs!r}:
            name = os.path.basename(path)
            spec = importlib.util.spec_from_file_location(name, os.path.join(path, "__init__.py"))
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            loaded[path] = module
        ours, theirs = loaded[{str(ROOT)!r}], loaded[{str(other)!r}]
        assert "softsplat_vfi" not in sys.modules  # ours took no top-level name
        loader = ours.NODE_CLASS_MAPPINGS["SoftsplatModelLoader"]()
        model, = getattr(loader, loader.FUNCTION)("fast", "cpu", "auto")
        node = ours.NODE_CLASS_MAPPINGS["SoftsplatInterpolate"]()
        images = torch.rand(1, 32, 48, 3).repeat(3, 1, 1, 1)
        out, fps, mask = getattr(node, node.FUNCTION)(model, images, 2, 24.0, 0.0, 0.12, 0.0, False, "quadratic")
        assert theirs.NODE_CLASS_MAPPINGS["OtherNode"]().run() == 42
        engine = sys.modules[ours.__name__ + ".softsplat_vfi.engine"]
        print(tuple(out.shape), fps, engine.__file__, sys.modules["engine"].__file__)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["(5,", "32,", "48,", "3)", "48.0", str(ROOT / "softsplat_vfi" / "engine" /
                                                                         "__init__.py"), str(other / "engine.py")]
    assert WEIGHTS_TERMS in proc.stderr  # the loaded file's terms, said on loading it
