"""The trainer: recipes and flags, its pieces on tensors, and a few real CPU runs on generated clips (one shared run,
its resume, a start from its weights, and two processes through torchrun)."""

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch

import train
from tests.training_fixtures import free_port, run_args, torchrun
from training.config import LEGACY, RECIPES, REMOVED, ConfigError, TrainConfig, TrainingError, flag
from training.options import RunOptions, build_parser, parse
from training.trainer import start_point

ROOT = Path(__file__).resolve().parent.parent
FAST = ROOT / "softsplat_vfi" / "weights" / "fast.safetensors"
DEFAULT = ROOT / "softsplat_vfi" / "weights" / "network.safetensors"
# what scripts/remote/env.sh exports: NVLink multicast off in NCCL, PyTorch's symmetric memory and NVSHMEM
MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _options(tmp_path, *extra):
    return parse(["--data", str(tmp_path), "--out", str(tmp_path / "out"), *extra])


# -- recipes and flags -----------------------------------------------------------------------------------------

def test_the_fast_weights_record_the_fast_psnr_recipe_from_their_third_stage():
    """weights/fast.safetensors: recipe "fast-psnr" in its second run (the fourth stage), which started from the
    third stage's kept step 36000 and kept step 40000; "fast-psnr" is "fast" on the PSNR loss at 3e-5 without
    the filter, validated on the held-out source repositories."""
    from softsplat_vfi.model.weights import read_metadata

    metadata = read_metadata(FAST)
    recorded = json.loads(metadata["train_config"])
    stage = dataclasses.replace(RECIPES["fast-psnr"], schedule_start=36000)
    assert TrainConfig.from_dict(recorded) == stage
    assert stage.schedule_start < int(metadata["step"]) == 40000 < stage.schedule_start + stage.total_steps
    assert float(metadata["holdout_margin"]) > 0.15
    # every field the weights record is the recipe's, exactly (nothing taken from LEGACY), or a removed option
    # at the value every recipe kept
    for name, value in recorded.items():
        expected = getattr(stage, name) if name not in REMOVED else REMOVED[name]
        assert (list(expected) if isinstance(expected, tuple) else expected) == value, name
    changed = {f.name for f in dataclasses.fields(TrainConfig)
               if getattr(RECIPES["fast-psnr"], f.name) != getattr(RECIPES["fast"], f.name)}
    assert changed == {"schedule_start", "total_steps", "lr", "reconstruction", "max_nonlinearity",
                       "validation_clips"}
    assert TrainConfig() == RECIPES["fast"]  # train.py's defaults: the fast weights' second stage


def test_the_default_weights_are_the_last_stage_on_mixed_paths_at_width_2():
    """weights/network.safetensors: the study's network at width 2 with two flow passes below the coarsest level,
    as trained by its thirteenth stage, recipe "quality-psnr-mixed", to the end of its schedule: stages 11 and 12
    ("quality-psnr-quadratic": "quality-psnr-stripes" along quadratic paths) again with half the footage triplets at
    constant velocity, from stage 12's end (docs/training.md). Stages 8-10 are "quality-psnr" again from step 69919
    with 20% synthetic samples, stage 10 with a tenth of the synthetic layers striped."""
    from softsplat_vfi.model.network import NetworkConfig
    from softsplat_vfi.model.weights import read_config, read_metadata

    stage = RECIPES["quality-psnr-syn20"]
    assert stage == dataclasses.replace(RECIPES["quality-psnr"], schedule_start=69919, synthetic_share=0.2)
    assert RECIPES["quality-psnr-stripes"] == dataclasses.replace(stage, synthetic_stripe_share=0.1)
    quadratic = RECIPES["quality-psnr-quadratic"]
    assert quadratic == dataclasses.replace(RECIPES["quality-psnr-stripes"], motion="quadratic")
    recipe = RECIPES["quality-psnr-mixed"]
    assert recipe == dataclasses.replace(quadratic, schedule_start=quadratic.schedule_start + 2 * quadratic.total_steps,
                                         quadratic_share=0.5)
    assert read_config(DEFAULT) == dataclasses.replace(NetworkConfig().widened(2), flow_iterations=(1, 2, 2, 2))
    metadata = read_metadata(DEFAULT)
    assert TrainConfig.from_dict(json.loads(metadata["train_config"])) == recipe
    assert int(metadata["step"]) == recipe.schedule_start + recipe.total_steps == 84919
    assert "averaged_from" not in metadata


def test_the_default_weights_stages_follow_on():
    """study → quality-384 → quality-512 → quality-no-census → quality-no-flow → quality → quality-psnr:
    each stage's schedule starts at the step where the one before it ends."""
    stages = [RECIPES[name] for name in ("study", "quality-384", "quality-512", "quality-no-census",
                                         "quality-no-flow", "quality", "quality-psnr")]
    for before, after in zip(stages, stages[1:]):
        assert after.schedule_start == before.schedule_start + before.total_steps
    # the same pixels per step in every stage (256² x 32 ≈ 384² x 14 ≈ 512² x 8, within 3%)
    pixels = [stage.crop ** 2 * stage.batch for stage in stages]
    assert max(pixels) / min(pixels) < 1.03


def test_the_study_recipe_is_the_fast_one_without_the_filter_from_scratch():
    changed = {f.name for f in dataclasses.fields(TrainConfig)
               if getattr(RECIPES["study"], f.name) != getattr(RECIPES["fast"], f.name)}
    assert changed == {"seed", "lr", "total_steps", "schedule_start", "max_nonlinearity", "validation_clips"}
    study = RECIPES["study"]
    assert (study.seed, study.lr, study.total_steps, study.schedule_start) == (80, 3e-4, 40000, 0)
    assert study.max_nonlinearity == 0 and study.validation_clips == ()  # held-out source repositories


def test_every_recipe_field_has_one_generated_flag(tmp_path):
    parser = build_parser()
    flags = {option for action in parser._actions for option in action.option_strings}
    for f in dataclasses.fields(TrainConfig):
        assert flag(f.name) in flags, f.name
    for f in dataclasses.fields(RunOptions):
        assert flag(f.name) in flags, f.name
    for removed in REMOVED:
        assert flag(removed) not in flags
    options, overrides = _options(tmp_path, "--synthetic-share", "0.4", "--no-bf16", "--validation-clips",
                                  "--max-gap", "3", "--seed", "5")
    assert overrides == {"synthetic_share": 0.4, "bf16": False, "validation_clips": (), "max_gap": 3, "seed": 5}
    assert options.recipe is None and options.minutes is None and options.data == (tmp_path,)
    assert "fills the rest) (fast: 0.5)" in " ".join(parser.format_help().split())


@pytest.mark.parametrize("option, value, message", [
    ("--synthetic-share", "1", "--synthetic-share must lie in [0, 1), got 1.0"),
    ("--synthetic-edge-share", "2", "--synthetic-edge-share must lie in [0, 1], got 2.0"),
    ("--synthetic-layers", "0", "--synthetic-layers must be at least 1, got 0"),
    ("--synthetic-motion", "0", "--synthetic-motion must be positive"),
    ("--flow-loss-weight", "-0.1", "--flow-loss-weight must be 0 or positive"),
    ("--census-weight", "-1", "--census-weight must be 0 or positive"),
    ("--weight-decay", "-1", "--weight-decay must be 0 or positive"),
    ("--paste-share", "-0.5", "--paste-share must lie in [0, 1]"),
    ("--native-share", "1.5", "--native-share must lie in [0, 1]"),
    ("--downscale-share", "1.5", "--downscale-share must lie in [0, 1]"),
    ("--max-nonlinearity", "-1", "--max-nonlinearity must be 0 or positive"),
    ("--ema-decay", "1.5", "--ema-decay must lie in [0, 1)"),
    ("--reconstruction", "l2", "--reconstruction must be one of laplacian, psnr, got l2"),
    ("--quadratic-share", "0.5", "--quadratic-share 0.5 picks triplets for quadratic paths: add --motion quadratic"),
])
def test_recipe_values_are_checked_naming_the_flag(tmp_path, option, value, message):
    options, overrides = _options(tmp_path, "--recipe", "study", option, value)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        start_point(options, overrides)


@pytest.mark.parametrize("argv, message", [
    (["--val-batches", "0"], "--val-batches must be at least 1"),
    (["--rewarm", "-1"], "--rewarm must be 0 or positive"),
    (["--val-every", "0"], "--val-every must be at least 1"),
    (["--width", "2", "--init-weights", "w.safetensors"], "--width builds a fresh network"),
    (["--flow-iterations", "0"], "--flow-iterations must be at least 1"),
    (["--flow-iterations", "2", "--resume", "runs/x"], "a resumed run keeps its own"),
    (["--nonlinearity", "missing.pt"], "--nonlinearity missing.pt: no such file"),
])
def test_run_options_are_checked_naming_the_flag(tmp_path, argv, message):
    with pytest.raises(ConfigError, match=message):
        _options(tmp_path, *argv)


