"""Constant-velocity and quadratic paths to time t (model/motion.py), alone and inside Network.synthesize."""

import pytest
import torch
import torch.nn.functional as F

from softsplat_vfi.model import Network, NetworkConfig
from softsplat_vfi.model.motion import linear_flows, quadratic_flows, straight_neighbour


def _fields(seed, n=2, h=5, w=7):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, 2, h, w, generator=g, dtype=torch.float64) * 4 for _ in range(2)]


@pytest.mark.parametrize("t", [0.25, 0.5, torch.tensor([0.3, 0.8], dtype=torch.float64).view(-1, 1, 1, 1)])
def test_constant_velocity_neighbours_give_the_linear_flows(t):
    fwd, bwd = _fields(0)
    got = quadratic_flows(fwd, bwd, -fwd, -bwd, t)
    for a, b in zip(got, linear_flows(fwd, bwd, t)):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("t", [0.2, 0.5, 0.9])
def test_quadratic_flows_follow_a_parabola(t):
    # frame one at time 0: x(s) = v s + a s^2 / 2; frame two at time 1: y(r) = w r + b r^2 / 2, r = s - 1
    v, a = _fields(1)
    w, b = _fields(2)
    fwd, before = v + a / 2, -v + a / 2
    after, bwd = w + b / 2, -w + b / 2
    to_t_one, to_t_two = quadratic_flows(fwd, bwd, before, after, t)
    torch.testing.assert_close(to_t_one, v * t + a * t * t / 2)
    torch.testing.assert_close(to_t_two, w * (t - 1) + b * (t - 1) ** 2 / 2)


@pytest.mark.parametrize("before,after", [(0.5, 2.0), (3.0, 1.5)])
def test_quadratic_flows_follow_a_parabola_with_uneven_neighbours(before, after):
    v, a = _fields(4)
    w, b = _fields(5)
    path_one = lambda s: v * s + a * s * s / 2  # noqa: E731 (frame one at time 0)
    path_two = lambda r: w * r + b * r * r / 2  # noqa: E731 (frame two at time 1, r = s - 1)
    got = quadratic_flows(path_one(1.0), path_two(-1.0), path_one(-before), path_two(after), 0.3, before, after)
    torch.testing.assert_close(got[0], path_one(0.3))
    torch.testing.assert_close(got[1], path_two(-0.7))
    # constant velocity: one moves by v per interval, so does two (flow_bwd = -v, after the gap it is at after * v)
    steady = quadratic_flows(v, -v, -before * v, after * v, 0.3, before, after)
    for x, y in zip(steady, linear_flows(v, -v, 0.3)):
        torch.testing.assert_close(x, y)
    with pytest.raises(ValueError, match="before = 0: give the neighbour's distance"):
        quadratic_flows(v, -v, -v, v, 0.5, before=0)

def test_quadratic_flows_name_a_size_mismatch():
    fwd, bwd = _fields(3)
    with pytest.raises(ValueError, match="flow_after .*estimate the neighbours' flows at the pair's size"):
        quadratic_flows(fwd, bwd, -fwd, -bwd[..., :3], 0.5)


def test_synthesize_with_neighbours():
    """Neighbours at constant velocity give the linear frame, a turn moves pixels, and ``neighbour_times`` reach
    model/motion.py: a neighbour twice as far away with twice the displacement is constant velocity again."""
    torch.manual_seed(0)
    net = Network(NetworkConfig()).eval()
    one, two = torch.rand(2, 1, 3, 64, 64)
    with torch.no_grad():
        state = net.estimate_flow(one, two)
        linear = net.synthesize(state, 0.3)
        steady = net.synthesize(state, 0.3, (-state.flow_fwd, -state.flow_bwd))
        shift = torch.zeros_like(state.flow_fwd)
        shift[:, 0] = 6.0
        turning = net.synthesize(state, 0.3, (-state.flow_fwd + shift, -state.flow_bwd + shift))
        far = (-2 * state.flow_fwd, -0.5 * state.flow_bwd)
        uneven, even = net.synthesize(state, 0.3, far, (2.0, 0.5)), net.synthesize(state, 0.3, far)
    torch.testing.assert_close(steady, linear)
    torch.testing.assert_close(uneven, linear)
    assert (turning - linear).abs().max() > 1e-3 and (even - linear).abs().max() > 1e-3


def test_forward_four_checks_its_frames_and_keeps_the_pair_size():
    torch.manual_seed(0)
    net = Network(NetworkConfig()).eval()
    before, one, two, after = torch.rand(4, 1, 3, 40, 50)
    with torch.no_grad():
        out = net.forward_four(before, one, two, after, (0.25, 0.5))
    assert [tuple(x.shape) for x in out] == [(1, 3, 40, 50)] * 2
    with pytest.raises(ValueError, match="one is .*before is"):
        net.forward_four(before[..., :32], one, two, after)
    with pytest.raises(ValueError, match="the frame before one, the frame after two or both"):
        net.forward_four(None, one, two, None)
    with pytest.raises(ValueError, match="between 0 and 1"):
        net.forward_four(before, one, two, after, (1.0,))


