"""engine.interpolator.FramePlan: the engine decides tiles, overlap, CUDA graphs, quadratic paths and alpha once per
frame size, and every pair of that size runs from the plan. CPU, tiny frames (conftest's ``cpu_network``)."""

from dataclasses import FrozenInstanceError

import numpy as np
import pytest
import torch

import softsplat_vfi.engine.interpolator
from softsplat_vfi.engine import Interpolator, InterpolatorOptions
from softsplat_vfi.engine.interpolator import FramePlan, plan_frames


def _pair(h, w, channels=3, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.integers(0, 256, (h, w, channels), dtype=np.uint8) for _ in range(2))


@pytest.fixture
def counted(monkeypatch):
    """The (height, width) of each call of ``plan_frames``, the one function that makes plans."""
    calls = []

    def counting(height, width, *args, **kwargs):
        calls.append((height, width))
        return plan_frames(height, width, *args, **kwargs)

    monkeypatch.setattr(softsplat_vfi.engine.interpolator, "plan_frames", counting)
    return calls


def test_a_plan_is_made_once_per_frame_size_whatever_the_call(cpu_network, counted):
    """Pairs of two sizes through every door of the engine, several times each: two plans, in order of first use;
    a pair of a new size gets a new plan."""
    interpolator = Interpolator(InterpolatorOptions(tile="auto"), network=cpu_network)
    linear = Interpolator(InterpolatorOptions(tile=0, alpha="linear"), network=cpu_network)
    small, large = _pair(16, 24), _pair(24, 40, seed=1)
    for _ in range(2):
        for one, two in (small, large):
            interpolator.interpolate_integer(one, two, [0.5])
            interpolator.interpolate_integer_with_neighbours(one, two, [0.25, 0.5], (two, 1.0), (one, 1.0))
            interpolator(one.astype(np.float32) / 255, two.astype(np.float32) / 255)
            rgba = [np.dstack([x, x[:, :, :1]]) for x in (one, two)]
            interpolator.interpolate_integer(*rgba, [0.5])  # frames with alpha: the same plan
            alpha = [x[:, :, 0].astype(np.float32) / 255 for x in (one, two)]
            interpolator.interpolate_with_alpha(one.astype(np.float32) / 255, two.astype(np.float32) / 255, *alpha)
            linear.interpolate_integer(*rgba, [0.5])  # alpha mixed linearly: its colour planes, the same plan
            assert interpolator.cuda_graphs_for(*one.shape[:2]) is None
    assert counted == [(16, 24), (16, 24), (24, 40), (24, 40)]  # each interpolator's own
    plan = interpolator.plan(24, 40)
    assert isinstance(plan, FramePlan) and plan is interpolator.plan(24, 40)
    interpolator.interpolate_integer(*_pair(8, 8), [0.5])
    assert counted[4:] == [(8, 8)]
    with pytest.raises(FrozenInstanceError):
        plan.tile = 16


def test_plans_are_bounded_and_a_dropped_size_is_planned_again(cpu_network, counted):
    interpolator = Interpolator(InterpolatorOptions(tile=0), network=cpu_network)
    sizes = [(8, 8 + i) for i in range(softsplat_vfi.engine.interpolator._MAX_PLANS + 1)]
    for size in sizes + sizes[1:]:
        interpolator.plan(*size)
    assert counted == sizes
    interpolator.plan(*sizes[0])
    assert counted == sizes + [sizes[0]]


