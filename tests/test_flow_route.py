"""One flow route (issue 79): every way of running the network turns a pair into flows through
``Network.flow_steps``, so the still guard holds a still grid in each.

On a GPU, ``GraphedPairs`` with ``flow_scale="auto"`` used to replay the flow steps itself and skipped the still
guard (5 dB on a real clip of a static cutting mat under moving hands). A random-init network's flows wander on a
still grid, so the guard's effect shows without trained weights: where ``still_weight`` says still, the flows are
zero in every route, and only there.
"""

import dataclasses

import numpy as np
import pytest
import torch

import softsplat_vfi.model.network
from softsplat_vfi.model import Network
from softsplat_vfi.model.runtime import FlowChain
from softsplat_vfi.model.warp import InputPadder, still_weight

SIZE = (96, 128)


def still_grid_under_occluder(shift: int = 10) -> tuple:
    """Two 1 x 3 x 96 x 128 frames: a textured grid (lines every 8 px), the same in both, and a 24 x 24 noise patch
    over its left part that moves ``shift`` px right from the first frame to the second."""
    g = torch.Generator().manual_seed(0)
    h, w = SIZE
    y, x = torch.arange(h).view(-1, 1), torch.arange(w).view(1, -1)
    grid = ((y % 8 < 2) | (x % 8 < 2)).float()
    background = (0.5 * torch.rand(1, 3, h, w, generator=g) + 0.5 * grid).clamp(0, 1)
    patch = torch.rand(1, 3, 24, 24, generator=g)
    frames = []
    for left in (16, 16 + shift):
        frame = background.clone()
        frame[..., 36:60, left:left + 24] = patch
        frames.append(frame)
    return tuple(frames)


def random_network() -> Network:
    torch.manual_seed(0)
    return Network().eval()


