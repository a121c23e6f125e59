"""The network's parts on the CPU, and the CUDA correlation against the PyTorch one."""

import dataclasses
import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from softsplat_vfi.model import Network, NetworkConfig, load_weights, save_weights
from softsplat_vfi.model.correlation import correlation, correlation_torch
from softsplat_vfi.model.inference import interpolate, interpolate_integer
from softsplat_vfi.model.warp import InputPadder, backwarp, resize_flow, warp_error
from softsplat_vfi.model.weights import WeightsError, read_metadata


def _naive_correlation(one, two, radius):
    _, c, h, w = one.shape
    padded = F.pad(two, (radius,) * 4)
    size = 2 * radius + 1
    return torch.stack([(one * padded[:, :, dy:dy + h, dx:dx + w]).mean(1)
                        for dy in range(size) for dx in range(size)], 1)


def test_correlation_matches_naive_loop():
    g = torch.Generator().manual_seed(0)
    one, two = torch.randn(2, 2, 5, 9, 11, generator=g, dtype=torch.float64)
    torch.testing.assert_close(correlation(one, two, 3), _naive_correlation(one, two, 3))
    torch.testing.assert_close(correlation(one, two, 2), _naive_correlation(one, two, 2))


def test_correlation_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="equal shapes"):
        correlation(torch.rand(1, 4, 8, 8), torch.rand(1, 4, 8, 9))


def test_padder_round_trip_and_odd_sizes():
    x = torch.rand(1, 3, 37, 53)
    padder = InputPadder(x.shape, 32)
    (padded,) = padder.pad(x)
    assert padded.shape[2] % 32 == 0 and padded.shape[3] % 32 == 0
    assert torch.equal(padder.unpad(padded), x)


def test_backwarp_integer_shift():
    x = torch.rand(1, 3, 8, 10)
    flow = torch.zeros(1, 2, 8, 10)
    flow[:, 0] = 1.0
    out = backwarp(x, flow)
    torch.testing.assert_close(out[..., :-1], x[..., 1:])
    assert out[..., -1].abs().max() == 0  # outside: zeros by default
    torch.testing.assert_close(backwarp(x, flow, padding="border")[..., -1], x[..., -1])  # or the edge pixel


def test_resize_flow_scales_vectors():
    flow = torch.ones(1, 2, 8, 8)
    out = resize_flow(flow, (16, 32))
    torch.testing.assert_close(out[:, 0], torch.full((1, 16, 32), 4.0))
    torch.testing.assert_close(out[:, 1], torch.full((1, 16, 32), 2.0))


def test_warp_error_is_small_for_flows_that_explain_the_pair():
    canvas = torch.rand(2, 3, 16, 30)
    one, two = canvas[..., 4:24], canvas[..., :20]  # content moves 4 px right from one to two
    right = torch.zeros(2, 2, 16, 20)
    right[:, 0] = 4.0
    good, bad = warp_error(one, two, right, -right), warp_error(one, two, -right, right)
    assert good.shape == bad.shape == (2,)
    assert float(good.max()) < 0.3 * float(bad.min())  # (good: wrong only in the 4 px that leave the frame)
    assert float(warp_error(one, one, right * 0, right * 0).max()) < 1e-6


def test_auto_flow_scale_is_full_scale_for_small_motion():
    torch.manual_seed(0)
    net = Network().eval()
    one = torch.rand(1, 3, 64, 96)
    two = torch.roll(one, 2, dims=3)
    with torch.no_grad():
        assert torch.equal(net(one, two, [0.5], "auto")[0], net(one, two, [0.5], 1.0)[0])
    with pytest.raises(ValueError, match="use auto or a factor above 0"):
        net(one, two, [0.5], "half")


def test_auto_flow_scale_takes_half_scale_per_pair_where_it_explains_large_motion_better(monkeypatch):
    """Rule C (docs/findings.md, F12): a pair whose forward flow's p95 exceeds 32 px takes the
    half-scale flows where their warp error is lower; every other pair keeps the full-scale flows."""
    torch.manual_seed(0)
    net = Network().eval()
    canvas = torch.rand(3, 3, 64, 160)
    one, two = canvas[..., 40:136], canvas[..., :96]  # content moves 40 px right in every sample

    def flows(shift_px):
        fwd = torch.zeros(3, 2, 64, 96)
        fwd[:, 0] = shift_px
        return fwd, -fwd, []

    # full scale: sample 0 right but only 20 px (p95 under 32: kept), samples 1 and 2 wrong at 50 px (p95 over 32);
    # half scale: right (40 px) for samples 0 and 1, wrong (-40 px) for sample 2
    full_fwd, full_bwd, _ = flows(50.0)
    full_fwd[0, 0], full_bwd[0, 0] = 20.0, -20.0
    half_fwd, half_bwd, _ = flows(40.0)
    half_fwd[2, 0], half_bwd[2, 0] = -40.0, 40.0
    asked = []

    def flows_at(self, a, b, feats_a, feats_b, scale):
        asked.append(scale)
        return (full_fwd, full_bwd, []) if scale == 1.0 else (half_fwd, half_bwd, [])

    monkeypatch.setattr(Network, "_flows_at", flows_at)
    with torch.no_grad():
        flows = net.run_flow_steps(one, two, "auto")
    fwd, bwd = flows.flow_fwd, flows.flow_bwd
    assert asked == [1.0, 0.5]
    assert torch.equal(fwd[0], full_fwd[0]) and torch.equal(fwd[1], half_fwd[1]) and torch.equal(fwd[2], full_fwd[2])
    assert torch.equal(bwd[1], half_bwd[1]) and torch.equal(bwd[0], full_bwd[0])
    asked.clear()
    full_fwd[1:, 0], full_bwd[1:, 0] = 10.0, -10.0  # no pair of large motion: no half-scale estimate at all
    with torch.no_grad():
        net.run_flow_steps(one, two, "auto")
    assert asked == [1.0]
    # under torch.compile: the half-scale estimate always runs (no host read to split the graph), masked to the same
    # flows: a compiled video compiles both branches once, up front
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    asked.clear()
    with torch.no_grad():
        flows = net.run_flow_steps(one, two, "auto")
    assert asked == [1.0, 0.5]
    assert torch.equal(flows.flow_fwd, full_fwd) and torch.equal(flows.flow_bwd, full_bwd)


def test_network_any_size_and_several_times():
    torch.manual_seed(0)
    net = Network().eval()
    one, two = torch.rand(1, 3, 45, 67), torch.rand(1, 3, 45, 67)
    with torch.no_grad():
        outs = net(one, two, [0.25, 0.5, 0.75])
    assert len(outs) == 3
    for out in outs:
        assert out.shape == one.shape
        assert torch.isfinite(out).all()


@pytest.mark.parametrize("bad_t", [0.0, 1.0, -0.5, 1.5])
def test_network_rejects_times_outside_open_interval(bad_t):
    net = Network().eval()
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        net(torch.rand(1, 3, 32, 32), torch.rand(1, 3, 32, 32), [bad_t])


def test_network_rejects_mismatched_frames():
    net = Network().eval()
    with pytest.raises(ValueError, match="differ in size"):
        net(torch.rand(1, 3, 32, 32), torch.rand(1, 3, 32, 48), [0.5])