def test_a_side_without_a_neighbour_moves_at_constant_velocity():
    """quadratic_flows with None on one side: that frame's flows to t are linear_flows', the other frame's those
    it has with both neighbours; ``Network.forward_four`` with one neighbour is the video tool's shot-end path (the
    missing side's stand-in flow reversed, gap 1), and its outer flows the one side's."""
    g = torch.Generator().manual_seed(1)
    fwd, bwd, to_before, to_after = torch.randn(4, 1, 2, 6, 7, generator=g)
    for t in (0.3, 0.5):
        both = quadratic_flows(fwd, bwd, to_before, to_after, t, 2.0, 0.5)
        linear = linear_flows(fwd, bwd, t)
        no_after = quadratic_flows(fwd, bwd, to_before, None, t, 2.0, 0.5)
        no_before = quadratic_flows(fwd, bwd, None, to_after, t, 2.0, 0.5)
        torch.testing.assert_close(no_after, (both[0], linear[1]))
        torch.testing.assert_close(no_before, (linear[0], both[1]))
        torch.testing.assert_close(quadratic_flows(fwd, bwd, None, None, t), linear)
        # the tensor stand-in of a missing side (graphs, per-sample training batches) is the same path at any gap
        for gaps in ((2.0, 0.5), (1.0, 1.0)):
            stand_ins = quadratic_flows(fwd, bwd, straight_neighbour(fwd, gaps[0]), straight_neighbour(bwd, gaps[1]),
                                        t, *gaps)
            torch.testing.assert_close(stand_ins, linear)
    torch.manual_seed(0)
    net = Network(NetworkConfig()).eval()
    smooth = torch.rand(8, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    before, one, two, after = F.interpolate(smooth, size=64, mode="bilinear").view(4, 2, 3, 64, 64)
    with torch.no_grad():
        state = net.estimate_flow(one, two)
        to_before, to_after = net.outer_flows(one, two, before, after)
        assert net.outer_flows(one, two, None, None) == (None, None)
        only_before = net.outer_flows(one, two, before, None)
        only_after = net.outer_flows(one, two, None, after)
        torch.testing.assert_close(only_before[0], to_before, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(only_after[1], to_after, atol=1e-4, rtol=1e-4)
        assert only_before[1] is None and only_after[0] is None
        for sides, stand_in in (((before, None), (to_before, straight_neighbour(state.flow_bwd))),
                                ((None, after), (straight_neighbour(state.flow_fwd), to_after))):
            out = net.forward_four(sides[0], one, two, sides[1], (0.5,))[0]
            torch.testing.assert_close(out, net.synthesize(state, 0.5, stand_in), atol=1e-4, rtol=1e-4)
            assert (out - net.synthesize(state, 0.5)).abs().max() > 1e-4


@pytest.mark.parametrize("flow_scale", [1.0, "auto"])
def test_outer_flows_are_the_neighbouring_pairs_own_flows(flow_scale, monkeypatch):
    """``Network.outer_flows`` batches one -> before and two -> after, each the flow a video stream has for it: the
    pair (before, one)'s backward flow and the pair (two, after)'s forward flow, with "auto" as each pair decides."""
    import softsplat_vfi.model.network

    # every pair checked (random weights move little)
    monkeypatch.setattr(softsplat_vfi.model.network, "AUTO_MOTION_PX", -1.0)
    torch.manual_seed(0)
    net = Network(NetworkConfig()).eval()
    smooth = torch.rand(8, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    before, one, two, after = F.interpolate(smooth, size=64, mode="bilinear").view(4, 2, 3, 64, 64)
    with torch.no_grad():
        if flow_scale == "auto":  # these frames make the first sample's pair (before, one) keep its half-scale flow
            kept = net.estimate_flow(before, one, "auto").flow_bwd
            assert not torch.equal(kept[0], net.estimate_flow(before, one).flow_bwd[0])
            assert torch.equal(kept[1], net.estimate_flow(before, one).flow_bwd[1])
        to_before, to_after = net.outer_flows(one, two, before, after, flow_scale)
        torch.testing.assert_close(to_before, net.estimate_flow(before, one, flow_scale).flow_bwd, atol=1e-4,
                                   rtol=1e-4)
        torch.testing.assert_close(to_after, net.estimate_flow(two, after, flow_scale).flow_fwd, atol=1e-4, rtol=1e-4)
        # the flow estimator is symmetric: the pair's order changes the flows only through auto's check
        torch.testing.assert_close(net.outer_flows(one, two, before, after)[0], net.estimate_flow(one, before).flow_fwd,
                                   atol=1e-4, rtol=1e-4)


def test_train_step_is_linear_where_a_sample_has_no_neighbours():
    """training.step.TrainStep: rows flagged 0 in ``quad`` take the linear path exactly whatever their outer flows;
    rows flagged 1 move along the quadratic paths their outer flows give."""
    from training.step import TrainStep

    torch.manual_seed(0)
    net = Network(NetworkConfig())
    step = TrainStep(net)
    one, two = torch.rand(2, 2, 3, 64, 64)
    t = torch.tensor([0.5, 0.25])
    junk = torch.randn(2, 2, 64, 64) * 5
    with torch.no_grad():
        linear, _ = step(one, two, t)
        none, _ = step(one, two, t, junk, junk, torch.zeros(2))
        mixed, _ = step(one, two, t, junk, junk, torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(none, linear)
    torch.testing.assert_close(mixed[1], linear[1])
    assert (mixed[0] - linear[0]).abs().max() > 1e-3