def test_main_reports_an_error_once_without_a_traceback(footage, tmp_path, capsys):
    assert train.main(["--data", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "clips.jsonl" in err and "Traceback" not in err
    assert train.main(["--data", str(footage), "--out", str(tmp_path / "o"), "--ema-decay", "2"]) == 2
    assert capsys.readouterr().err == "error: --ema-decay must lie in [0, 1) (0 turns the average off), got 2.0\n"
    # a data mistake found while loading (a ValueError of the data library) is one line too
    args = run_args(footage, tmp_path / "o")
    args.insert(args.index(str(footage)), str(footage))  # --data FOOTAGE FOOTAGE
    assert train.main(args) == 2
    assert capsys.readouterr().err == "error: two footage folders list the same clip file: pass each folder once\n"


def test_saved_configs_of_older_code_load_or_fail_clearly():
    old = {"seed": 3, "batch": 32, "crop": 256, "lr": 3e-4, "synthetic_share": 0.3, "flow_loss_full_res": 1.0,
           "flow_loss_units": "level", "photometric_share": 0.0, "paste_layers": 1, "unknown_field": 7}
    config = TrainConfig.from_dict(old)
    # fields the old file lacks mean what the code of its time defaulted to
    assert config.seed == 3 and config.total_steps == LEGACY["total_steps"] == 60000
    assert config.max_nonlinearity == 0 and config.ema_decay == 0 and config.native_share == 0
    with pytest.raises(ConfigError, match="--flow-loss-units quarter, an option removed"):
        TrainConfig.from_dict({**old, "flow_loss_units": "quarter"}, "runs/x's recipe")
    # session 25's arms: L0b's recipe held the grating share at 0, SP's at 0.2; the option is back and both load
    assert TrainConfig.from_dict({**old, "synthetic_stripe_share": 0.0}) == config
    assert TrainConfig.from_dict({**old, "synthetic_stripe_share": 0.2}).synthetic_stripe_share == 0.2
    with open(ROOT / "docs" / "findings.md") as f:
        journal = f.read()
    for name in REMOVED:
        assert flag(name) in journal, name


# -- where a run starts ----------------------------------------------------------------------------------------

def test_start_point_takes_the_named_recipe_and_checks_the_schedule(tmp_path):
    options, overrides = _options(tmp_path)
    with pytest.raises(TrainingError, match="schedule starts at step 25000 and this run at step 0"):
        start_point(options, overrides)  # the fast recipe anneals the step-25000 weights
    options, overrides = _options(tmp_path, "--recipe", "study", "--width", "2", "--seed", "9")
    start = start_point(options, overrides)
    assert start.config == dataclasses.replace(RECIPES["study"], seed=9) and start.step == 0
    assert start.net_config.encoder_widths[0] == 2 * 24 and start.net_config.flow_finest_level == 1
    # the fast weights continue their recorded recipe where they stand in its schedule (steps 36000-41000)
    options, overrides = _options(tmp_path, "--init-weights", str(FAST))
    start = start_point(options, overrides)
    assert start.step == 40000 and start.config == dataclasses.replace(RECIPES["fast-psnr"], schedule_start=36000)
    # a schedule that ended at the weights' step: nothing to train
    options, overrides = _options(tmp_path, "--init-weights", str(FAST), "--schedule-start", "35000")
    with pytest.raises(TrainingError, match="step 40000 is at or past the end .* --schedule-start 40000"):
        start_point(options, overrides)
    options, overrides = _options(tmp_path, "--init-weights", str(FAST), "--recipe", "fast", "--schedule-start",
                                  "40000")
    start = start_point(options, overrides)
    assert start.step == 40000 and start.config == dataclasses.replace(TrainConfig(), schedule_start=40000)
    # more flow passes on trained weights: the same network and step, only the passes changed
    options, overrides = _options(tmp_path, "--init-weights", str(FAST), "--schedule-start", "40000",
                                  "--flow-iterations", "2")
    grown = start_point(options, overrides)
    assert grown.net_config == dataclasses.replace(start.net_config, flow_iterations=(2,)) and grown.step == 40000
    options, overrides = _options(tmp_path, "--init-weights", str(tmp_path / "none.safetensors"))
    with pytest.raises(TrainingError, match="--init-weights"):
        start_point(options, overrides)


# -- the step's pieces -----------------------------------------------------------------------------------------

def test_flow_loss_is_the_mean_over_levels_in_their_own_pixels():
    from training.step import step_losses

    pred = mid = torch.rand(2, 3, 64, 64)
    gt = torch.zeros(2, 2, 64, 64)  # one synthetic sample (the second): its forward flow, then its backward flow
    pyramid = []
    for size in (2, 16):  # 1/32 and 1/4 of 64 px, each off by 8 full-resolution pixels
        level = torch.zeros(4, 2, size, size)
        level[:, 0] = 8.0 * size / 64
        pyramid.append(level)
    loss, rec, census, flow = step_losses(pred, pyramid, mid, gt, 1, 2, 1.0, 0.05)
    assert float(flow) == pytest.approx((0.25 + 2.0) / 2)
    assert float(loss) == pytest.approx(float(rec) + float(census) + 0.05 * float(flow))
    assert float(step_losses(pred, pyramid, mid, None, 2, 2, 1.0, 0.05)[3]) == 0.0  # no synthetic samples


def test_psnr_reconstruction_is_the_mean_psnr_the_margin_averages():
    from evaluation.metrics import psnr
    from training.step import step_losses

    mid = torch.rand(3, 3, 32, 32)
    pred = (mid + torch.randn_like(mid) * torch.tensor([0.01, 0.03, 0.1]).view(3, 1, 1, 1)).clamp(0, 1)
    pred.requires_grad_(True)
    loss, rec, _, _ = step_losses(pred, [], mid, None, 3, 3, 0.0, 0.0, "psnr")
    mse = (pred.detach() - mid).square().flatten(1).mean(1)
    assert float(rec.detach()) == pytest.approx(float((10 * torch.log10(mse + 1e-5)).mean()), rel=1e-6)
    # the floor (a squared error of 1e-5, 50 dB) moves a 40 dB sample's score by 0.4 dB, a 30 dB sample's by 0.04
    assert float(rec.detach()) == pytest.approx(-float(psnr(pred.detach(), mid).mean()), abs=0.2)
    loss.backward()
    # each sample's gradient weighted by 1 / its squared error: the best-predicted sample pulls hardest per pixel
    per_sample = pred.grad.abs().flatten(1).mean(1)
    assert per_sample[0] > per_sample[1] > per_sample[2]
    laplacian = step_losses(pred.detach(), [], mid, None, 3, 3, 0.0, 0.0)[1]
    assert float(laplacian) > 0 > float(rec.detach())


def test_weight_average_ramps_saves_and_swaps():
    from training.step import WeightAverage

    net = torch.nn.Linear(2, 1)
    with torch.no_grad():
        net.weight.fill_(0.0)
    average = WeightAverage(net, 0.5)
    with torch.no_grad():
        net.weight.fill_(1.0)
    average.update()  # decay min(0.5, 1/10): the first update follows the weights almost at once
    assert float(average.average[0][0, 0]) == pytest.approx(0.9)
    state = average.state_dict()
    assert state["weight"].dtype == torch.float16 and int(state["_updates"][0]) == 1
    again = WeightAverage(net, 0.5)
    again.load(state)
    assert again.updates == 1 and float(again.average[0][0, 0]) == pytest.approx(0.9, abs=1e-3)
    with again.swapped():
        assert float(net.weight[0, 0].detach()) == pytest.approx(0.9, abs=1e-3)
    assert float(net.weight[0, 0].detach()) == 1.0


def test_schedule_restarts_and_rewarms():
    from training.schedule import learning_rate, rewarmed

    for offset in (0, 10, 999, 1000, 5000, 40000):
        assert learning_rate(31000 + offset, 1e-4, 1000, 40000, start=31000) == learning_rate(offset, 1e-4, 1000, 40000)
    assert learning_rate(31000, 1e-4, 1000, 40000, start=31000) == pytest.approx(1e-7)  # warm-up's first step
    rate = learning_rate(25000, 3e-4, 1000, 100000)
    assert rewarmed(rate, 25000, 25000, 500) == pytest.approx(rate / 500)  # the chunk's first step
    assert rewarmed(rate, 25249, 25000, 500) == pytest.approx(rate / 2)
    assert rewarmed(rate, 25500, 25000, 500) == rate and rewarmed(rate, 25000, 25000, 0) == rate


def test_ties_on_the_score_go_to_the_boundaries():
    from training.validation import replaces_kept

    # a clear gain on the score wins whatever the boundaries say
    assert replaces_kept(31.45, 23.0, 31.45, 31.43, 24.0)
    # within 0.005 of the kept score: the boundaries decide, both ways
    assert replaces_kept(31.430, 23.97, 31.432, 31.432, 23.87)
    assert not replaces_kept(31.434, 23.80, 31.434, 31.432, 23.87)
    # better boundaries but more than 0.005 below the best score so far: not kept (no drift down the score)
    assert not replaces_kept(31.426, 24.50, 31.432, 31.430, 23.87)
    # without boundary figures (old progress files), the higher score wins
    assert replaces_kept(31.433, None, 31.433, 31.432, None) and not replaces_kept(31.431, 24.0, 31.432, 31.432, None)
    # the first checkpoint of a fresh run is always kept
    assert replaces_kept(25.0, None, 25.0, -1.0, None)


def test_sampler_native_share_takes_consecutive_frames():
    from training.data import Clip, FootageSampler

    # frame i is filled with the value i: the triplet's frames tell which indices were taken
    frames = torch.arange(40, dtype=torch.uint8).view(40, 1, 1, 1).expand(40, 3, 70, 70).contiguous()
    clip = Clip("c", frames, 0.3, (), torch.zeros(39, dtype=torch.bool))  # slow: gaps widen up to 4

    def gaps(share):
        sampler = FootageSampler([clip], 64, 4, generator=torch.Generator().manual_seed(0), native_share=share)
        out = []
        for _ in range(60):
            _, a, b, c = sampler.triplet()
            out.append((b - a, c - b))
        return out

    assert all(g == (1, 1) for g in gaps(1.0))
    assert any(max(g) > 1 for g in gaps(0.0))
    mixed = gaps(0.5)
    assert 10 < sum(g == (1, 1) for g in mixed) < 60
    with pytest.raises(ValueError, match="native_share"):
        FootageSampler([clip], 64, native_share=1.5)


def test_sampler_downscale_share_shrinks_larger_crops():
    from training.data import Clip, FootageSampler

    # a vertical ramp: a crop shrunk from a larger window spans more grey levels per row
    ramp = torch.arange(200, dtype=torch.float32).view(1, 1, 200, 1).expand(30, 3, 200, 200)
    clip = Clip("c", ramp.round().to(torch.uint8).contiguous(), 3.0, (), torch.zeros(29, dtype=torch.bool))

    def spans(share):
        sampler = FootageSampler([clip], 64, 1, generator=torch.Generator().manual_seed(0), downscale_share=share)
        batch = sampler.batch(16)
        one = batch["one"] * 255
        assert one.shape == (16, 3, 64, 64) and batch["mid"].shape == one.shape
        # flips/transposes aside, a ramp's range within the crop is its window size - 1
        return (one.amax(dim=(1, 2, 3)) - one.amin(dim=(1, 2, 3))).round()

    assert torch.all(spans(0.0) == 63)
    wide = spans(1.0)
    assert torch.all(wide >= 62) and wide.max() > 80 and wide.max() <= 128
    with pytest.raises(ValueError, match="downscale_share"):
        FootageSampler([clip], 64, downscale_share=-0.1)


def test_sampler_neighbours_keep_the_triplets_and_add_the_outer_frames():
    """FootageSampler(neighbours=True): the same triplets, crops and augmentation as without, plus the frames a pair
    interval before one and after two where the shot has them (quad 1; copies of one and two otherwise, quad 0),
    reversed with the triplet; pasted layers (constant velocity) turn quad off for their rows."""
    from training.data import Clip, FootageSampler, paste_layers

    # frame i holds the value 4 i in every pixel: the frames tell which indices were taken, whatever the flips
    frames = (torch.arange(60, dtype=torch.uint8) * 4).view(60, 1, 1, 1).expand(60, 3, 70, 70).contiguous()
    clip = Clip("c", frames, 0.3, (30,), torch.zeros(59, dtype=torch.bool))  # a cut before frame 30

    def sampled(neighbours):
        sampler = FootageSampler([clip], 64, 4, generator=torch.Generator().manual_seed(1), native_share=0.3,
                                 neighbours=neighbours)
        return sampler, [sampler.batch(8) for _ in range(6)]

    _, plain = sampled(False)
    sampler, four = sampled(True)
    quads = []
    for a, b in zip(plain, four):
        assert set(b) == set(a) | {"before", "after", "quad"}
        for key in a:
            assert torch.equal(a[key], b[key]), key
        index = {k: (b[k][:, 0, 0, 0] * 255 / 4).round() for k in ("before", "one", "two", "after")}
        span = index["two"] - index["one"]  # negative where the batch was reversed in time
        for i, quad in enumerate(b["quad"].tolist()):
            quads.append(quad)
            if quad:
                assert index["before"][i] == index["one"][i] - span[i]
                assert index["after"][i] == index["two"][i] + span[i]
                lo, hi = sorted((float(index["before"][i]), float(index["after"][i])))
                assert hi < 30 or lo >= 30  # one shot
            else:
                assert torch.equal(b["before"][i], b["one"][i]) and torch.equal(b["after"][i], b["two"][i])
    assert 0 < sum(quads) < len(quads)
    batch = four[0]
    pasted = paste_layers(batch, sampler, 1.0, 64, gen=torch.Generator().manual_seed(4))
    assert pasted["quad"].sum() == 0 and batch["quad"].sum() > 0


def test_sampler_quadratic_share_keeps_the_outer_frames_of_some_triplets():
    """quadratic_share < 1: only that fraction of the triplets whose shot has the outer frames keeps them (quad 1);
    the others train at constant velocity (quad 0, before and after copies of one and two)."""
    from training.data import Clip, FootageSampler

    frames = (torch.arange(60, dtype=torch.uint8) * 4).view(60, 1, 1, 1).expand(60, 3, 70, 70).contiguous()
    clip = Clip("c", frames, 0.3, (), torch.zeros(59, dtype=torch.bool))

    def quad_share(share):
        sampler = FootageSampler([clip], 64, 2, generator=torch.Generator().manual_seed(2), neighbours=True,
                                 quadratic_share=share)
        batches = [sampler.batch(16) for _ in range(8)]
        for b in batches:
            off = b["quad"] == 0
            assert torch.equal(b["before"][off], b["one"][off]) and torch.equal(b["after"][off], b["two"][off])
        return float(torch.cat([b["quad"] for b in batches]).mean())

    everything, half, none = quad_share(1.0), quad_share(0.5), quad_share(0.0)
    assert everything > 0.8 and none == 0.0
    assert 0.25 * everything < half < 0.75 * everything
    with pytest.raises(ValueError, match="quadratic_share"):
        FootageSampler([clip], 64, neighbours=True, quadratic_share=1.5)


def test_paste_layers_puts_moving_layers_over_real_triplets():
    """--paste-share: synthetic layers pasted over footage triplets, rendered at each frame's own time (the
    triplet's t), leave the real frames visible around them, add no flow, and touch only the chosen triplets."""
    from training.data import Clip, FootageSampler, paste_layers, synthetic_batch

    texture = torch.randint(0, 256, (4, 3, 96, 96), generator=torch.Generator().manual_seed(2), dtype=torch.uint8)
    clip = Clip("tex", texture, 3.0, (), torch.zeros(3, dtype=torch.bool))
    sampler = FootageSampler([clip], 64, 1, generator=torch.Generator().manual_seed(0))
    n = 8
    t = torch.linspace(0.2, 0.8, n)
    flat = {k: torch.full((n, 3, 64, 64), v) for k, v in (("one", 0.2), ("mid", 0.5), ("two", 0.8))}
    gen = torch.Generator().manual_seed(3)
    out = synthetic_batch(sampler, n, 64, layers=1, gen=gen, edge_px=1.0, backgrounds={**flat, "t": t})
    assert "flow_fwd" not in out and out["one"].shape == (n, 3, 64, 64)
    covered = 0
    for i in range(n):
        reversed_ = bool((out["one"][i] - 0.8).abs().lt(1e-4).float().mean() > 0.2)  # temporal reversal by augment
        first, last = (0.8, 0.2) if reversed_ else (0.2, 0.8)
        shown = [float((out[key][i] - value).abs().lt(1e-4).float().mean())
                 for key, value in (("one", first), ("mid", 0.5), ("two", last))]
        assert min(shown) > 0.2, (i, shown)  # the real frame, at its own time, around the layer
        covered += min(shown) < 0.99  # a layer over part of it (it may also have left the crop)
        assert torch.isclose(out["t"][i], 1 - t[i] if reversed_ else t[i])
    assert covered >= n // 2
    with pytest.raises(ValueError, match="backgrounds must be"):
        synthetic_batch(sampler, n, 32, gen=gen, backgrounds={**flat, "t": t})
    real = sampler.batch(16)
    assert paste_layers(real, sampler, 0.0, 64, gen=gen) is real
    half = paste_layers(real, sampler, 0.5, 64, gen=torch.Generator().manual_seed(4))
    changed = [not torch.equal(half["one"][i], real["one"][i]) for i in range(16)]
    assert 0 < sum(changed) < 16 and set(half) == set(real)
    for i in range(16):
        if not changed[i]:
            assert torch.equal(half["mid"][i], real["mid"][i]) and half["t"][i] == real["t"][i]
    with pytest.raises(ValueError, match="paste share"):
        paste_layers(real, sampler, 1.5, 64)


def _clips(lengths=(14, 9, 20, 11), seed=5):
    """Clips of random frames (72 x 88) with the given lengths, some slow, some with a cut."""
    from training.data import Clip

    g = torch.Generator().manual_seed(seed)
    motions, cuts = (0.3, 3.0, 8.0, 1.5), ((), (4,), (), (7,))
    return [Clip(f"c{i}.mp4", torch.randint(0, 256, (n, 3, 72, 88), generator=g, dtype=torch.uint8),
                 motions[i % 4], cuts[i % 4], torch.zeros(n - 1, dtype=torch.bool), "footage")
            for i, n in enumerate(lengths)]


def test_one_process_draws_the_batches_it_drew_before_sharding():
    """A run in progress continues on one process: its shard is every clip in the order given, and the sampler's
    batches are bitwise those of the code before sharding (the digest was taken with that code, commit 7c97bc0)."""
    import hashlib

    from training.data import FootageSampler, shard

    clips = _clips()
    assert shard(clips, 1, 0) == clips
    sampler = FootageSampler(shard(clips, 1, 0), 48, 4, generator=torch.Generator().manual_seed(61),
                             native_share=0.25, downscale_share=1.0)
    digest = hashlib.sha256()
    for _ in range(3):
        batch = sampler.batch(6)
        for key in ("one", "mid", "two", "t"):
            digest.update(batch[key].numpy().tobytes())
    assert digest.hexdigest()[:16] == "126f8dbedd0f83ac"


def test_shards_partition_the_training_clips():
    """Every clip in exactly one rank's shard, every rank with some, frames balanced to within the longest clip,
    and the same shards whatever order the clips were loaded in."""
    from training.data import shard, shard_ranks

    clips = _clips((14, 9, 20, 11, 30, 5, 12, 12, 7))
    for world in range(1, 6):
        shards = [shard(clips, world, rank) for rank in range(world)]
        assert sorted(c.name for s in shards for c in s) == sorted(c.name for c in clips)
        frames = [sum(c.frames.shape[0] for c in s) for s in shards]
        assert min(len(s) for s in shards) >= 1 and max(frames) - min(frames) <= 30
        again = [shard(clips[::-1], world, rank) for rank in range(world)]
        assert [sorted(c.name for c in s) for s in again] == [sorted(c.name for c in s) for s in shards]
    # longest first, each to the rank with fewer frames: 30 -> 0, 20 -> 1, 14 -> 1, 12 (c6) -> 0, 12 (c7) -> 1,
    # 11 -> 0, 9 -> 1, 7 -> 0, 5 -> 1: 60 frames each
    assert shard_ranks(clips, 2) == [1, 1, 1, 0, 0, 1, 0, 1, 0]
    with pytest.raises(ValueError, match="9 training clips cannot be shared among 10 processes"):
        shard_ranks(clips, 10)


def test_the_trainer_samples_its_shard_at_the_scaled_rate(footage, tmp_path, capsys):
    """On N processes a trainer samples its own shard of the training clips (the main process says who got what)
    at a peak rate sqrt(N) times the recipe's; with one process every clip, as loaded, at the recipe's rate."""
    from training.schedule import learning_rate
    from training.trainer import Process, Trainer, peak_learning_rate

    options, overrides = parse(run_args(footage, tmp_path / "o", "--warmup", "0"))
    start = start_point(options, overrides)
    one = Trainer(options, start, Process(torch.device("cpu")))
    one.load_data()
    assert one.sampler.clips == one.train_clips and "shards" not in capsys.readouterr().out
    assert one.learning_rate() == learning_rate(0, 3e-4, 0, 40000) == 3e-4
    names = []
    for rank in (0, 1):
        trainer = Trainer(options, start, Process(torch.device("cpu"), world=2, rank=rank))
        trainer.load_data()
        names += [c.name for c in trainer.sampler.clips]
        assert trainer.learning_rate() == pytest.approx(3e-4 * 2 ** 0.5)
    assert sorted(names) == ["a.mp4", "b.mp4"]
    assert capsys.readouterr().out.count("footage shards over 2 processes: rank 0 1 clips (12 frames), rank 1 1 "
                                         "clips (12 frames)") == 1  # the main process only
    assert peak_learning_rate(3e-4, 1) == 3e-4 and peak_learning_rate(1e-4, 4) == pytest.approx(2e-4)
    with pytest.raises(TrainingError, match="2 training clips cannot be shared among 3 processes"):
        Trainer(options, start, Process(torch.device("cpu"), world=3, rank=2)).load_data()


def test_remote_scripts_keep_nvlink_multicast_off(tmp_path):
    """Every process the remote-GPU scripts start has NCCL's and PyTorch's NVLink multicast off (on a multi-GPU host
    shared with others, a program using it can put GPUs that others use out of service): each script sources
    scripts/remote/env.sh, found beside it from any working folder, before it starts a process."""
    remote = ROOT / "scripts" / "remote"
    source = 'source "$(dirname "${BASH_SOURCE[0]}")/env.sh"'
    # (env.sh, hold.sh and ffmpeg.sh are sourced by the others, after env.sh)
    scripts = sorted(p.name for p in remote.glob("*.sh") if p.name not in ("env.sh", "hold.sh", "ffmpeg.sh"))
    assert scripts == ["ab_segments.sh", "arm.sh", "batch_bench.sh", "campaign.sh", "chunk.sh", "detach.sh",
                       "peers_pack.sh", "rescore.sh", "score.sh", "screen_score.sh", "throughput.sh", "video_stages.sh"]
    for script in scripts:
        lines = (remote / script).read_text().splitlines()
        at = [i for i, line in enumerate(lines) if line.startswith(source)]
        starts = [i for i, line in enumerate(lines)
                  if any(word in line for word in ("python3", "torchrun", "nvidia-smi", "holdout_bf16", "setsid"))
                  and not line.startswith("#")]
        if script == "peers_pack.sh":  # runs here, before a job, and starts no process there
            assert not at and not starts
            continue
        assert len(at) == 1 and at[0] < min(starts), script
    # the same line, in a script beside a copy of env.sh, run from another folder
    (tmp_path / "remote").mkdir()
    (tmp_path / "remote" / "env.sh").write_text((remote / "env.sh").read_text())
    (tmp_path / "remote" / "probe.sh").write_text(f"{source}\nenv\n")
    env = {k: v for k, v in os.environ.items() if k not in MULTICAST}
    shown = subprocess.run(["bash", str(tmp_path / "remote" / "probe.sh")], cwd=ROOT, env=env, check=True,
                           capture_output=True, text=True).stdout.splitlines()
    assert all(f"{name}={value}" in shown for name, value in MULTICAST.items())


def test_chunk_script_leaves_what_unpack_puts_together(tmp_path):
    """scripts/remote/chunk.sh OUTPUT MINUTES ...: train.py's state under OUTPUT/train and the small files in
    OUTPUT/small.tar, which training.unpack turns back into a state folder (train.py stubbed: no GPU here)."""
    from training.unpack import unpack_chunk

    remote = tmp_path / "remote"
    remote.mkdir()
    for script in ("chunk.sh", "env.sh"):
        (remote / script).write_text((ROOT / "scripts" / "remote" / script).read_text())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # a train.py that writes a state folder as the real one does, at its --out
    (bin_dir / "python3").write_text('#!/bin/sh\nout=""; prev=""; for a in "$@"; do [ "$prev" = --out ] && out=$a; '
                                     'prev=$a; done\nmkdir -p "$out"; echo "$*" > "$out/args.json"\n'
                                     'for f in state_model.safetensors state_optim.pt state_ema.safetensors '
                                     'weights.safetensors; do echo x > "$out/$f"; done\n'
                                     'echo "{}" > "$out/progress.json"; echo "{}" > "$out/config.json"; '
                                     'echo "{}" > "$out/train_config.json"; echo "done: step 100"\n')
    (bin_dir / "python3").chmod(0o755)
    out = tmp_path / "output"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(remote / "chunk.sh"), str(out), "8", "--recipe", "fast-base"], cwd=tmp_path,
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (out / "train").iterdir()) == ["state_model.safetensors", "state_optim.pt"]
    assert (out / "small.tar").is_file()
    written = unpack_chunk(out, tmp_path / "state", tmp_path / "resume")
    assert {"args.json", "state_ema.safetensors", "weights.safetensors", "progress.json"} <= set(written)
    args = (tmp_path / "state" / "args.json").read_text().split()
    assert args[:4] == ["train.py", "--data", ".data/footage", "--out"] and args[-2:] == ["--recipe", "fast-base"]
    assert "--minutes" in args and args[args.index("--minutes") + 1] == "8"
    assert not (tmp_path / "resume" / "weights.safetensors").exists()
    missing = subprocess.run(["bash", str(remote / "chunk.sh")], env=env, capture_output=True, text=True)
    assert missing.returncode != 0 and "the output folder" in missing.stderr