def test_weights_round_trip(tmp_path):
    torch.manual_seed(0)
    net = Network(NetworkConfig(full_width=8)).eval()
    path = tmp_path / "w.safetensors"
    save_weights(net, path, dtype=torch.float32)
    loaded = load_weights(path)
    assert loaded.config == net.config
    for (k, a), (_, b) in zip(net.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), k


def test_average_of_weights_files(tmp_path):
    """training.average: the parameter-wise mean of the files, saved in fp16 with its sources named."""
    from safetensors import safe_open

    from training.average import average_state, main

    torch.manual_seed(0)
    nets = [Network(NetworkConfig(full_width=8)).eval() for _ in range(3)]
    paths = [tmp_path / f"w{i}.safetensors" for i in range(3)]
    for i, (net, path) in enumerate(zip(nets, paths)):
        save_weights(net, path, dtype=torch.float32, extra={"step": str(1000 * i)})
    recipe = {"seed": 7, "lr": 3e-5}  # a source's recorded recipe travels into the soup's metadata
    save_weights(nets[2], paths[2], dtype=torch.float32, extra={"step": "2000", "train_config": json.dumps(recipe)})
    mean = average_state(paths)
    for name in nets[0].state_dict():
        expected = sum(n.state_dict()[name] for n in nets) / 3
        assert torch.allclose(mean[name], expected, atol=1e-6), name
    out = tmp_path / "soup.safetensors"
    assert main(["--out", str(out), *map(str, paths)]) == 0
    soup = load_weights(out)
    for name, tensor in soup.state_dict().items():
        assert torch.allclose(tensor, mean[name], atol=2e-3, rtol=1e-3), name  # stored in fp16
    with safe_open(str(out), framework="pt") as f:
        sources = json.loads(f.metadata()["averaged_from"])
        assert sources == [{"path": str(p), "step": str(1000 * i), "share": round(1 / 3, 6)}
                           for i, p in enumerate(paths[:2])] + [{"path": str(paths[2]), "step": "2000",
                                                                 "share": round(1 / 3, 6), "train_config": recipe}]
        assert f.get_tensor(next(iter(f.keys()))).dtype == torch.float16
    # weighted: shares scaled to sum to 1 (5 : 3 is 0.625 : 0.375), the same as the uniform mean of repeats
    weighted = average_state(paths[:2], [5, 3])
    repeated = average_state([paths[0]] * 5 + [paths[1]] * 3)
    for name in nets[0].state_dict():
        expected = 0.625 * nets[0].state_dict()[name] + 0.375 * nets[1].state_dict()[name]
        assert torch.allclose(weighted[name], expected, atol=1e-6), name
        assert torch.allclose(weighted[name], repeated[name], atol=1e-6), name
    shared = tmp_path / "shared.safetensors"
    assert main(["--out", str(shared), str(paths[0]), str(paths[1]), "--shares", "5", "3"]) == 0
    with safe_open(str(shared), framework="pt") as f:
        assert [s["share"] for s in json.loads(f.metadata()["averaged_from"])] == [0.625, 0.375]
        assert "step" not in f.metadata() and "train_config" not in f.metadata()
    # --recipe with --step: the soup records what train.py --init-weights continues, as a trained file does
    from training.config import RECIPES, TrainConfig

    named = tmp_path / "named.safetensors"
    assert main(["--out", str(named), str(paths[0]), str(paths[1]), "--recipe", "quality-psnr", "--step", "69919"]) == 0
    with safe_open(str(named), framework="pt") as f:
        assert f.metadata()["step"] == "69919"
        assert TrainConfig.from_dict(json.loads(f.metadata()["train_config"])) == RECIPES["quality-psnr"]
    twice = tmp_path / "twice.safetensors"  # a soup of soups names its sources' sources
    assert main(["--out", str(twice), str(named), str(paths[2])]) == 0
    with safe_open(str(twice), framework="pt") as f:
        first = json.loads(f.metadata()["averaged_from"])[0]
        assert first["step"] == "69919" and [s["share"] for s in first["averaged_from"]] == [0.5, 0.5]
    for flags in (["--recipe", "quality-psnr"], ["--step", "5"], ["--recipe", "quality-psnr", "--step", "-1"]):
        assert main(["--out", str(tmp_path / "bad.safetensors"), str(paths[0]), str(paths[1]), *flags]) == 2
    for shares in (["1"], ["1", "-1"], ["0", "0"]):  # one per file, none negative, not all zero
        assert main(["--out", str(tmp_path / "bad.safetensors"), str(paths[0]), str(paths[1]), "--shares",
                     *shares]) == 2
    other = tmp_path / "other.safetensors"
    save_weights(Network(NetworkConfig(full_width=16)), other)
    assert main(["--out", str(tmp_path / "bad.safetensors"), str(paths[0]), str(other)]) == 2
    assert main(["--out", str(tmp_path / "bad.safetensors"), str(paths[0])]) == 2
    assert main(["--out", str(tmp_path / "bad.safetensors"), str(paths[0]), str(tmp_path / "missing.safetensors")]) == 2
    assert not (tmp_path / "bad.safetensors").exists()


