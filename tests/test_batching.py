"""Several pairs in one network call (issue 64): each pair's frames are those it gets alone, with the still guard on
and at the flow scales the engine runs videos at; and bench.bench_network's profile ranges, on the CPU."""

import copy
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import softsplat_vfi.model.network
from softsplat_vfi.model import load_weights
from softsplat_vfi.model.network import AUTO, Network
from softsplat_vfi.model.warp import InputPadder, still_weight

ROOT = Path(__file__).resolve().parent.parent
SHIFTS = (0, 3, 12)  # px of motion between the frames of each pair


@pytest.fixture(scope="module")
def net() -> Network:
    return load_weights(ROOT / "softsplat_vfi" / "weights" / "fast.safetensors", torch.device("cpu"))


@pytest.fixture(scope="module")
def pairs() -> tuple:
    """Three pairs of 64 x 64 smooth-textured frames, the content moving SHIFTS px right, as N x 3 x H x W."""
    g = torch.Generator().manual_seed(0)
    canvas = F.interpolate(torch.rand(1, 3, 16, 22, generator=g), size=(64, 88), mode="bilinear")
    one = torch.cat([canvas[..., 20:84]] * len(SHIFTS))
    two = torch.cat([canvas[..., 20 - s:84 - s] for s in SHIFTS])
    return one, two


def _p95(flow_fwd: torch.Tensor) -> torch.Tensor:
    """Per pair, the forward flow length that ``Network.auto_candidates`` compares with AUTO_MOTION_PX."""
    length = flow_fwd[:, :, ::4, ::4].float().norm(dim=1).flatten(1)
    return length.kthvalue(max(1, round(0.95 * length.shape[1])), dim=1).values


# float64: the batch's flow states are exactly each pair's, and its frames differ by the decoder's float32 output
# rounding only. float32: the convolutions round differently at batch 3 and at batch 1 (7e-7 in the features), which
# the flow estimate and the splatting metric amplify: about 1e-6 in these frames (2.3e-5 was seen with 64 x 96 frames
# at flow scale 0.5)
TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-5}


@pytest.mark.parametrize("flow_scale, dtype", [(1.0, torch.float64), (0.5, torch.float64), (AUTO, torch.float64),
                                               (AUTO, torch.float32)], ids=["1-fp64", "0.5-fp64", "auto-fp64",
                                                                            "auto-fp32"])
def test_a_batch_of_pairs_gives_each_pair_its_own_frames(net, pairs, flow_scale, dtype, monkeypatch):
    """Still guard on (the default), at the flow scales the engine runs videos at (auto for the default network, 1
    for others, 0.5 as users pick for 4K). With "auto" the threshold is moved between the pairs' motions, so that
    one batch holds pairs that are candidates for the half-scale flows and pairs that are not: the decision and the
    choice are per pair (``auto_candidates``, ``auto_choice``), so batching keeps them. The warp error, which the
    half-scale flows must beat (and here never do), is replaced by a per-pair stand-in (the mean horizontal flow,
    lower wins) under which some candidates keep them. (The frames are ``Network.forward``'s: its flow state,
    synthesized and unpadded.)"""
    net = copy.deepcopy(net).to(dtype)
    one, two = (x.to(dtype) for x in pairs)
    padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
    assert net.hold_still
    if flow_scale == AUTO:
        with torch.no_grad():
            flow_fwd = net.first_flows(*padder.pad(one, two), 1.0)[2]
        p95 = _p95(flow_fwd).sort().values
        monkeypatch.setattr(softsplat_vfi.model.network, "AUTO_MOTION_PX", float(p95[0] + p95[1]) / 2)
        assert 0 < int(Network.auto_candidates(flow_fwd).sum()) < len(SHIFTS)  # a mixed batch
        monkeypatch.setattr(softsplat_vfi.model.network, "warp_error",
                            lambda a, b, fwd, bwd: fwd.float()[:, 0].mean(dim=(1, 2)))
    with torch.no_grad():
        state = net.estimate_flow(*padder.pad(one, two), flow_scale)
    if flow_scale == AUTO:  # some pairs keep the half-scale flows, some the full-scale ones (after the still guard)
        moving = 1.0 - still_weight(*padder.pad(one, two))
        full = flow_fwd * moving.to(flow_fwd.dtype)
        kept_full = [torch.equal(state.flow_fwd[i], full[i]) for i in range(len(SHIFTS))]
        assert any(kept_full) and not all(kept_full)
    with torch.no_grad():
        batched = padder.unpad(net.synthesize(state, 0.5))
        for i in range(len(SHIFTS)):
            alone = net.estimate_flow(*padder.pad(one[i:i + 1], two[i:i + 1]), flow_scale)
            if dtype == torch.float64:
                for name in ("flow_fwd", "flow_bwd", "metric_one", "metric_two"):
                    assert torch.equal(getattr(state, name)[i:i + 1], getattr(alone, name)), (name, i)
            frame = padder.unpad(net.synthesize(alone, 0.5))
            assert (batched[i:i + 1] - frame).abs().max() < TOLERANCE[dtype], i