def test_the_plan_holds_each_decision(cpu_network):
    """Tiles, overlap, alpha, quadratic paths and graphs, as the engine decided them per pair before the plan."""
    from softsplat_vfi.model.ensemble import with_ensemble
    from softsplat_vfi.model.published import PublishedNetwork

    cpu, cuda = torch.device("cpu"), torch.device("cuda")  # (planning on "cuda" touches no GPU with named tiles)

    def plan(runner=cpu_network, device=cpu, size=(24, 40), **options):
        return plan_frames(*size, InterpolatorOptions(**options), runner, device, None)

    whole = plan(tile=0, flow_scale=0.5)
    assert (whole.tile, whole.settings.tile, whole.moves_alpha, whole.quadratic, whole.graphs) == (0, 0, True, True,
                                                                                                   False)
    assert whole.settings.flow_scale == 0.5 and whole.settings.autocast_dtype is None
    tiled = plan(tile=16, tile_overlap=4)
    assert (tiled.tile, tiled.settings.tile, tiled.settings.overlap) == (16, 16, 4)
    assert not tiled.moves_alpha and not tiled.quadratic and tiled.why_linear == "tiles"
    # a named tile larger than the frames: whole frames run, yet alpha, quadratic paths and graphs keep the tiles'
    # rules (the frames are what they were)
    fits = plan(tile=64, device=cuda)
    assert (fits.tile, fits.settings.tile, fits.moves_alpha, fits.quadratic, fits.graphs) == (64, 0, False, False,
                                                                                              False)
    assert plan(tile=0, device=cuda).graphs
    assert not plan(tile=0, device=cuda, cuda_graphs=False).graphs
    ensemble = plan(runner=with_ensemble(cpu_network, 2), device=cuda, tile=0)
    assert ensemble.quadratic and not ensemble.graphs and not ensemble.moves_alpha
    assert not plan(tile=0, alpha="linear").moves_alpha
    with torch.random.fork_rng():
        torch.manual_seed(0)
        published = plan(runner=PublishedNetwork().eval(), device=cuda, tile=0)
    assert published.tile == 0 and not published.graphs and not published.moves_alpha
    assert published.why_linear == "the published network"


def test_auto_tiles_beside_quadratic_motions_flow_states(cpu_network, monkeypatch):
    """"auto": whole frames that fit alone but not beside the flow states quadratic motion keeps run at constant
    velocity, still on whole frames (one plan, both fits)."""
    import softsplat_vfi.model.inference as inference

    fits = []
    monkeypatch.setattr(inference, "fit_tile", lambda h, w, device, factor=1.0, whole_extra=0:
                        fits.append(whole_extra) or (512 if whole_extra else 0))
    plan = plan_frames(24, 40, InterpolatorOptions(tile="auto"), cpu_network, torch.device("cpu"), None)
    assert plan.tile == 0 and plan.settings.tile == 0 and plan.moves_alpha and not plan.quadratic
    assert plan.why_linear == "whole frames fit in free memory, but not beside the flows of 3 pairs it keeps"
    assert fits[0] == 0 and fits[1] == 3 * inference.state_memory(24, 40, cpu_network)


def test_the_overlap_rule_is_checked_once_where_tiles_run(cpu_network):
    """An overlap too wide for its tiles is refused when the plan is made (``model.inference.RunSettings``), not
    re-checked per pair; frames that fit in one tile run whole, so the overlap does not matter to them."""
    interpolator = Interpolator(InterpolatorOptions(tile=16, tile_overlap=8), network=cpu_network)
    with pytest.raises(ValueError, match="tile 16 needs an overlap between 1 and 7 pixels, got 8"):
        interpolator.plan(24, 40)
    assert interpolator.plan(16, 16).settings.tile == 0
    assert interpolator.interpolate_integer(*_pair(16, 16), [0.5])[0].shape == (16, 16, 3)


def test_one_tile_is_the_whole_frame(cpu_network):
    """``model.inference`` tiles wherever ``settings.tile`` says (the plan's decision, no size check of its own): a
    frame no larger than the tile runs as one tile, which is the whole frame's output exactly."""
    from softsplat_vfi.model.inference import RunSettings, interpolate

    one, two = (x.astype(np.float32) / 255 for x in _pair(24, 40))
    whole = interpolate(cpu_network, one, two, [0.5])[0]
    np.testing.assert_array_equal(interpolate(cpu_network, one, two, [0.5], RunSettings(tile=64, overlap=16))[0],
                                  whole)


def test_the_published_estimate_plans_each_size_once_across_calls(counted):
    """``run.estimate`` (published code calls it once per pair) keeps its engine, so its plans too."""
    import softsplat_vfi.engine.published
    import run

    softsplat_vfi.engine.published._interpolator.cache_clear()
    one = torch.rand(3, 24, 40, generator=torch.Generator().manual_seed(0))
    first = run.estimate(one, one.roll(2, dims=2), [0.5])[0]
    again = run.estimate(one, one.roll(2, dims=2), [0.5])[0]
    assert counted == [(24, 40)]
    torch.testing.assert_close(first, again, rtol=0, atol=0)