def test_export_of_a_training_state(tmp_path):
    """training.export: a state folder's moving average (default) or network (--raw) as an fp16 weights file,
    with the state's step and recipe in the metadata (and the held-out figures train.py logged at that step, where
    they describe the weights written); a folder that is no state is a one-line error."""
    from safetensors.torch import save_file

    from training.export import main

    torch.manual_seed(0)
    config = NetworkConfig(full_width=8)
    net, average = Network(config), Network(config)
    state = tmp_path / "state"
    state.mkdir()
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(state / "state_model.safetensors"))
    (state / "config.json").write_text(json.dumps(config.to_dict()))
    (state / "progress.json").write_text(json.dumps({"step": 1234}))
    (state / "train_config.json").write_text(json.dumps({"lr": 0.0003}))
    (state / "log.jsonl").write_text(json.dumps({"step": 1200, "loss": 0.3}) + "\n" + json.dumps(
        {"step": 1234, "val_psnr": 29.45612, "val_near_linear_psnr": 36.5, "val_boundary_psnr": None}) + "\n")
    ema = {k: v.contiguous() for k, v in average.named_parameters()}
    ema["_updates"] = torch.tensor([7])
    save_file({k: v.detach() for k, v in ema.items()}, str(state / "state_ema.safetensors"))
    for args, source in (([], average), (["--raw"], net)):
        out = tmp_path / f"w{len(args)}.safetensors"
        assert main([str(state), "--out", str(out), *args]) == 0
        loaded = load_weights(out)
        for name, tensor in source.state_dict().items():
            assert torch.allclose(loaded.state_dict()[name], tensor, atol=2e-3, rtol=1e-3), name  # fp16
        other = net if source is average else average
        assert any(not torch.allclose(loaded.state_dict()[k], v, atol=2e-3, rtol=1e-3)
                   for k, v in other.state_dict().items())
        metadata = read_metadata(out)
        assert metadata["step"] == "1234" and json.loads(metadata["train_config"]) == {"lr": 0.0003}
        # the log's validation of that step scored the moving average, so only its export carries the figures
        assert (metadata.get("val_psnr"), metadata.get("val_near_linear_psnr")) == (
            ("29.456", "36.500") if source is average else (None, None))
    (state / "state_ema.safetensors").unlink()  # without an average the network itself is written
    assert main([str(state), "--out", str(tmp_path / "plain.safetensors")]) == 0
    plain = read_metadata(tmp_path / "plain.safetensors")
    assert "(network)" in plain["exported_from"] and plain["val_psnr"] == "29.456"  # what train.py validated then
    assert main([str(tmp_path), "--out", str(tmp_path / "bad.safetensors")]) == 2
    assert not (tmp_path / "bad.safetensors").exists()
    # --flow-iterations: the same weights under a config with more flow passes, from a state or a weights file
    passes = tmp_path / "passes.safetensors"
    assert main([str(state), "--out", str(passes), "--flow-iterations", "1", "2", "2", "2"]) == 0
    assert load_weights(passes).config == dataclasses.replace(config, flow_iterations=(1, 2, 2, 2))
    # the log's figures scored the state's one-pass network, not this one
    assert read_metadata(passes)["step"] == "1234" and "val_psnr" not in read_metadata(passes)
    again = tmp_path / "again.safetensors"
    assert main([str(tmp_path / "plain.safetensors"), "--out", str(again), "--flow-iterations", "2"]) == 0
    copied, plain_net = load_weights(again), load_weights(tmp_path / "plain.safetensors")
    assert copied.config.flow_iterations == (2,)
    for name, tensor in plain_net.state_dict().items():
        assert torch.equal(copied.state_dict()[name], tensor), name
    kept = read_metadata(again)
    assert kept["step"] == "1234" and "flow passes 2" in kept["exported_from"] and "val_psnr" not in kept
    same = tmp_path / "same.safetensors"  # passes unchanged: the same network, its figures kept
    assert main([str(tmp_path / "plain.safetensors"), "--out", str(same), "--flow-iterations", "1"]) == 0
    assert read_metadata(same)["val_psnr"] == "29.456"
    for args in ([], ["--flow-iterations", "1", "2"], ["--flow-iterations", "2", "--raw"]):
        assert main([str(tmp_path / "plain.safetensors"), "--out", str(tmp_path / "bad.safetensors"), *args]) == 2
    assert not (tmp_path / "bad.safetensors").exists()


def test_flow_iterations_reapply_the_same_decoders():
    """Two passes per level use the first pass's weights (a file of one pass loads into either) and refine its
    estimate: with the weights of one pass, each level's second pass starts from the first's output."""
    torch.manual_seed(0)
    one_pass = Network(NetworkConfig(encoder_widths=(8, 8, 8, 8, 8), flow_hidden=(8,))).eval()
    two_pass = Network(dataclasses.replace(one_pass.config, flow_iterations=(2,))).eval()
    two_pass.load_state_dict(one_pass.state_dict(), strict=True)
    one, two = torch.rand(2, 1, 3, 64, 64)
    with torch.no_grad():
        feats = one_pass.encoder(torch.cat([one, two])), None
        a, b = [f[:1] for f in feats[0]], [f[1:] for f in feats[0]]
        _, _, pyramid_one = one_pass.flow(a, b, (64, 64))
        _, _, pyramid_two = two_pass.flow(a, b, (64, 64))
        decoder = one_pass.flow.decoders[-1]  # the coarsest level's
        both = (torch.cat([a[-1], b[-1]]), torch.cat([b[-1], a[-1]]))
        torch.testing.assert_close(pyramid_two[0], decoder(*both, decoder(*both, torch.zeros_like(pyramid_one[0]))))
        assert not torch.allclose(pyramid_two[-1], pyramid_one[-1])
        assert two_pass(one, two)[0].shape == (1, 3, 64, 64)
    # per level, coarsest first: a second pass only where asked
    coarse_once = Network(dataclasses.replace(one_pass.config, flow_iterations=(1, 2, 2, 2))).eval()
    coarse_once.load_state_dict(one_pass.state_dict(), strict=True)
    with torch.no_grad():
        _, _, pyramid_mixed = coarse_once.flow(a, b, (64, 64))
    torch.testing.assert_close(pyramid_mixed[0], pyramid_one[0])
    assert not torch.allclose(pyramid_mixed[-1], pyramid_one[-1])
    for bad in ((0,), (1, 2)):
        with pytest.raises(ValueError, match="one count of at least 1 for every level, or 4 counts"):
            Network(dataclasses.replace(one_pass.config, flow_iterations=bad))
    # a config saved with one count as a number loads as that count for every level
    assert NetworkConfig.from_dict({**one_pass.config.to_dict(), "flow_iterations": 2}).flow_iterations == (2,)
    assert NetworkConfig().with_overrides(["flow_iterations=1,2,2,2"]).flow_iterations == (1, 2, 2, 2)


def test_compiled_regions_pad_every_convolution_and_keep_the_frames():
    """--compile's wiring (model.runtime.compiled_regions) with a stand-in that compiles nothing: every convolution
    has channels in multiples of 8, the still guard, the flow decoders' warp and head and the other regions are the
    stand-in's, and the frames (a float t and a tensor of times, along quadratic paths too) are the plain
    network's."""
    import copy

    from softsplat_vfi.model.runtime import PaddedConv, compiled_regions

    torch.manual_seed(0)
    net = load_weights("weights/network.safetensors").eval()
    compiled = []

    def stand_in(fn):
        compiled.append(fn)
        return fn

    regions = compiled_regions(copy.deepcopy(net), stand_in)
    # (the metric pads its own on the GPU: synthesis.Metric, layers.run_padded)
    convs = [m for name, m in regions.named_modules() if isinstance(m, torch.nn.Conv2d) and "metric" not in name]
    assert convs and all(c.in_channels % 8 == 0 and c.out_channels % 8 == 0 for c in convs)
    assert not any(isinstance(m, PaddedConv) for m in regions.metric.modules())
    assert any(isinstance(m, PaddedConv) for m in regions.modules())
    assert len(compiled) == 4 + 2 * len(net.flow.decoders)
    scene = F.interpolate(torch.rand(1, 3, 6, 8), size=(60, 84), mode="bicubic", align_corners=False).clamp(0, 1)
    frames = [scene[..., 2 * i:2 * i + 72].contiguous() for i in range(4)]
    with torch.no_grad():
        for times in ([0.5], [0.25, 0.75]):
            for a, b in zip(net(frames[1], frames[2], times), regions(frames[1], frames[2], times)):
                torch.testing.assert_close(b, a, rtol=0, atol=1e-5)
        for a, b in zip(net.forward_four(*frames, [0.3]), regions.forward_four(*frames, [0.3])):
            torch.testing.assert_close(b, a, rtol=0, atol=1e-5)
        state = net.estimate_flow(frames[1][..., :64], frames[2][..., :64])
        t = torch.tensor([0.4])
        torch.testing.assert_close(regions.synthesize(state, t), net.synthesize(state, t), rtol=0, atol=1e-5)