def test_score_script_spreads_the_product_measures_over_the_gpus(tmp_path):
    """scripts/remote/score.sh runs the three measures (videos on the standard and fresh sets, pairs on the standard
    set) as one training.holdout process each that scores every weights file, processes dealt round-robin to the
    GPUs with cores / GPUs threads each, each measure's JSON in the output folder, and fails when a measure fails."""
    device = tmp_path / "remote"
    device.mkdir()
    for script in ("score.sh", "env.sh", "hold.sh"):
        (device / script).write_text((ROOT / "scripts" / "remote" / script).read_text())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    seen = tmp_path / "seen"
    seen.mkdir()
    stubs = {"nvidia-smi": "echo GPU 0\necho GPU 1\n", "nproc": "echo 16\n",
             # a training.holdout that records its GPU, threads and options, writes its --json, and fails on "bad"
             "python3": 'json=""; prev=""; for a in "$@"; do [ "$prev" = --json ] && json=$a; prev=$a; done\n'
                        'echo "gpu=$CUDA_VISIBLE_DEVICES threads=$OMP_NUM_THREADS $*" > "$SEEN/$(basename "$json")"\n'
                        'echo "{}" > "$json"; echo "margin +1.000 dB"\n'
                        'case "$*" in *bad*) exit 1;; esac\n'}
    for name, body in stubs.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SEEN": str(seen), "HOME": str(tmp_path)}
    done = subprocess.run(["bash", str(device / "score.sh"), str(out), "a/last.safetensors", "b/last.safetensors"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    measures = ("videos_standard", "videos_fresh", "pairs_standard")
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{m}.json" for m in measures)
    calls = {p.name: p.read_text().split() for p in seen.iterdir()}
    first = calls["videos_standard.json"]
    assert first[:2] == ["gpu=0", "threads=8"] and first[2:4] == ["-m", "training.holdout"]
    assert first[4:7] == ["--data", f"{tmp_path}/vfi/hold/footage", f"{tmp_path}/vfi/hold/footage2"]
    assert "--bf16" in first
    for call in calls.values():  # every weights file in each measure's one pass, even two of the same name
        at = call.index("--weights")
        assert call[at + 1:at + 3] == ["a/last.safetensors", "b/last.safetensors"]
    assert " ".join(first).count("--motion quadratic --flow-scale auto --set standard") == 1
    assert calls["videos_fresh.json"][0] == "gpu=1" and "fresh" in calls["videos_fresh.json"]
    pairs = calls["pairs_standard.json"]
    assert pairs[0] == "gpu=0" and "--motion" not in pairs  # the third measure: round-robin over two GPUs
    assert done.stdout.count("== ") == 3 and "== pairs_standard" in done.stdout and "margin +1.000" in done.stdout
    failed = subprocess.run(["bash", str(device / "score.sh"), str(out), "bad.safetensors"], env=env,
                            capture_output=True, text=True)
    assert failed.returncode == 1
    empty = subprocess.run(["bash", str(device / "score.sh"), str(out)], env=env, capture_output=True, text=True)
    assert empty.returncode == 2 and "at least one weights file" in empty.stderr


def test_scripts_and_docs_start_weights_at_their_own_step():
    """A script's or a doc's `--init-weights weights/X --schedule-start N` names the step the file ends at:
    a new warm-up from there. multi_gpu.sh (and ab.sh's example) kept weights/network.safetensors at 32000 when that
    name passed to the default weights (step 45000 then), and docs/training.md's fine-tune example at 50000 when
    they moved to 55000, where train.py stops at once or schedules backwards."""
    import re

    from softsplat_vfi.model.weights import read_metadata

    found = []
    for path in [*sorted((ROOT / "scripts" / "remote").glob("*.sh")), *sorted((ROOT / "docs").glob("*.md")),
                 ROOT / "README.md"]:
        for name, step in re.findall(r"--init-weights (weights/\S+\.safetensors) --schedule-start (\d+)",
                                     path.read_text()):
            found.append(path.name)
            assert int(read_metadata(ROOT / name)["step"]) == int(step), (path.name, name, step)
    assert sorted(found) == ["training.md"]


def test_next_inputs_mix_footage_and_synthetic_samples_with_their_flow(footage, tmp_path, monkeypatch):
    """The trainer's batch: the recipe's footage rows first (some with layers pasted), then synthetic rows, and
    the synthetic rows' true flows, forward then backward."""
    from training.trainer import Process, Trainer

    options, overrides = parse(run_args(footage, tmp_path / "o", "--synthetic-share", "0.5"))
    trainer = Trainer(options, start_point(options, overrides), Process(torch.device("cpu")))
    trainer.load_data()
    trainer.build()
    one, two, t, mid, gt = trainer.next_inputs()
    assert one.shape == two.shape == mid.shape == (4, 3, 32, 32) and t.shape == (4,)
    assert gt.shape == (4, 2, 32, 32)  # 2 synthetic samples, both directions
    assert trainer.n_real == 2 and trainer.val_crop == 32
    assert [c.name for c in trainer.val_clips] == ["val.mp4"]
    assert sorted(c.name for c in trainer.train_clips) == ["a.mp4", "b.mp4"]
    # --synthetic-stripe-share reaches the synthetic samples (training.data._gratings), not the pasted layers
    import training.data as data

    shares, gratings = [], data._gratings

    def recorded(textures, share, gen, grid):
        shares.append((textures.shape[1], share))
        return gratings(textures, share, gen, grid)

    monkeypatch.setattr(data, "_gratings", recorded)
    options, overrides = parse(run_args(footage, tmp_path / "s", "--synthetic-share", "0.5",
                                        "--synthetic-stripe-share", "0.4", "--paste-share", "1"))
    trainer = Trainer(options, start_point(options, overrides), Process(torch.device("cpu")))
    trainer.load_data()
    trainer.build()
    trainer.next_inputs()
    assert shares == [(2, 0.4)]  # one call, for the 2 synthetic samples


def test_next_inputs_of_a_quadratic_recipe_carry_the_outer_flows(footage, tmp_path):
    """--motion quadratic: after the synthetic rows' true flows, the outer flows of every row and its quad flag
    (synthetic rows 0); the held-out triplets keep their neighbours, and two steps train."""
    from training.trainer import Process, Trainer

    argv = run_args(footage, tmp_path / "o", "--synthetic-share", "0.5", "--motion", "quadratic", "--max-steps", "2")
    options, overrides = parse(argv)
    trainer = Trainer(options, start_point(options, overrides), Process(torch.device("cpu")))
    trainer.load_data()
    trainer.load_validation()
    trainer.build()
    one, two, t, mid, gt, to_before, to_after, quad = trainer.next_inputs()
    assert to_before.shape == to_after.shape == gt.shape == (4, 2, 32, 32)
    assert quad.shape == (4,) and quad[2:].sum() == 0
    assert trainer.step_loss.quadratic and trainer.step_loss.synthetic
    assert any(tr.has_neighbours for tr in trainer.holdout)
    losses = trainer.step_loss(one, two, t, mid, gt, to_before, to_after, quad)
    assert torch.isfinite(losses[0])
    assert train.main(argv) == 0
    config = TrainConfig.from_dict(json.loads((tmp_path / "o" / "train_config.json").read_text()))
    assert config.motion == "quadratic"


def test_a_crop_larger_than_every_training_clip_is_a_clear_error(footage, tmp_path):
    """Only clips at least the crop on their short side train: a crop larger than every training clip (96 x 80)
    leaves nothing to train on, said in one line naming --crop; the sampler refuses a smaller clip by name."""
    from training.data import FootageSampler
    from training.trainer import Process, Trainer

    options, overrides = parse(run_args(footage, tmp_path / "plain", "--crop", "96"))
    with pytest.raises(TrainingError, match=r"no training clip .* is at least 96 px .*\(--crop 96\).*lower --crop$"):
        Trainer(options, start_point(options, overrides), Process(torch.device("cpu"))).load_data()
    options, overrides = parse(run_args(footage, tmp_path / "o"))
    trainer = Trainer(options, start_point(options, overrides), Process(torch.device("cpu")))
    trainer.load_data()
    with pytest.raises(ValueError, match="a.mp4.*smaller than the 96-px crop"):
        FootageSampler(sorted(trainer.train_clips, key=lambda c: c.name), 96)


def test_validation_crop_does_not_follow_a_larger_training_crop(footage, tmp_path, monkeypatch):
    """Validation triplets are VALIDATION_CROP (256) px whatever --crop is (smaller only for a smaller training
    crop), so runs with other training crops are scored on the same triplets."""
    import training.trainer
    from training.data import validation_sets
    from training.trainer import Process, Trainer

    monkeypatch.setattr(training.trainer, "VALIDATION_CROP", 48)  # the tests' clips are 96 x 80
    drawn = []
    for crop in ("64", "80"):
        options, overrides = parse(run_args(footage, tmp_path / crop, "--crop", crop))
        trainer = Trainer(options, start_point(options, overrides), Process(torch.device("cpu")))
        trainer.load_data()
        assert trainer.val_crop == 48
        drawn.append(validation_sets(trainer.val_clips, trainer.val_crop, trainer.config.max_gap, 1)["clean"][0])
    for key in ("one", "mid", "two", "t"):
        assert torch.equal(drawn[0][key], drawn[1][key]), key


def test_held_out_frames_are_scored_with_cudnn_heuristics(footage, tmp_path, monkeypatch):
    """The held-out clips come in many frame sizes: their scoring turns cuDNN's timed algorithm search off (it would
    run again for every size in every chunk) and restores the training's setting afterwards."""
    import training.trainer
    from training.trainer import Process, Trainer

    options, overrides = parse(run_args(footage, tmp_path / "run"))
    trainer = Trainer(options, start_point(options, overrides), Process(torch.device("cpu")))
    trainer.load_data()
    trainer.load_validation()
    trainer.build()
    assert trainer.holdout, "the test footage has held-out clips"
    seen = []
    scores = training.trainer.network_scores
    monkeypatch.setattr(training.trainer, "network_scores",
                        lambda *a: seen.append(torch.backends.cudnn.benchmark) or scores(*a))
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", True)
    means, _ = trainer.validate()
    assert seen == [False] and torch.backends.cudnn.benchmark is True
    assert means["holdout"]["triplets"] == len(trainer.holdout)


# -- real runs ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained(footage, tmp_path_factory):
    """One 4-step run of the study recipe (moving average 0.5), validated at step 2 and at its end (step 4)."""
    out = tmp_path_factory.mktemp("trained") / "run"
    assert train.main(run_args(footage, out, "--max-steps", "4", "--ema-decay", "0.5", "--native-share", "0.5")) == 0
    return out


def test_a_run_saves_its_state_logs_and_kept_weights(trained):
    from safetensors import safe_open
    from safetensors.torch import load_file

    for name in ("state_model.safetensors", "state_optim.pt", "state_ema.safetensors", "config.json",
                 "train_config.json", "progress.json", "log.jsonl", "weights.safetensors"):
        assert (trained / name).is_file(), name
    progress = json.loads((trained / "progress.json").read_text())
    assert progress["step"] == 4 and progress["val_batches"] == 1 and progress["cuda_graph"] is False
    moments = torch.load(trained / "state_optim.pt", weights_only=True)["state"][0]
    assert moments["exp_avg"].dtype == torch.bfloat16 and moments["exp_avg_sq"].dtype == torch.bfloat16
    config = TrainConfig.from_dict(json.loads((trained / "train_config.json").read_text()))
    assert config == dataclasses.replace(RECIPES["study"], batch=4, crop=32, validation_clips=("val.mp4",),
                                         ema_decay=0.5, native_share=0.5)
    rows = [json.loads(line) for line in (trained / "log.jsonl").read_text().splitlines()]
    checks = [r for r in rows if "score" in r]
    assert [c["step"] for c in checks] == [2, 4] and checks[-1]["chunk_end"]  # the last step validated once
    last = checks[-1]
    assert {"val_psnr", "val_consecutive_psnr", "val_clean_psnr", "val_synthetic_edges_psnr", "val_boundary_psnr",
            "val_near_linear_psnr"} <= set(last)
    # weights are chosen by the margin over the classical baseline on the held-out clip's whole frames
    assert abs(last["score"] - last["margin"]) < 2e-3
    assert abs(last["margin"] - (last["holdout_psnr"] - last["baseline_psnr"])) < 2e-3
    # the moving average: its own updates, saved in fp16, and what the kept weights hold
    average = load_file(str(trained / "state_ema.safetensors"))
    assert int(average.pop("_updates")[0]) == 4
    with safe_open(str(trained / "weights.safetensors"), framework="pt") as f:
        kept_step = int(f.metadata()["step"])
        assert TrainConfig.from_dict(json.loads(f.metadata()["train_config"])) == config
    if kept_step == 4:
        weights = load_file(str(trained / "weights.safetensors"))
        for name in weights:
            torch.testing.assert_close(weights[name], average[name], atol=1e-3, rtol=1e-3)


def test_a_run_trains_on_the_psnr_loss(footage, tmp_path):
    from training.trainer import Process, Trainer

    argv = run_args(footage, tmp_path / "run", "--max-steps", "2", "--reconstruction", "psnr")
    options, overrides = parse(argv)
    trainer = Trainer(options, start_point(options, overrides), Process(torch.device("cpu")))
    trainer.load_data()
    trainer.build()
    assert trainer.step_loss.reconstruction == "psnr"
    assert train.main(argv) == 0
    config = TrainConfig.from_dict(json.loads((tmp_path / "run" / "train_config.json").read_text()))
    assert config.reconstruction == "psnr"


def test_a_resumed_run_continues_its_state(footage, trained, tmp_path, capsys):
    from safetensors.torch import load_file

    out = tmp_path / "resumed"
    assert train.main(run_args(footage, out, "--max-steps", "3", "--resume", str(trained))) == 0
    progress = json.loads((out / "progress.json").read_text())
    # the resumed run's, not the defaults (4 batches, every 1000 steps)
    assert progress["step"] == 7 and progress["val_batches"] == 1 and progress["val_every"] == 2
    checks = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [c["step"] for c in checks if "score" in c] == [6, 7]
    assert int(load_file(str(out / "state_ema.safetensors"))["_updates"][0]) == 7
    saved = (out / "train_config.json", trained / "train_config.json")
    assert json.loads(saved[0].read_text()) == json.loads(saved[1].read_text())
    assert train.main(run_args(footage, tmp_path / "x", "--resume", str(trained), "--recipe", "study")) == 2
    assert "a resumed run continues its own recipe" in capsys.readouterr().err


def test_a_resume_on_other_validation_sets_keeps_its_own_best(footage, trained, tmp_path, capsys):
    """A resumed run validates on the triplets its best was measured on unless told otherwise; then the old best,
    from other triplets, is not the bar, and a state saved by a --cuda-graph run resumes eagerly on the CPU."""
    state = tmp_path / "state"
    state.mkdir()
    for path in trained.iterdir():
        (state / path.name).write_bytes(path.read_bytes())
    progress = json.loads((trained / "progress.json").read_text())
    (state / "progress.json").write_text(json.dumps(dict(progress, best_score=99.0, kept_score=99.0,
                                                         cuda_graph=True)))
    out = tmp_path / "other"
    assert train.main(run_args(footage, out, "--max-steps", "1", "--resume", str(state), "--val-batches", "2")) == 0
    err = capsys.readouterr().err
    assert "not carried over" in err and "used --cuda-graph" in err
    after = json.loads((out / "progress.json").read_text())
    assert after["val_batches"] == 2 and after["best_score"] < 99.0 and after["cuda_graph"] is False
    assert (out / "weights.safetensors").is_file()  # this chunk's own best was kept


def test_a_start_from_weights_continues_their_recipe_and_step(footage, trained, tmp_path, capsys, monkeypatch):
    """--init-weights: the weights' step and recorded recipe (flags override it), a fresh optimizer, --rewarm
    ramping the rate in, --flow-iterations changing the network without new weights, and --validate-first
    scoring the start, which stays kept unless a later step beats it."""
    import training.schedule
    from safetensors import safe_open
    from training import validation

    weights = trained / "weights.safetensors"
    with safe_open(str(weights), framework="pt") as f:
        step = int(f.metadata()["step"])
    decisions, used = [], []
    rule, rewarmed = validation.replaces_kept, training.schedule.rewarmed
    monkeypatch.setattr(validation, "replaces_kept", lambda *a: decisions.append(rule(*a)) or decisions[-1])
    monkeypatch.setattr(training.schedule, "rewarmed", lambda *a: used.append(rewarmed(*a)) or used[-1])
    out = tmp_path / "cont"
    assert train.main(run_args(footage, out, "--max-steps", "2", "--val-every", "100", "--init-weights",
                               str(weights), "--seed", "7", "--rewarm", "4", "--validate-first",
                               "--flow-iterations", "1", "2", "2", "2")) == 0
    config = json.loads((out / "train_config.json").read_text())
    # the network trained and saved is the file's with the passes asked for (no new weights)
    assert json.loads((out / "config.json").read_text())["flow_iterations"] == [1, 2, 2, 2]
    with safe_open(str(out / "weights.safetensors"), framework="pt") as f:
        assert json.loads(f.metadata()["config"])["flow_iterations"] == [1, 2, 2, 2]
    assert config["seed"] == 7 and config["native_share"] == 0.5 and config["ema_decay"] == 0.5
    checks = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if "score" in line]
    assert [c["step"] for c in checks] == [step, step + 2]
    assert len(decisions) == 2 and decisions[0]  # the start is kept first; then the rule decides
    with safe_open(str(out / "weights.safetensors"), framework="pt") as f:
        assert int(f.metadata()["step"]) == (step + 2 if decisions[1] else step)
    from training.schedule import learning_rate

    full = [learning_rate(s, config["lr"], config["warmup"], config["total_steps"]) for s in (step, step + 1)]
    assert used == pytest.approx([full[0] / 4, full[1] * 2 / 4])


def test_cuda_graph_needs_one_cuda_device(footage, tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    assert train.main(run_args(footage, tmp_path / "g", "--max-steps", "1", "--cuda-graph")) == 2
    assert "--cuda-graph records one GPU's step" in capsys.readouterr().err


@pytest.mark.slow
def test_two_processes_with_torchrun_resume_across_process_counts(footage, trained, tmp_path, capsys):
    """Two CPU processes (gloo) continue the one-process state ``trained`` (step 4), and one process continues
    theirs: a state resumes on any number of processes. On the way: each rank trains on its own shard (the main
    process logs them once) at the scaled peak rate; rank 0 validates first while rank 1 waits at the first step;
    and the filter on non-linear motion works: the main process measures every training clip's table and saves it
    once (the other waits at a barrier and reads its shard's from that file; it prints nothing, so that part is
    not seen here), and the one-process resume finds all its tables there. One torchrun run for all of it: each
    costs two processes' start."""
    from safetensors.torch import load_file

    out = tmp_path / "ddp"
    proc = torchrun(footage, out, free_port(), "--max-steps", "2", "--resume", str(trained), "--validate-first",
                    "--max-nonlinearity", "50")
    assert proc.returncode == 0, proc.stderr[-2000:]
    progress = json.loads((out / "progress.json").read_text())
    assert progress["step"] == 6 and progress["processes"] == 2
    checks = [json.loads(line)["step"] for line in (out / "log.jsonl").read_text().splitlines() if "score" in line]
    assert checks == [4, 6]
    assert proc.stdout.count("footage shards over 2 processes: rank 0 1 clips (12 frames), rank 1 1 clips") == 1
    assert proc.stdout.count("2 processes: each step takes 2 x 4 = 8 triplets; peak learning rate 0.0003 x "
                             "sqrt(2) = 0.0004243") == 1
    assert proc.stderr.count("the resumed run trained on 1 process, this chunk on 2") == 1
    assert proc.stdout.count("non-linearity: measured 2 of 2 clips") == 1  # the main process, every clip
    assert set(torch.load(out / "nonlinearity.pt")["tables"]) == {"a.mp4", "b.mp4"}
    assert int(load_file(str(out / "state_ema.safetensors"))["_updates"][0]) == 6

    back = tmp_path / "back"
    capsys.readouterr()
    assert train.main(run_args(footage, back, "--max-steps", "1", "--resume", str(out))) == 0
    progress = json.loads((back / "progress.json").read_text())
    assert progress["step"] == 7 and progress["processes"] == 1
    assert int(load_file(str(back / "state_ema.safetensors"))["_updates"][0]) == 7
    captured = capsys.readouterr()
    assert "the resumed run trained on 2 processes, this chunk on 1" in captured.err
    assert "shards" not in captured.out and "non-linearity: measured" not in captured.out  # the tables were there


def test_the_minutes_stop_is_posted_by_the_main_process_and_read_by_the_others():
    """Under torchrun, out_of_time's answer goes through the store: the main process posts it at every
    TIME_CHECK_STEPS-th step of the chunk (from its own clock) and the others read that answer, whatever their own
    clocks say; at other steps nobody touches the store. Two processes of one chunk, sharing an in-memory store."""
    from types import SimpleNamespace

    import torch.distributed as dist

    from training.trainer import TIME_CHECK_STEPS, Process, Trainer

    store = dist.HashStore()
    chunk_start, start_step = 1000.0, 40

    def process(rank, minutes, step):
        return SimpleNamespace(process=Process(torch.device("cpu"), 2, rank, rank, store), main=rank == 0,
                               options=SimpleNamespace(minutes=minutes), start_step=start_step, step=step)

    # not a reading step: False, and no key written or read (a read would wait for one)
    assert not Trainer.out_of_time(process(1, 0.0, start_step + 1), chunk_start)
    assert store.num_keys() == 0
    step = start_step + TIME_CHECK_STEPS
    # the main process's clock is past its minutes; rank 1's own limit is far off: it still stops
    assert Trainer.out_of_time(process(0, 0.001, step), chunk_start)
    assert Trainer.out_of_time(process(1, 1e9, step), chunk_start)
    # and the reverse: the main process goes on, so rank 1 goes on although its own clock is past its limit
    step += TIME_CHECK_STEPS
    assert not Trainer.out_of_time(process(0, 1e9, step), chunk_start)
    assert not Trainer.out_of_time(process(1, 0.001, step), chunk_start)
    assert store.get(f"stop/{start_step}/{step}") == b"0"
    # no --minutes (train.py's default): the run goes on to its schedule's end, on every process
    from training.options import parse

    assert parse(["--data", "footage", "--out", "runs/x"])[0].minutes is None
    step += TIME_CHECK_STEPS
    assert not Trainer.out_of_time(process(0, None, step), chunk_start)
    assert not Trainer.out_of_time(process(1, None, step), chunk_start)
    assert store.get(f"stop/{start_step}/{step}") == b"0"


@pytest.mark.slow
def test_processes_under_torchrun_stop_at_the_same_step_when_the_minutes_run_out(footage, tmp_path):
    """--minutes under torchrun: the main process's clock decides, read every TIME_CHECK_STEPS steps and posted to
    torchrun's store, so both processes leave the loop after the same step (a process that went on alone would wait
    in the next step's all-reduce until NCCL's timeout, as four-GPU chunks did in sessions 49 and 50). With a limit
    of 0.06 s the first reading, at step TIME_CHECK_STEPS, ends the chunk there: on every run, not near it. Both
    processes exit too: when the answer was a gloo broadcast, rank 1 hung at exit in about one run in ten (sessions
    51 and 53), so a run gets 2 minutes here. One triplet of 32 px per step and process: the steps' size is not
    the point, and the run is mostly the processes' start."""
    from training.trainer import TIME_CHECK_STEPS

    out = tmp_path / "timed"
    proc = torchrun(footage, out, free_port(), "--minutes", "0.001", "--val-every", "1000", "--batch", "1",
                    "--crop", "32", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((out / "progress.json").read_text())["step"] == TIME_CHECK_STEPS


@pytest.mark.cuda
@pytest.mark.parametrize("quadratic", [False, True])
def test_cuda_graph_step_matches_the_eager_step(quadratic):
    """--cuda-graph replays a recorded forward and backward: on a new batch its losses and the parameters'
    gradients must match the eager step's (same kernels; only atomic-add order differs); with --motion quadratic
    the outer flows and quad flags are inputs of the graph too. The gradients are compared as one vector: the
    splatting's atomic adds leave single tensors with tiny gradients differing by up to twice their own size, while
    the whole differed by at most 0.27% over 32 pairs of steps (bf16 and fp32, H200, session 41)."""
    from softsplat_vfi.model import Network
    from training.step import StepLoss, TrainStep

    torch.manual_seed(0)
    net = Network().cuda().to(memory_format=torch.channels_last)

    def step_loss():
        return StepLoss(TrainStep(net), n_real=3, batch=4, census_weight=1.0, flow_weight=0.05, bf16=True,
                        synthetic=True, quadratic=quadratic)

    def batch(seed):
        g = torch.Generator().manual_seed(seed)
        frames = [torch.rand(4, 3, 64, 64, generator=g).cuda().contiguous(memory_format=torch.channels_last)
                  for _ in range(3)]
        t = torch.rand(4, generator=g).cuda()
        gt = (torch.randn(2, 2, 64, 64, generator=g) * 2).cuda()
        outer = ()
        if quadratic:
            outer = ((torch.randn(4, 2, 64, 64, generator=g) * 2).cuda(),
                     (torch.randn(4, 2, 64, 64, generator=g) * 2).cuda(), torch.tensor([1.0, 0.0, 1.0, 0.0]).cuda())
        return (frames[0], frames[2], t, frames[1], gt) + outer

    # make_graphed_callables replaces the forward of the module it records: the eager reference is another one
    graphed = torch.cuda.make_graphed_callables(step_loss(), batch(1))
    eager = step_loss()
    inputs = batch(2)
    results = []
    for fn in (graphed, eager):
        net.zero_grad(set_to_none=True)
        losses = fn(*inputs)
        losses[0].backward()
        results.append(([float(v.detach()) for v in losses], [p.grad.clone() for p in net.parameters()]))
    (graph_losses, graph_grads), (eager_losses, eager_grads) = results
    assert graph_losses == pytest.approx(eager_losses, rel=1e-3, abs=1e-5)
    whole = torch.cat([g.flatten() for g in eager_grads]).norm()
    assert whole > 0
    difference = torch.cat([(a - b).flatten() for a, b in zip(graph_grads, eager_grads)]).norm()
    assert difference <= 1e-2 * whole
    assert all(a.shape == b.shape and bool(torch.isfinite(a).all()) for a, b in zip(graph_grads, eager_grads))


def test_unpack_builds_a_state_that_resumes(footage, trained, tmp_path, capsys):
    """training.unpack: a remote chunk's output folder (small.tar's t/ and train/state_*, as
    scripts/remote/chunk.sh leaves them) become a state folder and a lean resume folder that train.py --resume
    takes."""
    import shutil
    import tarfile

    from training.unpack import main as unpack

    returned = tmp_path / "returned"
    shutil.copytree(trained, returned / "train")
    small = returned / "t"
    small.mkdir()
    for path in list((returned / "train").iterdir()):  # what chunk.sh moves into the tar
        if path.suffix in (".json", ".jsonl") or path.name in ("state_ema.safetensors", "weights.safetensors",
                                                                "nonlinearity.pt"):
            shutil.move(str(path), small / path.name)
    with tarfile.open(returned / "small.tar", "w") as tar:
        tar.add(small, arcname="t")
    shutil.rmtree(small)
    resume = tmp_path / "r"
    assert unpack([str(returned), str(tmp_path / "state"), "--resume-dir", str(resume)]) == 0
    names = {p.name for p in (tmp_path / "state").iterdir()}
    assert {"state_model.safetensors", "state_optim.pt", "state_ema.safetensors", "weights.safetensors",
            "progress.json", "log.jsonl"} <= names
    assert not (resume / "weights.safetensors").exists() and (resume / "state_ema.safetensors").is_file()
    assert start_point(*parse(run_args(footage, tmp_path / "next", "--resume", str(resume)))).step == 4
    assert unpack([str(returned), str(tmp_path / "state")]) == 2  # not over an earlier chunk
    assert "not empty" in capsys.readouterr().err
    assert unpack([str(tmp_path / "nothing"), str(tmp_path / "other")]) == 2
    assert "small.tar" in capsys.readouterr().err


def test_holdout_flow_scale_scores_the_kept_margin_as_the_product_runs(footage, tmp_path, monkeypatch, capsys):
    """--holdout-flow-scale auto: the held-out margin that keeps weights is scored with that flow scale (as run.py
    runs the default network); the log, the state and the kept weights say so; a resumed chunk keeps it, and one
    scored at another scale does not carry the resumed run's best over."""
    import training.trainer as trainer_module
    from safetensors import safe_open

    seen = []
    real = trainer_module.network_scores

    def spy(net, triplets, device, autocast_dtype=None, flow_scale=1.0):
        seen.append(flow_scale)
        return real(net, triplets, device, autocast_dtype, flow_scale)

    monkeypatch.setattr(trainer_module, "network_scores", spy)
    out = tmp_path / "auto"
    assert train.main(run_args(footage, out, "--max-steps", "2", "--holdout-flow-scale", "auto")) == 0
    assert seen and set(seen) == {"auto"}
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert [r["holdout_flow_scale"] for r in rows if "margin" in r] == ["auto"]
    assert json.loads((out / "progress.json").read_text())["holdout_flow_scale"] == "auto"
    with safe_open(str(out / "weights.safetensors"), framework="pt") as f:
        assert f.metadata()["holdout_flow_scale"] == "auto"
    seen.clear()
    capsys.readouterr()
    assert train.main(run_args(footage, tmp_path / "on", "--max-steps", "2", "--resume", str(out))) == 0
    assert set(seen) == {"auto"} and "not carried over" not in capsys.readouterr().err
    seen.clear()
    assert train.main(run_args(footage, tmp_path / "one", "--max-steps", "2", "--resume", str(out),
                               "--holdout-flow-scale", "1")) == 0
    assert set(seen) == {1.0}
    assert "scored the held-out margin at flow scale auto, this chunk at 1.0" in capsys.readouterr().err


def test_state_progress_record(tmp_path):
    """A state folder's step is read only where a chunk finished (model and record both there); a record
    without its step is refused with the fix named; resuming an empty folder says what is missing."""
    from training import state

    assert state.progress_step(tmp_path) is None
    state.write_progress(tmp_path, {"step": 1234, "best_score": 0.5})
    assert state.progress_step(tmp_path) is None  # no model saved beside it
    (tmp_path / state.MODEL).write_bytes(b"")
    assert state.progress_step(tmp_path) == 1234
    assert state.read_progress(tmp_path)["best_score"] == 0.5
    with pytest.raises(ValueError, match="needs its step"):
        state.write_progress(tmp_path, {"best_score": 0.5})
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(TrainingError, match="nothing to resume"):
        start_point(RunOptions(resume=empty, out=tmp_path / "out"), {})


def test_compiled_regions_train_as_the_plain_step_and_switch_off_outside_it():
    """train.py --compile's step (training.compiled, traced here by the eager backend on the CPU) gives the plain
    step's losses and gradients, and leaves the network plain outside the step, so validation and saving run it
    uncompiled at any size, with the same parameter names."""
    from softsplat_vfi.model import Network
    from softsplat_vfi.model.network import NetworkConfig
    from training.compiled import CompiledRegions
    from training.step import StepLoss, TrainStep

    torch.manual_seed(0)
    net = Network(NetworkConfig().sized(0.25))
    names = [name for name, _ in net.named_parameters()]
    one, two, mid = torch.rand(3, 2, 3, 64, 64).unbind(0)
    t = torch.full((2,), 0.5)

    def losses_and_grads(step: StepLoss):
        net.zero_grad(set_to_none=True)
        losses = step(one, two, t, mid)
        losses[0].backward()
        return [float(x.detach()) for x in losses], [p.grad.clone() for p in net.parameters()]

    plain = losses_and_grads(StepLoss(TrainStep(net), 2, 2, 1.0, 0.0, False))
    regions = CompiledRegions(net, backend="eager")
    compiled = losses_and_grads(StepLoss(TrainStep(net), 2, 2, 1.0, 0.0, False, regions=regions))
    assert compiled[0] == pytest.approx(plain[0], rel=1e-5)
    for a, b in zip(compiled[1], plain[1]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert all(module._compiled_call_impl is None for module, _ in regions.modules)
    assert all(name not in owner.__dict__ for owner, name, _ in regions.methods)
    with regions.active():
        assert all(module._compiled_call_impl is not None for module, _ in regions.modules)
    assert [name for name, _ in net.named_parameters()] == names


def test_excluded_sources_are_neither_trained_nor_validated_on(footage, tmp_path):
    """The screen recipe's confirmation repositories (exclude_sources, training.listing.CONFIRMATION_SOURCES) stay
    out of the clips a run trains and validates on, so the campaign can confirm its weights on them once."""
    from training.listing import CONFIRMATION_SOURCES
    from training.trainer import Process, Trainer

    assert RECIPES["screen"].exclude_sources == CONFIRMATION_SOURCES
    folder = tmp_path / "footage"
    folder.mkdir()
    entries = []
    for line, source in zip((footage / "clips.jsonl").read_text().splitlines(), ("kept/a", "gone/b", "gone/b")):
        entry = json.loads(line)
        (folder / entry["file"]).symlink_to(footage / entry["file"])
        entries.append(json.dumps({**entry, "source": f"{source} @ 0123456"}))
    (folder / "clips.jsonl").write_text("\n".join(entries) + "\n")

    def loaded(*extra):
        options, overrides = parse(run_args(folder, tmp_path / "o", *extra))
        trainer = Trainer(options, start_point(options, overrides), Process(torch.device("cpu")))
        trainer.load_data()
        return [c.name for c in trainer.train_clips], [c.name for c in trainer.val_clips]

    assert loaded() == (["a.mp4", "b.mp4"], ["val.mp4"])
    assert loaded("--exclude-sources", "gone/b") == (["a.mp4"], [])


def test_frequency_loss_costs_blur_and_noise_and_joins_the_step_loss():
    """--frequency-weight (rule AC's arm D): the Fourier amplitudes' distance is zero for the truth, grows for a
    blurred and for a noisier frame, ignores a pure shift's phase, and adds weight x itself to the step's loss."""
    import torch.nn.functional as F

    from training.losses import frequency_loss
    from training.step import step_losses

    gen = torch.Generator().manual_seed(0)
    truth = torch.rand(2, 3, 64, 64, generator=gen)
    blurred = F.avg_pool2d(F.pad(truth, (1, 1, 1, 1), mode="reflect"), 3, stride=1)
    noisy = (truth + 0.05 * torch.randn(truth.shape, generator=gen)).clamp(0, 1)
    assert float(frequency_loss(truth, truth)) == 0.0
    assert float(frequency_loss(blurred, truth)) > 0.01 and float(frequency_loss(noisy, truth)) > 0.01
    assert float(frequency_loss(torch.roll(truth, (5, 3), (2, 3)), truth)) < 1e-5  # a circular shift: phase only
    pred = blurred
    plain = step_losses(pred, [], truth, None, 2, 2, 1.0, 0.0)
    weighted = step_losses(pred, [], truth, None, 2, 2, 1.0, 0.0, frequency_weight=0.5)
    assert float(weighted[0] - plain[0]) == pytest.approx(0.5 * float(frequency_loss(blurred, truth)), rel=1e-4)
    assert [float(x) for x in weighted[1:]] == [float(x) for x in plain[1:]]


def test_sensor_noise_draws_per_sample_levels_on_every_frame_from_the_seed():
    """--synthetic-noise (rule AC's arm S): each of one, mid and two gets its own noise, each sample its own level
    up to the maximum, the same for the same seed; other fields pass through."""
    from training.data import sensor_noise

    batch = {k: torch.full((4, 3, 32, 32), 0.5) for k in ("one", "mid", "two")}
    batch["t"] = torch.full((4,), 0.5)
    a = sensor_noise(batch, 0.02, torch.Generator().manual_seed(1))
    b = sensor_noise(batch, 0.02, torch.Generator().manual_seed(1))
    assert all(torch.equal(a[k], b[k]) for k in ("one", "mid", "two")) and a["t"] is batch["t"]
    assert not torch.equal(a["one"], a["two"]) and not torch.equal(a["one"], a["mid"])
    spread = (a["one"] - 0.5).flatten(1).std(1)
    assert float(spread.max()) <= 0.02 * 1.2 and float(spread.max() - spread.min()) > 1e-3
    assert torch.equal(batch["one"], torch.full((4, 3, 32, 32), 0.5))  # the batch given is left as it was