def test_quadratic_paths_batch_with_per_pair_gaps(net, pairs):
    """``Network.synthesize`` along quadratic paths on a batch of flow states, each pair with its own neighbours'
    flows and distances in time (an N x 1 x 1 x 1 tensor) and its own t, gives each pair's frame alone."""
    one, two = pairs
    padder = InputPadder(one.shape, 32)
    gaps = torch.tensor([1.0, 0.5, 2.0]).view(-1, 1, 1, 1)
    ts = torch.tensor([0.3, 0.5, 0.7])
    with torch.no_grad():
        state = net.estimate_flow(*padder.pad(one, two))
        before, after = -1.2 * state.flow_fwd, -0.8 * state.flow_bwd
        batched = net.synthesize(state, ts, (before, after), (gaps, 1.0))
        for i in range(len(SHIFTS)):
            alone = net.estimate_flow(*padder.pad(one[i:i + 1], two[i:i + 1]))
            frame = net.synthesize(alone, float(ts[i]), (before[i:i + 1], after[i:i + 1]), (float(gaps[i]), 1.0))
            assert (batched[i:i + 1] - frame).abs().max() < 1e-5, i


def test_profile_ranges_name_every_part_and_change_nothing(net, pairs):
    """bench.bench_network's part ranges on the CPU: each part of the network shows as a range, the frames are the
    same, the wrapped functions are restored, and nested ranges count a kernel in the inner one."""
    from torch.profiler import ProfilerActivity, profile

    import softsplat_vfi.model.flow
    from bench.bench_network import OTHER, PARTS, part_ranges, part_totals, profiled

    one, two = pairs[0][:1], pairs[1][:1]
    flow, network = softsplat_vfi.model.flow, softsplat_vfi.model.network
    functions = (flow.correlation, network.still_weight, network.splat_pyramid)
    with torch.no_grad():
        plain = net(one, two)[0]
        with part_ranges(net, lambda: None), profile(activities=[ProfilerActivity.CPU]) as prof:
            ranged = net(one, two)[0]
    assert torch.equal(plain, ranged)
    assert (flow.correlation, network.still_weight, network.splat_pyramid) == functions
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in net.modules())
    ranges, kernels = profiled(prof.events())
    assert {name for name, _, _ in ranges} == set(PARTS) and kernels == []  # (no GPU: no kernels)
    totals = part_totals([("flow decoders", 0.0, 10.0), ("correlation", 2.0, 5.0)],
                         [("a", 1.0, 0.5), ("b", 2.0, 1.0), ("c", 5.0, 2.0), ("d", 12.0, 4.0)])
    assert totals == {"flow decoders": 2.5, "correlation": 1.0, OTHER: 4.0}