@pytest.mark.parametrize("widths", [(4, 12, 1), (4, 24, 1), (3, 5, 7, 16)])
def test_run_padded_gives_the_stacks_own_values(widths):
    """layers.run_padded (the metric's convolutions on a GPU, F81): a stack of conv blocks with its channels
    zero-extended to multiples of 8 gives the stack's own output, gradients included."""
    from softsplat_vfi.model.layers import conv, run_padded

    torch.manual_seed(0)
    blocks = [conv(a, b, act=i < len(widths) - 2) for i, (a, b) in enumerate(zip(widths, widths[1:]))]
    stack = torch.nn.Sequential(*blocks)
    x = torch.randn(2, widths[0], 18, 22, requires_grad=True)
    plain = stack(x)
    padded = run_padded(stack, x)
    assert padded.shape == plain.shape == (2, widths[-1], 18, 22)
    torch.testing.assert_close(padded, plain, rtol=0, atol=1e-5)
    grads = torch.autograd.grad(padded.square().sum(), [x, *stack.parameters()])
    plain_grads = torch.autograd.grad(plain.square().sum(), [x, *stack.parameters()])
    for a, b in zip(grads, plain_grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_pad_channels_leaves_the_metric_to_pad_its_own():
    """runtime.pad_channels (--compile's padding) pads every other narrow convolution and leaves the metric, which
    pads its own on the GPU (``pads_own_channels``), as it is, called on the network or on the metric alone."""
    from softsplat_vfi.model.runtime import PaddedConv, pad_channels

    net = Network(NetworkConfig(metric_hidden=12))
    metric = [id(m) for m in net.metric.modules()]
    assert pad_channels(net) is net and pad_channels(net.metric) is net.metric
    assert [id(m) for m in net.metric.modules()] == metric
    assert any(isinstance(m, PaddedConv) for m in net.modules())


@pytest.mark.cuda
@pytest.mark.parametrize("hidden", [12, 24])
def test_the_metric_on_a_gpu_gives_its_plain_convolutions_values(hidden):
    """synthesis.Metric on CUDA runs its convolutions padded (layers.run_padded); float32 and bf16 autocast give
    the plain stack's values."""
    from softsplat_vfi.model.warp import backwarp

    torch.manual_seed(0)
    metric = Network(NetworkConfig(metric_hidden=hidden)).metric.cuda().eval()
    image, other = torch.rand(2, 1, 3, 64, 96, device="cuda")
    flow = 3 * torch.randn(1, 2, 64, 96, device="cuda")

    def plain() -> torch.Tensor:
        error = (image - backwarp(other, flow)).abs().mean(1, keepdim=True)
        return (metric.scale * error + metric.net(torch.cat([image - 0.5, error], 1))).clamp(-50.0, 50.0)

    with torch.no_grad():
        torch.testing.assert_close(metric(image, other, flow), plain(), rtol=1e-5, atol=1e-4)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            torch.testing.assert_close(metric(image, other, flow).float(), plain().float(), rtol=0.02, atol=0.1)


def test_config_overrides_name_the_fix():
    config = NetworkConfig().with_overrides(["flow_finest_level=0", "flow_hidden=64,32"])
    assert config.flow_finest_level == 0 and config.flow_hidden == (64, 32)
    with pytest.raises(ValueError, match="KEY one of"):
        NetworkConfig().with_overrides(["widht=3"])
    with pytest.raises(ValueError, match="KEY one of"):  # a removed stage is no key any more
        NetworkConfig().with_overrides(["refine_width=24"])
    with pytest.raises(ValueError, match="comma-separated integers"):
        NetworkConfig().with_overrides(["flow_hidden=a,b"])


def test_saved_configs_with_removed_stages_load_at_their_off_values(tmp_path):
    """Every saved config (weights metadata, a run's config.json) holds the removed stages' keys switched off: it
    loads as the network without them; one that switches a stage on names the key and where it went."""
    from safetensors.torch import load_file, save_file

    saved = {**NetworkConfig().to_dict(), "flow_refine_hidden": [], "refine_width": 0, "flow_upsample_hidden": 0}
    assert NetworkConfig.from_dict(json.loads(json.dumps(saved))) == NetworkConfig()
    with pytest.raises(ValueError, match=r"refine_width = 24, a stage removed .*findings\.md, F57"):
        NetworkConfig.from_dict({**saved, "refine_width": 24})
    with pytest.raises(ValueError, match="flow_refine_hidden"):
        NetworkConfig.from_dict({**saved, "flow_refine_hidden": [32]})
    with pytest.raises(ValueError, match="unknown network config keys"):
        NetworkConfig.from_dict({**saved, "widht": 3})
    # a weights file whose config switches one on: load_weights says so (a WeightsError, one line for the user)
    path = tmp_path / "grown.safetensors"
    save_weights(Network(NetworkConfig(full_width=8)), path)
    save_file(load_file(str(path)), str(path), metadata={
        **read_metadata(path), "config": json.dumps({**NetworkConfig(full_width=8).to_dict(),
                                                     "flow_upsample_hidden": 32})})
    with pytest.raises(WeightsError, match="flow_upsample_hidden = 32, a stage removed"):
        load_weights(path)


def test_weights_missing_and_corrupt(tmp_path):
    with pytest.raises(WeightsError, match="not found"):
        load_weights(tmp_path / "nope.safetensors")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"not a weights file")
    with pytest.raises(WeightsError, match="cannot read"):
        load_weights(bad)
    # an image passed as --weights: the message says what the file is not and what to pass instead
    image = tmp_path / "one.png"
    image.write_bytes((Path(__file__).resolve().parent.parent / "images" / "one.png").read_bytes())
    with pytest.raises(WeightsError, match="not a safetensors weights file .*weights/fast.safetensors"):
        load_weights(image)
    # reading only the metadata or the config says the same, as do tools that start there (training.export)
    from softsplat_vfi.model.weights import read_config, read_metadata
    from training.export import export_weights

    for read in (read_metadata, read_config, lambda p: export_weights(p, tmp_path / "out.safetensors", [1])):
        with pytest.raises(WeightsError, match="cannot read weights"):
            read(bad)
        with pytest.raises(WeightsError, match="not found"):
            read(tmp_path / "nope.safetensors")
    with pytest.raises(WeightsError, match="not found"):
        load_weights(tmp_path / "nope.safetensors", config=NetworkConfig())