def still_mask(one: torch.Tensor, two: torch.Tensor) -> torch.Tensor:
    """Where the guard holds the flows at exactly zero (``still_weight`` 1), as an N x 2 x H x W mask beside a flow;
    checked to cover the grid far from the occluder (its right half)."""
    still = still_weight(one, two) == 1.0
    assert still[..., SIZE[1] // 2:].all() and float(still.float().mean()) > 0.8
    return still.expand(-1, 2, -1, -1)


def routes(net: Network, one: torch.Tensor, two: torch.Tensor, flow_scale) -> dict:
    """(flow_fwd, flow_bwd) of the pair by each route, with what the eager network gives for the same pair."""
    with torch.no_grad():
        eager = net.estimate_flow(one, two, flow_scale)
        chain = FlowChain(net, flow_scale, lambda: (one, two))()  # GraphedPairs' graphs, run without capture
        reverse = net.estimate_flow(two, one, flow_scale)
        # the neighbours' flows of a video: (before, one) = (two, one) and (two, after) = (two, one)
        to_before, to_after = net.outer_flows(one, two, two, one, flow_scale)
    pair = (eager.flow_fwd, eager.flow_bwd)
    return {"eager": (pair, pair), "graph steps": ((chain.flow_fwd, chain.flow_bwd), pair),
            "outer_flows": ((to_before, to_after), (reverse.flow_bwd, reverse.flow_fwd))}


def assert_held(found: dict, still: torch.Tensor) -> None:
    """Each route's flows (``routes``) zero where ``still``, and the eager network's."""
    for name, (flows, eager) in found.items():
        for flow, expected in zip(flows, eager):
            assert float(flow[still].abs().max()) == 0.0, name
            torch.testing.assert_close(flow, expected, rtol=1e-4, atol=1e-4, msg=name)


@pytest.mark.parametrize("flow_scale", [1.0, "auto"])
def test_every_flow_route_holds_a_still_grid_under_a_moving_occluder(flow_scale):
    """The eager network, the step list GraphedPairs captures (run without capture) and outer_flows: zero flow on
    the still grid, and the eager flows everywhere. The graphs' old steps gave up to 0.6 px there."""
    net = random_network()
    one, two = still_grid_under_occluder()
    still = still_mask(one, two)
    assert_held(routes(net, one, two, flow_scale), still)
    net.hold_still = False  # without the guard the random network's flows wander on the grid: the test sees it
    with torch.no_grad():
        unguarded = net.estimate_flow(one, two, flow_scale)
    assert float(unguarded.flow_fwd[still].abs().mean()) > 0.05


def test_the_auto_choice_runs_before_the_still_guard_in_every_route(monkeypatch):
    """``"auto"``'s conditional step: skipped by the graph steps as by the eager network where no pair is a
    candidate; forced (every pair a candidate, the half-scale flows shifted 20 px and preferred), it runs in every
    route, its flows are kept where the frames changed, and the still grid still keeps zero flow."""
    net = random_network()
    one, two = still_grid_under_occluder()
    still = still_mask(one, two)
    asked = []
    flows_at = Network._flows_at

    def shifted(self, a, b, feats_a, feats_b, scale):
        asked.append(scale)
        fwd, bwd, pyramid = flows_at(self, a, b, feats_a, feats_b, scale)
        return (fwd, bwd, pyramid) if scale == 1.0 else (fwd + 20.0, bwd + 20.0, pyramid)

    monkeypatch.setattr(Network, "_flows_at", shifted)
    with torch.no_grad():
        FlowChain(net, "auto", lambda: (one, two))()
    assert asked == [1.0]  # random flows of under a pixel: no candidate, no half-scale estimate
    monkeypatch.setattr(softsplat_vfi.model.network, "AUTO_MOTION_PX", -1.0)
    monkeypatch.setattr(softsplat_vfi.model.network, "warp_error",
                        lambda a, b, fwd, bwd: -fwd.float().mean(dim=(1, 2, 3)))
    asked.clear()
    found = routes(net, one, two, "auto")
    assert asked.count(0.5) == 4  # eager, the graph steps and the reversed pair, and outer_flows' batch
    moving = still_weight(one, two).expand_as(still) < 1e-3  # the occluder's two places
    assert bool(moving.any())
    assert_held(found, still)
    for name, (flows, _) in found.items():
        assert all(float(flow[moving].mean()) > 15.0 for flow in flows), name  # the half-scale flows, kept


@pytest.mark.cuda
@pytest.mark.parametrize("precision", ["fp32", "auto"])
def test_cuda_graphed_eager_and_compiled_engines_hold_a_still_grid_under_a_moving_occluder(precision):
    """Through ``engine.Interpolator`` with ``flow_scale`` auto, as run.py runs it (``"auto"`` precision: bf16 on
    an H200): the CUDA graphs' frames are the eager engine's (the bound of the graph tests), the compiled engine's
    too (fp32: its compile is the slow part), and the graphs' flows are zero on the still grid, as the eager
    network's. Before issue 79 the graphs' flows wandered there."""
    from softsplat_vfi.engine import Interpolator, InterpolatorOptions

    net = random_network().cuda()
    options = InterpolatorOptions(device="cuda", tile=0, precision=precision, flow_scale="auto")
    engines = {"eager": Interpolator(dataclasses.replace(options, cuda_graphs=False), network=net),
               "graphed": Interpolator(options, network=net)}
    if precision == "fp32":
        engines["compiled"] = Interpolator(dataclasses.replace(options, compile=True), network=net)
    a8, b8 = (np.ascontiguousarray((x[0].permute(1, 2, 0).numpy() * 255).round().astype(np.uint8))
              for x in still_grid_under_occluder())
    pair = tuple(torch.from_numpy(x).permute(2, 0, 1)[None].cuda().float() / 255 for x in (a8, b8))
    still = still_mask(*pair)
    frames = {name: engine.interpolate_integer(a8, b8, [0.5])[0] for name, engine in engines.items()}
    # the bounds of test_cuda_graphed_pairs_match_the_eager_network and of the compiled engine's test
    bounds = {"graphed": 1 if precision == "fp32" else 8, "compiled": 2}
    for name, bound in bounds.items():
        if name in frames:
            assert np.abs(frames[name].astype(int) - frames["eager"].astype(int)).max() <= bound, name
    autocast = engines["eager"].autocast_dtype
    with torch.no_grad(), torch.autocast("cuda", dtype=autocast or torch.float32, enabled=autocast is not None):
        expected = net.estimate_flow(*InputPadder(pair[0].shape, 32).pad(*pair), "auto")
    for flow in (expected.flow_fwd, expected.flow_bwd):
        assert float(flow[still].abs().max()) == 0.0
    for name in ("graphed", "compiled"):
        if name in engines:
            graphs = engines[name].cuda_graphs_for(*SIZE)
            assert graphs is not None, name
            state = graphs.flow_state(*pair)
            for flow, reference in ((state.flow_fwd, expected.flow_fwd), (state.flow_bwd, expected.flow_bwd)):
                assert float(flow[still].abs().max()) == 0.0, name
                if name == "graphed" and precision == "fp32":  # (bf16: the frames' bound above)
                    torch.testing.assert_close(flow, reference, rtol=1e-4, atol=1e-4)