def test_weights_that_do_not_fit(tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "w.safetensors"
    save_file({"encoder.levels.0.0.0.weight": torch.zeros(1)}, str(path),
              metadata={"config": json.dumps(NetworkConfig().to_dict())})
    with pytest.raises(WeightsError, match="does not fit"):
        load_weights(path)


# ---------------------------------------------------------------- CUDA ---

@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("radius", [3, 2])
def test_cuda_correlation_matches_pytorch(dtype, radius):
    g = torch.Generator().manual_seed(1)
    one, two = torch.randn(2, 2, 24, 33, 47, generator=g, dtype=torch.float64)
    a = one.to("cuda", dtype).requires_grad_()
    b = two.to("cuda", dtype).requires_grad_()
    ra = one.clone().requires_grad_()
    rb = two.clone().requires_grad_()
    out = correlation(a, b, radius)
    ref = correlation_torch(ra, rb, radius)
    assert out.dtype == dtype
    tol = 2e-2 if dtype != torch.float32 else 1e-4
    torch.testing.assert_close(out.double().cpu(), ref, rtol=tol, atol=tol)
    grad = torch.randn_like(ref)
    out.backward(grad.to("cuda", dtype))
    ref.backward(grad)
    torch.testing.assert_close(a.grad.double().cpu(), ra.grad, rtol=tol * 5, atol=tol * 5)
    torch.testing.assert_close(b.grad.double().cpu(), rb.grad, rtol=tol * 5, atol=tol * 5)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape, radius", [((2, 13, 33, 47), 3), ((1, 40, 16, 16), 4), ((3, 1, 5, 70), 2)])
def test_cuda_correlation_half_io_is_the_float_path_rounded(dtype, shape, radius):
    """The forward reads bfloat16/float16 maps as they are and writes its output in their dtype: the same sums, in
    the same channel order, as float32 copies of the inputs give, rounded once. Channel counts that fill no whole
    chunk, frames that fill no whole tile and a window wider than the frame included."""
    g = torch.Generator().manual_seed(3)
    one, two = (torch.randn(*shape, generator=g).to("cuda", dtype) for _ in range(2))
    out = correlation(one, two, radius)
    assert out.dtype == dtype and out.shape == (shape[0], (2 * radius + 1) ** 2, *shape[2:])
    assert torch.equal(out, correlation(one.float(), two.float(), radius).to(dtype))
    torch.testing.assert_close(out.double().cpu(), correlation_torch(one.double().cpu(), two.double().cpu(), radius),
                               rtol=2e-2, atol=2e-2)


@pytest.mark.cuda
def test_cuda_network_matches_cpu():
    torch.manual_seed(0)
    net = Network(NetworkConfig()).eval()
    one, two = torch.rand(1, 3, 96, 128), torch.rand(1, 3, 96, 128)
    with torch.no_grad():
        cpu = net(one, two, [0.3])[0]
        gpu = net.cuda()(one.cuda(), two.cuda(), [0.3])[0].cpu()
    torch.testing.assert_close(gpu, cpu, rtol=5e-3, atol=5e-3)


# ------------------------------------------------------- published net ---

def test_published_architecture_matches_committed_keys():
    from pathlib import Path

    from softsplat_vfi.model.published import PublishedNetwork

    keys = Path(__file__).resolve().parent.parent / "softsplat_vfi" / "model" / "published_keys.json"
    committed = json.loads(keys.read_text())
    state = PublishedNetwork().state_dict()
    assert sorted(state) == sorted(committed)
    for key, shape in committed.items():
        assert list(state[key].shape) == shape, key
    # ../shared/ANCHORS.md measured the published network at 7.67 M parameters
    total = sum(v.numel() for v in state.values())
    assert round(total / 1e6, 2) == 7.67, total


def test_published_checkpoint_loads_with_module_prefix(tmp_path):
    from softsplat_vfi.model.published import PublishedNetwork
    from softsplat_vfi.model.weights import load_any

    torch.manual_seed(0)
    net = PublishedNetwork().eval()
    # the released files use 'module' where the class has 'net' (their run.py renames on load)
    state = {k.replace("net", "module"): v for k, v in net.state_dict().items()}
    assert "moduleFlow.moduleExtractor.moduleFirst.0.weight" in state
    path = tmp_path / "network-lf.pytorch"
    torch.save(state, path)
    loaded = load_any(path)
    one, two = torch.rand(1, 3, 33, 45), torch.rand(1, 3, 33, 45)
    with torch.no_grad():
        a = net(one, two, [0.5])[0]
        b = loaded(one, two, [0.5])[0]
    assert a.shape == one.shape
    torch.testing.assert_close(a, b)


def test_published_checkpoint_that_does_not_fit(tmp_path):
    from softsplat_vfi.model.weights import load_any

    path = tmp_path / "network-x.pytorch"
    torch.save({"moduleFlow.bogus": torch.zeros(1)}, path)
    with pytest.raises(WeightsError, match="does not fit the published architecture"):
        load_any(path)


@pytest.mark.cuda
def test_cuda_published_network_and_graph_runtime():
    from softsplat_vfi.model.published import PublishedNetwork
    from softsplat_vfi.model.runtime import GraphedNetwork

    torch.manual_seed(0)
    one, two = torch.rand(1, 3, 64, 96), torch.rand(1, 3, 64, 96)
    pub = PublishedNetwork().eval()
    with torch.no_grad():
        cpu = pub(one, two, [0.5])[0]
        gpu = pub.cuda()(one.cuda(), two.cuda(), [0.5])[0].cpu()
    torch.testing.assert_close(gpu, cpu, rtol=5e-3, atol=5e-3)
    net = Network().cuda().eval()
    graphed = GraphedNetwork(net, one.shape, [0.25, 0.5])
    with torch.no_grad():
        eager = net(one.cuda(), two.cuda(), [0.25, 0.5])
    for a, b in zip(graphed(one.cuda(), two.cuda()), eager):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


@pytest.mark.cuda
@pytest.mark.parametrize("autocast", [None, torch.bfloat16])
def test_cuda_graphed_pairs_match_the_eager_network(autocast):
    """GraphedPairs (run.py's default for videos on CUDA): for a size that needs padding, any times, and a second
    pair after the first (the replay reads the new inputs), the frames of the eager network; and through
    interpolate_integer the same uint8 frames to within one level."""
    from softsplat_vfi.model.inference import RunSettings, interpolate_integer
    from softsplat_vfi.model.runtime import GraphedPairs, graphed_pairs

    torch.manual_seed(0)
    net = Network().cuda().eval()
    shape = (1, 3, 70, 100)  # padded to 96 x 128 inside
    graphed = GraphedPairs(net, shape, autocast)
    tolerance = 1e-4 if autocast is None else 2e-2
    for pair in range(2):
        one, two = torch.rand(shape, device="cuda"), torch.rand(shape, device="cuda")
        times = [0.5] if pair == 0 else [0.2, 0.5, 0.9]
        with torch.no_grad(), torch.autocast("cuda", dtype=autocast or torch.float32, enabled=autocast is not None):
            eager = [o.float().clamp(0, 1) for o in net(one, two, times)]
        outs = graphed(one, two, times)
        assert len(outs) == len(times)
        for a, b in zip(outs, eager):
            assert a.shape == b.shape == shape
            torch.testing.assert_close(a, b, rtol=tolerance, atol=tolerance)
    with pytest.raises(ValueError, match="captured for"):
        graphed(torch.rand(1, 3, 64, 64, device="cuda"), torch.rand(1, 3, 64, 64, device="cuda"), [0.5])
    with pytest.raises(ValueError, match="strictly between"):
        graphed(one, two, [1.0])
    rng = np.random.default_rng(0)
    a8 = rng.integers(0, 256, (70, 100, 3), dtype=np.uint8)
    b8 = np.roll(a8, 3, axis=1)
    runner = graphed_pairs(net, shape, autocast)
    assert runner is not None
    via_graphs = interpolate_integer(net, a8, b8, [0.3, 0.6], RunSettings(autocast), graphed=runner)
    eager8 = interpolate_integer(net, a8, b8, [0.3, 0.6], RunSettings(autocast))
    for g, e in zip(via_graphs, eager8):
        assert g.dtype == np.uint8 and g.shape == a8.shape
        assert np.abs(g.astype(int) - e.astype(int)).max() <= (1 if autocast is None else 8)


@pytest.mark.cuda
@pytest.mark.parametrize("neighbours", [False, True])
def test_cuda_graphed_pairs_with_auto_flow_scale_match_the_eager_network(neighbours, monkeypatch):
    """GraphedPairs with flow scale "auto" (three flow graphs, the half-scale one replayed only for a candidate pair)
    gives the eager network's flows and frames, whichever scale each pair keeps. Every pair is a candidate here,
    and the warp error is replaced by the flows' mean, lower or higher wins by ``sign``: over both signs every pair
    keeps its half-scale flows once and its full-scale ones once."""
    import softsplat_vfi.model.network
    from softsplat_vfi.model.runtime import GraphedPairs

    torch.manual_seed(0)
    net = Network().cuda().eval()
    shape = (1, 3, 70, 100)
    padder = InputPadder(shape, 32)
    smooth = torch.rand(8, 3, 9, 12, generator=torch.Generator().manual_seed(1))
    frames = F.interpolate(smooth, size=shape[2:], mode="bilinear").cuda().split(1)
    monkeypatch.setattr(softsplat_vfi.model.network, "AUTO_MOTION_PX", -1.0)
    kept_half = []
    for sign in (1.0, -1.0):
        monkeypatch.setattr(softsplat_vfi.model.network, "warp_error",
                            lambda one, two, fwd, bwd, s=sign: s * fwd.float().mean(dim=(1, 2, 3)))
        graphed = GraphedPairs(net, shape, neighbours=neighbours, flow_scale="auto")
        for one, two in zip(frames[0::2], frames[1::2]):
            with torch.no_grad():
                eager = net.estimate_flow(*padder.pad(one, two), "auto")
                full = net.estimate_flow(*padder.pad(one, two))
                frame = net(one, two, [0.3], "auto")[0].clamp(0, 1)
            state = graphed.flow_state(one, two)
            torch.testing.assert_close(state.flow_fwd, eager.flow_fwd, rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(state.metric_two, eager.metric_two, rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(graphed(one, two, [0.3])[0], frame, rtol=1e-4, atol=1e-4)
            kept_half.append(not torch.allclose(eager.flow_fwd, full.flow_fwd))
    assert kept_half[:4] == [not k for k in kept_half[4:]]  # each pair: half scale under one sign, full under the other


def test_interpolate_with_alpha_shapes_and_integer_frames():
    """interpolate_with_alpha checks alpha's shape; its integer form takes and returns H x W x 4 uint8 or uint16,
    static frames staying themselves (alpha included) to within a level or two."""
    from softsplat_vfi.model.inference import interpolate_integer_alpha, interpolate_with_alpha

    net = load_weights("weights/network.safetensors").eval()  # trained: no motion between equal frames
    one = torch.rand(1, 3, 40, 56)
    with pytest.raises(ValueError, match="alpha must be N x 1 x H x W"):
        interpolate_with_alpha(net, one, one, torch.rand(1, 3, 40, 56), torch.rand(1, 3, 40, 56))
    rng = np.random.default_rng(0)
    for dtype, top in ((np.uint8, 255), (np.uint16, 65535)):
        frame = rng.integers(0, top + 1, (40, 56, 4)).astype(dtype)
        frame[:, :, 3] = np.linspace(0, top, 56).astype(dtype)  # a smooth alpha ramp
        out = interpolate_integer_alpha(net, frame, frame, [0.25, 0.5])
        assert len(out) == 2 and all(o.dtype == dtype and o.shape == (40, 56, 4) for o in out)
        # a static frame's alpha is splatted onto itself: unchanged to within a few levels
        assert np.abs(out[0][:, :, 3].astype(np.int64) - frame[:, :, 3]).max() <= 3 * (top // 255)
    with pytest.raises(ValueError, match="H x W x 4"):
        interpolate_integer_alpha(net, frame[:, :, :3], frame[:, :, :3])


@pytest.mark.cuda
def test_cuda_compiled_network_keeps_quadratic_paths_and_cuda_graphs(capsys):
    """--compile compiles the regions of a copy of the network: it stays a Network, so the engine runs it
    along quadratic paths as CUDA graphs (no note about constant velocity), with frames within float rounding of
    the plain network's."""
    from softsplat_vfi.engine import Interpolator, InterpolatorOptions

    options = InterpolatorOptions(device="cuda", tile=0, precision="fp32", weights=Path("weights/fast.safetensors"))
    plain = Interpolator(options)
    compiled = Interpolator(dataclasses.replace(options, compile=True))
    assert isinstance(compiled.network, Network) and compiled.network is not plain.network
    rng = np.random.default_rng(0)
    scene = cv2.GaussianBlur(rng.integers(0, 256, (64, 120, 3), dtype=np.uint8), (7, 7), 0)
    frames = [np.ascontiguousarray(scene[:, 6 * i:6 * i + 96]) for i in range(4)]
    outs = [interp.interpolate_integer_with_neighbours(frames[1], frames[2], [0.5], (frames[0], 1.0),
                                                       (frames[3], 1.0))[0] for interp in (plain, compiled)]
    assert "constant velocity" not in capsys.readouterr().err
    assert compiled.cuda_graphs_for(64, 96, True) is not None
    assert np.abs(outs[0].astype(int) - outs[1].astype(int)).max() <= 2


@pytest.mark.cuda
def test_cuda_alpha_matches_cpu():
    """interpolate_with_alpha on the GPU (CUDA softsplat) gives the CPU's colour and alpha."""
    from softsplat_vfi.model.inference import interpolate_with_alpha

    torch.manual_seed(0)
    net = load_weights("weights/network.safetensors").eval()
    # smooth content moving 2 px: on random noise the trained network's flow is ill-posed, and TF32 against fp32
    # rounding moved a few pixels' colour by 0.01 (session 12); here both devices see one clear motion
    scene = torch.nn.functional.interpolate(torch.rand(1, 3, 7, 9), size=(48, 68), mode="bicubic",
                                            align_corners=False).clamp(0, 1)
    one, two = scene[..., 2:66].contiguous(), scene[..., :64].contiguous()
    ramp = torch.linspace(0, 1, 64).expand(1, 1, 48, 64)  # smooth alpha: float rounding moves no edges
    alpha_one, alpha_two = ramp.clone(), ramp.flip(-1).contiguous()
    cpu = interpolate_with_alpha(net, one, two, alpha_one, alpha_two, [0.3, 0.7])
    gpu = interpolate_with_alpha(net.cuda(), one.cuda(), two.cuda(), alpha_one.cuda(), alpha_two.cuda(), [0.3, 0.7])
    for (c_cpu, a_cpu), (c_gpu, a_gpu) in zip(cpu, gpu):
        torch.testing.assert_close(c_gpu.cpu(), c_cpu, rtol=5e-3, atol=5e-3)
        torch.testing.assert_close(a_gpu.cpu(), a_cpu, rtol=5e-3, atol=5e-3)


@pytest.mark.cuda
def test_cuda_graphed_pairs_on_a_second_gpu():
    """torchrun's second process runs its network on cuda:1 while cuda:0 is the current device: the graphs are
    captured and replayed on the network's GPU and give its eager frames (needs two GPUs)."""
    from softsplat_vfi.model.runtime import GraphedNetwork, GraphedPairs

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    torch.manual_seed(0)
    shape = (1, 3, 64, 96)
    # a graph on cuda:0 first: torch.cuda.graph's default capture stream is then made on cuda:0, where a capture
    # for cuda:1 failed (cudaErrorStreamCaptureUnsupported in cuDNN) before the graphs took a stream of their own
    GraphedPairs(Network().to("cuda:0").eval(), shape)
    net = Network().to("cuda:1").eval()
    assert torch.cuda.current_device() == 0
    graphed = GraphedPairs(net, shape)
    one, two = torch.rand(shape, device="cuda:1"), torch.rand(shape, device="cuda:1")
    with torch.no_grad():
        eager = [o.clamp(0, 1) for o in net(one, two, [0.3, 0.6])]
    for a, b in zip(graphed(one, two, [0.3, 0.6]), eager):
        assert a.device == torch.device("cuda:1")
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    whole = GraphedNetwork(net, shape, [0.3, 0.6])  # the benchmarks' one-graph twin
    for a, b in zip(whole(one, two), eager):
        torch.testing.assert_close(a.clamp(0, 1), b, rtol=1e-4, atol=1e-4)


def test_graphed_pairs_need_cuda():
    from softsplat_vfi.model.runtime import GraphedPairs

    with pytest.raises(ValueError, match="CUDA device"):
        GraphedPairs(Network().eval(), (1, 3, 64, 64))


def _noise_clip():
    """A 3-frame 300 x 300 clip of fixed random noise, the texture source of the synthetic-data tests."""
    import training.data as data

    noise = torch.rand(3, 3, 300, 300, generator=torch.Generator().manual_seed(0))
    return data.Clip("t", (noise * 255).byte(), 3.0, (), torch.zeros(2, dtype=torch.bool))


def test_augmented_synthetic_flow_still_warps_two_onto_one():
    """Flips, transposes and reversal must transform the ground-truth flow with the frames."""
    import training.data as data

    g = torch.Generator().manual_seed(0)
    yy, xx = torch.meshgrid(torch.arange(300.0), torch.arange(300.0), indexing="ij")
    texture = torch.stack([(torch.sin(xx / 7) + 1) * 120, (torch.cos(yy / 9) + 1) * 120, (xx + yy) % 255])
    clip = data.Clip("t", texture.unsqueeze(0).repeat(3, 1, 1, 1).byte(), 3.0, (), torch.zeros(2, dtype=torch.bool))
    sampler = data.FootageSampler([clip], 128, generator=g)
    for seed in range(6):
        for small_share, layers, motion_scale in ((0.0, 2, 1.0), (1.0, 2, 1.0), (0.0, 4, 1.5), (0.5, 4, 2.0)):
            batch = data.synthetic_batch(sampler, 4, 128, gen=torch.Generator().manual_seed(seed),
                                         small_share=small_share, layers=layers, motion_scale=motion_scale)
            warped = backwarp(batch["two"], batch["flow_fwd"])
            inside = (warped.abs().sum(1, keepdim=True) > 0).float()
            error = ((warped - batch["one"]).abs() * inside).mean()
            assert error < 0.5 * (batch["two"] - batch["one"]).abs().mean()


def test_small_motion_share_shrinks_synthetic_motion():
    import training.data as data

    clip = _noise_clip()
    sampler = data.FootageSampler([clip], 128, generator=torch.Generator().manual_seed(0))

    def mean_motion(share):
        batch = data.synthetic_batch(sampler, 32, 128, gen=torch.Generator().manual_seed(1), small_share=share)
        return float(batch["flow_fwd"].norm(dim=1).mean())

    assert mean_motion(1.0) < mean_motion(0.0) / 2
    with pytest.raises(ValueError, match="small_share"):
        data.synthetic_batch(sampler, 2, 128, small_share=2.0)


def test_synthetic_layers_and_motion_scale():
    import training.data as data

    clip = _noise_clip()
    sampler = data.FootageSampler([clip], 128, generator=torch.Generator().manual_seed(0))

    def batch(**kw):
        return data.synthetic_batch(sampler, 32, 128, gen=torch.Generator().manual_seed(1), **kw)

    def distinct_motions(b):  # the spread of the flow's magnitude within each sample, averaged
        return b["flow_fwd"].norm(dim=1).flatten(1).std(1).mean()

    # the same draws with larger shifts: larger flow (26 against 13 px here); more layers: more independently moving
    # regions, more spread of the flow (8.7 against 5.5 px)
    assert float(batch(motion_scale=2.0)["flow_fwd"].norm(dim=1).mean()) > \
        1.5 * float(batch()["flow_fwd"].norm(dim=1).mean())
    assert float(distinct_motions(batch(layers=5))) > float(distinct_motions(batch(layers=1)))
    for bad in ({"layers": 0}, {"motion_scale": 0.0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            data.synthetic_batch(sampler, 2, 128, **bad)


def test_synthetic_edge_px_sharpens_layer_edges():
    import training.data as data

    # flat frames of distinct grey levels: every pixel between two levels lies on a layer's edge
    levels = torch.tensor([30.0, 130.0, 230.0]).view(3, 1, 1, 1).expand(3, 3, 200, 200)
    clip = data.Clip("t", levels.byte().contiguous(), 3.0, (), torch.zeros(2, dtype=torch.bool))

    def edge_pixels(edge_px, edge_share=1.0):
        sampler = data.FootageSampler([clip], 128, generator=torch.Generator().manual_seed(0))
        batch = data.synthetic_batch(sampler, 16, 128, gen=torch.Generator().manual_seed(3), edge_px=edge_px,
                                     edge_share=edge_share)
        grey = batch["one"][:, 0] * 255
        flat = ((grey - levels[:, 0, 0, 0].view(3, 1, 1, 1)).abs() < 2).any(0)
        return (~flat).flatten(1).sum(1)  # per sample

    soft, sharp = edge_pixels(0.0), edge_pixels(1.0)
    assert 0 < sharp.sum() < soft.sum() / 5
    # the same scenes at every share: 0 renders the soft edges, 0.5 each sample with one kind or the other, both kinds
    assert torch.equal(edge_pixels(1.0, 0.0), soft)
    mixed = edge_pixels(1.0, 0.5)
    is_sharp, is_soft = (mixed == sharp) & (sharp != soft), (mixed == soft) & (sharp != soft)
    assert bool(((mixed == sharp) | (mixed == soft)).all()) and bool(is_sharp.any()) and bool(is_soft.any())
    with pytest.raises(ValueError, match="edge_px"):
        data.synthetic_batch(data.FootageSampler([clip], 128), 2, 128, edge_px=-1.0)
    with pytest.raises(ValueError, match="edge_share"):
        data.synthetic_batch(data.FootageSampler([clip], 128), 2, 128, edge_px=1.0, edge_share=1.5)


def test_synthetic_stripes_texture_layers_with_fine_gratings_and_keep_the_motion(monkeypatch):
    """synthetic_batch(stripe_share=...): layers textured with straight gratings of 4-16 px period; drawn last, so
    the motions (and the ground-truth flow) are those of the same scenes without stripes, and that flow still warps
    the second frame onto the first."""
    import training.data as data

    flat = torch.full((2, 6, 3, 128, 128), 0.5)  # no detail: the gratings are pure stripes
    ys, xs = torch.meshgrid(torch.arange(128.0), torch.arange(128.0), indexing="ij")
    grid = torch.stack([xs, ys], -1)
    gratings = data._gratings(flat, 1.0, torch.Generator().manual_seed(0), grid)
    periods = []
    for grating in gratings.flatten(0, 1):
        spectrum = torch.fft.rfft2(grating[0] - grating[0].mean()).abs()
        ky, kx = divmod(int(spectrum.argmax()), spectrum.shape[1])
        ky = min(ky, 128 - ky)
        periods.append(128 / max((kx ** 2 + ky ** 2) ** 0.5, 1e-9))
        assert float(grating.std()) > 0.01 or float((grating.amax() - grating.amin())) < 0.05  # (two close colours)
    assert 3.8 <= min(periods) and max(periods) <= 17.0  # 4-16 px, within the FFT's bins
    assert max(periods) / min(periods) > 1.5  # a spread of periods, not one
    assert torch.equal(data._gratings(flat, 0.0, torch.Generator().manual_seed(0), grid), flat)

    monkeypatch.setattr(data, "augment", lambda b, gen: b)
    clip = _noise_clip()

    def scenes(**kw):  # a fresh sampler each time: it draws the texture cuts from its own generator
        sampler = data.FootageSampler([clip], 128, generator=torch.Generator().manual_seed(0))
        return data.synthetic_batch(sampler, 8, 128, layers=2, gen=torch.Generator().manual_seed(1), **kw)

    plain, none, striped = scenes(), scenes(stripe_share=0.0), scenes(stripe_share=1.0)
    for key in ("one", "mid", "two", "t", "flow_fwd", "flow_bwd"):
        assert torch.equal(plain[key], none[key])  # share 0 draws nothing: the random stream of every recipe
    for key in ("t", "flow_fwd", "flow_bwd"):
        assert torch.equal(plain[key], striped[key])
    assert float((plain["one"] - striped["one"]).abs().mean()) > 0.05
    warped = backwarp(striped["two"], striped["flow_fwd"])
    inside = (warped.abs().sum(1, keepdim=True) > 0).float()
    assert ((warped - striped["one"]).abs() * inside).mean() < 0.5 * (striped["two"] - striped["one"]).abs().mean()
    with pytest.raises(ValueError, match="stripe_share"):
        scenes(stripe_share=1.5)


@pytest.mark.parametrize("dtype,scale", [(np.uint8, 255.0), (np.uint16, 65535.0)])
def test_interpolate_integer_matches_float_path(dtype, scale):
    torch.manual_seed(0)
    net = Network().eval()
    rng = np.random.default_rng(0)
    one = rng.integers(0, int(scale) + 1, (40, 56, 3)).astype(dtype)
    two = rng.integers(0, int(scale) + 1, (40, 56, 3)).astype(dtype)
    outs = interpolate_integer(net, one, two, [0.25, 0.5])
    ref = interpolate(net, one / scale, two / scale, [0.25, 0.5])
    for out, r in zip(outs, ref):
        assert out.dtype == dtype and out.shape == one.shape
        assert np.abs(out.astype(np.float64) - np.rint(r * scale)).max() <= 1


def test_interpolate_integer_rejects_float_frames():
    net = Network().eval()
    frame = np.zeros((32, 32, 3), np.float32)
    with pytest.raises(ValueError, match="uint8 or uint16"):
        interpolate_integer(net, frame, frame)


def test_ensemble_averages_mirrored_and_reversed_passes():
    from softsplat_vfi.model.ensemble import EnsembleNetwork, with_ensemble

    torch.manual_seed(0)
    net = Network(NetworkConfig(full_width=8)).eval()
    one, two = torch.rand(1, 3, 40, 56), torch.rand(1, 3, 40, 56)
    times = [0.3, 0.5]
    with torch.no_grad():
        plain = net(one, two, times)
        mirrored = [o.flip(3) for o in net(one.flip(3), two.flip(3), times)]
        reversed_ = net(two, one, [0.7, 0.5])
        both = [o.flip(3) for o in net(two.flip(3), one.flip(3), [0.7, 0.5])]
        two_pass = EnsembleNetwork(net, 2)(one, two, times)
        four_pass = with_ensemble(net, 4)(one, two, times)
    for i in range(2):
        torch.testing.assert_close(two_pass[i], (plain[i] + mirrored[i]) / 2)
        torch.testing.assert_close(four_pass[i], (plain[i] + mirrored[i] + reversed_[i] + both[i]) / 4)
    assert with_ensemble(net, 1) is net
    with pytest.raises(ValueError, match="1, 2 or 4"):
        with_ensemble(net, 3)
    with pytest.raises(ValueError, match="2 or 4 passes"):
        EnsembleNetwork(net, 1)


def test_ensemble_along_quadratic_paths_mirrors_all_four_frames_and_reverses_the_pair_with_its_neighbours():
    from softsplat_vfi.model.ensemble import with_ensemble

    torch.manual_seed(1)
    net = Network(NetworkConfig(full_width=8)).eval()
    before, one, two, after = (torch.rand(1, 3, 40, 56) for _ in range(4))
    with torch.no_grad():
        plain = net.forward_four(before, one, two, after, [0.3])[0]
        mirrored = net.forward_four(*(x.flip(3) for x in (before, one, two, after)), [0.3])[0].flip(3)
        reversed_ = net.forward_four(after, two, one, before, [0.7])[0]
        both = net.forward_four(*(x.flip(3) for x in (after, two, one, before)), [0.7])[0].flip(3)
        two_pass = with_ensemble(net, 2).forward_four(before, one, two, after, [0.3])[0]
        four_pass = with_ensemble(net, 4).forward_four(before, one, two, after, [0.3])[0]
    torch.testing.assert_close(two_pass, (plain + mirrored) / 2)
    torch.testing.assert_close(four_pass, (plain + mirrored + reversed_ + both) / 4)
    assert (two_pass - plain).abs().max() > 1e-4


def test_motion_boundaries_mark_the_edges_of_a_moving_square():
    import training.data as data

    yy, xx = torch.meshgrid(torch.arange(96.0), torch.arange(96.0), indexing="ij")
    background = torch.stack([(torch.sin(xx / 5) + 1) / 2, (torch.cos(yy / 7) + 1) / 2, ((xx + 2 * yy) % 32) / 32])
    square = torch.stack([(torch.sin((xx + yy) / 3) + 1) / 2] * 3)
    one, two = background.clone(), background.clone()
    one[:, 30:60, 30:60] = square[:, 30:60, 30:60]
    two[:, 30:60, 36:66] = square[:, 30:60, 30:60]  # the square moves 6 px to the right, the background stays
    mask = data.motion_boundaries(one[None], two[None])[0, 0]
    assert mask.shape == (96, 96) and mask.dtype == torch.bool
    assert bool(mask[45, 27:34].any()) and bool(mask[45, 57:64].any())  # its left and right edges
    assert not bool(mask[:10].any()) and not bool(mask[85:].any())  # far from the square: static background
    assert not bool(mask[40:50, 42:48].any())  # inside the square: uniform motion
