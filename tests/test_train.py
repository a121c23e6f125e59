"""train.py on the CPU: a few steps on generated clips, resume, and two processes through torchrun."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import train
from media.video import ffmpeg_exe

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def footage(tmp_path_factory):
    folder = tmp_path_factory.mktemp("footage")
    entries = []
    for name, source in (("a.mp4", "testsrc2"), ("b.mp4", "mandelbrot"), ("val.mp4", "life")):
        subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi", "-i", f"{source}=size=96x80:rate=10",
                        "-frames:v", "12", "-c:v", "libx264", "-pix_fmt", "yuv444p", str(folder / name)], check=True)
        entries.append({"file": name, "frames": 12, "width": 96, "height": 80, "frame_step": 1,
                        "orig_size": "96x80", "flow_mean_px_per_orig_frame": 2.0, "cuts_before_frame": []})
    (folder / "clips.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries))
    return folder


def _args(footage, out, *extra):
    return ["--data", str(footage), "--out", str(out), "--batch", "4", "--crop", "64", "--device", "cpu",
            "--val-clips", "val.mp4", "--val-every", "2", *extra]


def test_train_saves_and_resumes(footage, tmp_path):
    out = tmp_path / "run"
    assert train.main(_args(footage, out, "--max-steps", "3")) == 0
    for name in ("state_model.safetensors", "state_optim.pt", "config.json", "train_config.json", "progress.json",
                 "log.jsonl", "weights.safetensors"):
        assert (out / name).is_file(), name
    assert json.loads((out / "progress.json").read_text())["step"] == 3
    moments = torch.load(out / "state_optim.pt", weights_only=True)["state"][0]
    assert moments["exp_avg"].dtype == torch.bfloat16 and moments["exp_avg_sq"].dtype == torch.bfloat16
    config = json.loads((out / "train_config.json").read_text())
    assert config["validation_clips"] == ["val.mp4"] and config["batch"] == 4
    out2 = tmp_path / "run2"
    assert train.main(_args(footage, out2, "--max-steps", "2", "--resume", str(out))) == 0
    assert json.loads((out2 / "progress.json").read_text())["step"] == 5


def test_train_rejects_missing_data(tmp_path, capsys):
    assert train.main(["--data", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "clips.jsonl" in capsys.readouterr().err


def _torchrun(footage, out, port: int, *extra) -> subprocess.CompletedProcess:
    """train.py in two CPU processes through torchrun (gloo), with ``_args`` and ``extra``."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master_port", str(port), str(ROOT / "train.py"), *_args(footage, out, *extra)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)


@pytest.mark.slow
def test_two_processes_with_torchrun(footage, tmp_path):
    out = tmp_path / "ddp"
    proc = _torchrun(footage, out, 29517, "--max-steps", "2", "--validate-first")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads((out / "progress.json").read_text())["step"] == 2
    checks = [json.loads(line)["step"] for line in (out / "log.jsonl").read_text().splitlines() if "score" in line]
    assert checks[0] == 0 and checks[-1] == 2  # rank 0 validated first while rank 1 waited at the first step


def test_train_continues_from_committed_weights(footage, tmp_path):
    out = tmp_path / "run"
    assert train.main(_args(footage, out, "--max-steps", "2")) == 0
    out2 = tmp_path / "cont"
    assert train.main(_args(footage, out2, "--max-steps", "1", "--init-weights", str(out / "weights.safetensors"))) == 0
    assert json.loads((out2 / "progress.json").read_text())["step"] == 3


def test_validate_first_keeps_the_start_unless_beaten(footage, tmp_path, monkeypatch):
    """--validate-first scores the starting weights at their own step; they stay kept unless a later step wins."""
    from safetensors import safe_open

    from training import validation

    out = tmp_path / "run"
    assert train.main(_args(footage, out, "--max-steps", "2")) == 0
    first_run = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if "score" in line]
    # the rule's decisions on the exact figures train.py holds: the log rounds them to 3 decimals, and on these
    # nearly equal scores the rounded figures once decided the other way (a test that failed about 1 run in 5)
    decisions = []
    rule = validation.replaces_kept

    def recorded_rule(*args, **kwargs):
        decisions.append(rule(*args, **kwargs))
        return decisions[-1]

    monkeypatch.setattr(validation, "replaces_kept", recorded_rule)
    out2 = tmp_path / "run2"
    assert train.main(_args(footage, out2, "--max-steps", "1", "--val-every", "100",
                            "--init-weights", str(out / "weights.safetensors"), "--validate-first")) == 0
    checks = [json.loads(line) for line in (out2 / "log.jsonl").read_text().splitlines() if "score" in line]
    assert [c["step"] for c in checks] == [2, 3]
    start, end = checks
    assert start["score"] == pytest.approx(first_run[-1]["score"], abs=0.05)  # the same weights, saved in fp16
    assert len(decisions) == 2 and decisions[0]  # the start is kept first; then the rule decides on step 3
    later_wins = decisions[1]
    with safe_open(str(out2 / "weights.safetensors"), framework="pt") as f:
        assert int(f.metadata()["step"]) == (3 if later_wins else 2)
    kept = end if later_wins else start
    assert json.loads((out2 / "progress.json").read_text())["kept_score"] == pytest.approx(kept["score"], abs=1e-3)


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


def test_train_logs_both_validation_sets(footage, tmp_path):
    out = tmp_path / "run"
    assert train.main(_args(footage, out, "--max-steps", "2", "--native-share", "0.5")) == 0
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    last = rows[-1]
    assert {"val_psnr", "val_consecutive_psnr", "val_clean_psnr", "val_synthetic_edges_psnr", "val_boundary_psnr",
            "score"} <= set(last)
    assert last["val_boundary_psnr"] is None or 0 < last["val_boundary_psnr"] < 100
    # weights are chosen by the margin over the classical baseline on the held-out clip's whole frames
    assert {"margin", "margin_t1", "margin_t2", "holdout_psnr", "baseline_psnr"} <= set(last)
    assert abs(last["score"] - last["margin"]) < 2e-3
    assert abs(last["margin"] - (last["holdout_psnr"] - last["baseline_psnr"])) < 2e-3
    assert json.loads((out / "train_config.json").read_text())["native_share"] == 0.5
    assert "best_score" in json.loads((out / "progress.json").read_text())


def test_synthetic_options_set_the_mix_and_edges_and_are_checked(footage, tmp_path, capsys):
    out = tmp_path / "run"
    assert train.main(_args(footage, out, "--max-steps", "1", "--synthetic-share", "0.5", "--synthetic-edge", "1",
                            "--synthetic-edge-share", "0.5")) == 0
    saved = json.loads((out / "train_config.json").read_text())
    assert saved["synthetic_share"] == 0.5 and saved["synthetic_edge_px"] == 1.0
    assert saved["synthetic_edge_share"] == 0.5
    out3 = tmp_path / "run3"
    assert train.main(_args(footage, out3, "--max-steps", "1", "--synthetic-share", "0.5", "--synthetic-layers", "4",
                            "--synthetic-motion", "1.5", "--synthetic-shapes", "0.3", "--synthetic-warp", "6",
                            "--synthetic-texture-zoom", "1.5", "--flow-loss-weight", "0.1",
                            "--flow-loss-units", "quarter")) == 0
    saved = json.loads((out3 / "train_config.json").read_text())
    assert saved["synthetic_layers"] == 4 and saved["synthetic_motion"] == 1.5 and saved["synthetic_shapes"] == 0.3
    assert saved["synthetic_warp"] == 6.0 and saved["synthetic_texture_zoom"] == 1.5
    assert saved["flow_loss_weight"] == 0.1 and saved["flow_loss_units"] == "quarter"
    out4 = tmp_path / "run4"
    assert train.main(_args(footage, out4, "--max-steps", "1", "--photometric-share", "0.5",
                            "--weight-decay", "0.05")) == 0
    saved = json.loads((out4 / "train_config.json").read_text())
    assert saved["photometric_share"] == 0.5 and saved["weight_decay"] == 0.05
    out5 = tmp_path / "run5"
    assert train.main(_args(footage, out5, "--max-steps", "2", "--paste-share", "1", "--paste-layers", "2")) == 0
    saved = json.loads((out5 / "train_config.json").read_text())
    assert saved["paste_share"] == 1.0 and saved["paste_layers"] == 2
    for n, (option, value, message) in enumerate((
            ("--flow-loss-weight", "-0.1", "--flow-loss-full-res must be 0 or positive, got 1.0, -0.1 and 1.0"),
            ("--flow-loss-full-res", "-1", "--flow-loss-full-res must be 0 or positive, got 1.0, 0.05 and -1.0"),
            ("--synthetic-shapes", "-1", "--synthetic-shapes and --synthetic-warp 0 or positive"),
            ("--synthetic-warp", "-1", "--synthetic-shapes and --synthetic-warp 0 or positive"),
            ("--synthetic-texture-zoom", "0.5", "--synthetic-texture-zoom at least 1"),
            ("--synthetic-layers", "0", "--synthetic-layers must be at least 1"),
            ("--synthetic-edge-share", "2", "--synthetic-edge-share must lie in [0, 1]"),
            ("--synthetic-share", "1", "--synthetic-share must lie in [0, 1)"),
            ("--photometric-share", "1.5", "--photometric-share must lie in [0, 1]"),
            ("--weight-decay", "-1", "--weight-decay be 0 or positive"),
            ("--paste-share", "-0.5", "--paste-share must lie in [0, 1]"),
            ("--paste-layers", "0", "--paste-layers be at least 1"))):
        assert train.main(_args(footage, tmp_path / f"bad{n}", "--max-steps", "1", option, value)) == 2, option
        assert message in capsys.readouterr().err


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


def test_sampler_photometric_share_recolours_whole_triplets():
    """--photometric-share: the chosen triplets change colour, their three frames alike (a static clip stays static),
    within [0, 1]; share 0 draws nothing, so the batches of earlier recipes are unchanged."""
    from training.data import Clip, FootageSampler

    frames = torch.randint(0, 256, (1, 3, 80, 80), generator=torch.Generator().manual_seed(1), dtype=torch.uint8)
    clip = Clip("static", frames.expand(12, 3, 80, 80).contiguous(), 3.0, (), torch.zeros(11, dtype=torch.bool))

    def batch(share, seed=0):
        sampler = FootageSampler([clip], 64, 1, generator=torch.Generator().manual_seed(seed), photometric_share=share)
        return sampler.batch(16)

    plain, again = batch(0.0), FootageSampler([clip], 64, 1, generator=torch.Generator().manual_seed(0)).batch(16)
    for key in ("one", "mid", "two", "t"):
        assert torch.equal(plain[key], again[key]), key
    recoloured = batch(1.0)
    for key in ("one", "mid", "two"):
        assert recoloured[key].min() >= 0 and recoloured[key].max() <= 1
    assert torch.equal(recoloured["one"], recoloured["mid"]) and torch.equal(recoloured["two"], recoloured["mid"])
    # against the same crops without it (the same seed draws the same crops first; the flips, transposes and channel
    # order drawn after differ, so samples are compared by their sorted values, which those leave unchanged):
    # every triplet changed with share 1, some with share 0.5
    def values(b):
        return b["one"].flatten(1).sort(dim=1).values

    changed = (values(recoloured) - values(plain)).abs().mean(dim=1)
    assert torch.all(changed > 1e-3)
    kept = [bool(torch.equal(a, b)) for a, b in zip(values(batch(0.5)), values(plain))]
    assert 0 < sum(kept) < 16
    with pytest.raises(ValueError, match="photometric_share"):
        FootageSampler([clip], 64, photometric_share=2.0)


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


def test_train_accepts_downscale_share(footage, tmp_path):
    out = tmp_path / "run"
    assert train.main(_args(footage, out, "--max-steps", "1", "--downscale-share", "0.5")) == 0
    assert json.loads((out / "train_config.json").read_text())["downscale_share"] == 0.5


def test_train_grows_a_trained_network(footage, tmp_path, capsys):
    out = tmp_path / "run"
    assert train.main(_args(footage, out, "--max-steps", "1")) == 0
    grown = tmp_path / "grown"
    assert train.main(_args(footage, grown, "--max-steps", "1", "--init-weights", str(out / "weights.safetensors"),
                            "--network", "refine_width=8", "flow_refine_hidden=8")) == 0
    assert "new tensors start from their initialisation" in capsys.readouterr().out
    config = json.loads((grown / "config.json").read_text())
    assert config["refine_width"] == 8 and config["flow_refine_hidden"] == [8]
    # the grown weights rebuild the grown network
    from model import load_weights

    assert load_weights(grown / "weights.safetensors").config.refine_width == 8
    # --network cannot shrink what the weights hold, and does not combine with --resume
    assert train.main(_args(footage, tmp_path / "x", "--max-steps", "1", "--init-weights",
                            str(grown / "weights.safetensors"), "--network", "refine_width=0")) == 2
    assert "can add stages, not remove them" in capsys.readouterr().err
    assert train.main(_args(footage, tmp_path / "y", "--max-steps", "1", "--resume", str(out),
                            "--network", "refine_width=8")) == 2
    assert train.main(_args(footage, tmp_path / "w", "--max-steps", "1", "--init-weights",
                            str(out / "weights.safetensors"), "--network", "full_width=12")) == 2
    assert "not resize trained ones" in capsys.readouterr().err
    assert train.main(_args(footage, tmp_path / "z", "--network", "refine_width=x")) == 2
    assert "refine_width takes int" in capsys.readouterr().err


def test_val_batches_option(footage, tmp_path, capsys):
    assert train.main(_args(footage, tmp_path / "bad", "--val-batches", "0")) == 2
    assert "--val-batches 0" in capsys.readouterr().err
    out = tmp_path / "run"
    assert train.main(_args(footage, out, "--max-steps", "1", "--val-batches", "2")) == 0
    assert "score" in (out / "log.jsonl").read_text()



def test_ema_validates_and_saves_the_average(footage, tmp_path, capsys):
    """--ema keeps a moving average beside the trained weights, resumes it, and saves it as the weights."""
    from safetensors.torch import load_file

    out = tmp_path / "ema"
    # validated only at the end (step 4), so the saved weights are the average at step 4
    assert train.main(_args(footage, out, "--max-steps", "4", "--ema", "0.5", "--val-every", "100")) == 0
    average = load_file(str(out / "state_ema.safetensors"))
    trained = load_file(str(out / "state_model.safetensors"))
    assert int(average.pop("_updates")[0]) == 4
    assert set(average) == set(trained) and all(a.dtype == torch.float16 for a in average.values())
    assert any(not torch.equal(average[k].float(), trained[k].half().float()) for k in trained)  # not a copy
    weights = load_file(str(out / "weights.safetensors"))
    for name in trained:  # fp16 copies of the average
        torch.testing.assert_close(weights[name], average[name], atol=1e-3, rtol=1e-3)
    out2 = tmp_path / "ema2"
    assert train.main(_args(footage, out2, "--max-steps", "2", "--resume", str(out))) == 0
    assert int(load_file(str(out2 / "state_ema.safetensors"))["_updates"][0]) == 6
    assert train.main(_args(footage, tmp_path / "bad", "--ema", "1.5")) == 2
    assert "--ema" in capsys.readouterr().err


def test_init_weights_restores_the_training_recipe(footage, tmp_path, capsys):
    """Weights record the recipe they were trained with; --init-weights continues it, options override it,
    and a file without one says that defaults apply."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    out = tmp_path / "run"
    assert train.main(_args(footage, out, "--max-steps", "2", "--native-share", "0.5", "--ema", "0.9")) == 0
    out2 = tmp_path / "cont"
    assert train.main(_args(footage, out2, "--max-steps", "1", "--init-weights", str(out / "weights.safetensors"))) == 0
    config = json.loads((out2 / "train_config.json").read_text())
    assert config["native_share"] == 0.5 and config["ema_decay"] == 0.9
    out3 = tmp_path / "override"
    assert train.main(_args(footage, out3, "--max-steps", "1", "--native-share", "0",
                            "--init-weights", str(out / "weights.safetensors"))) == 0
    assert json.loads((out3 / "train_config.json").read_text())["native_share"] == 0.0
    bare = tmp_path / "bare.safetensors"
    with safe_open(str(out / "weights.safetensors"), framework="pt") as f:
        metadata = {k: v for k, v in f.metadata().items() if k != "train_config"}
    save_file(load_file(str(out / "weights.safetensors")), str(bare), metadata=metadata)
    capsys.readouterr()
    assert train.main(_args(footage, tmp_path / "bare_run", "--max-steps", "1", "--init-weights", str(bare))) == 0
    assert "does not record its training recipe" in capsys.readouterr().err


def test_cuda_graph_needs_one_cuda_device(footage, tmp_path, capsys):
    assert train.main(_args(footage, tmp_path / "g", "--max-steps", "1", "--cuda-graph")) == 2
    assert "--cuda-graph" in capsys.readouterr().err


@pytest.mark.cuda
def test_cuda_graph_step_matches_the_eager_step():
    """--cuda-graph replays a recorded forward and backward: on a new batch its losses and the parameters'
    gradients must match the eager step's (same kernels; only atomic-add order differs)."""
    from model import Network

    torch.manual_seed(0)
    net = Network().cuda().to(memory_format=torch.channels_last)

    def step_loss():
        return train._StepLoss(train._TrainStep(net), n_real=3, batch=4, census_weight=1.0, flow_weight=0.05,
                               bf16=True)

    def batch(seed):
        g = torch.Generator().manual_seed(seed)
        frames = [torch.rand(4, 3, 64, 64, generator=g).cuda().contiguous(memory_format=torch.channels_last)
                  for _ in range(3)]
        t = torch.rand(4, generator=g).cuda()
        gt = (torch.randn(2, 2, 64, 64, generator=g) * 2).cuda()
        return frames[0], frames[2], t, frames[1], gt

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
    for a, b in zip(graph_grads, eager_grads):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=1e-4)


def test_restart_schedule_counts_warmup_and_cosine_from_the_init_step(footage, tmp_path, capsys):
    """--restart-schedule starts a new warm-up and cosine at the start step, kept on --resume; weights past their
    schedule's end without it train at the floor rate, and train.py says so, naming the option."""
    from training.schedule import learning_rate

    # the rate a restarted schedule gives is the fresh schedule's, shifted to the start step
    for offset in (0, 10, 999, 1000, 5000, 40000):
        assert learning_rate(31000 + offset, 1e-4, 1000, 40000, start=31000) == learning_rate(offset, 1e-4, 1000, 40000)
    assert learning_rate(31000, 1e-4, 1000, 40000, start=31000) == pytest.approx(1e-7)  # warm-up's first step
    assert learning_rate(31000, 1e-4, 1000, 40000) < 0.2e-4  # without a restart: no warm-up, the cosine's tail
    out = tmp_path / "run"
    assert train.main(_args(footage, out, "--max-steps", "2", "--total-steps", "2")) == 0
    assert "past the end" not in capsys.readouterr().err  # it started at step 0, inside its schedule
    assert train.main(_args(footage, tmp_path / "on", "--max-steps", "1",
                            "--init-weights", str(out / "weights.safetensors"))) == 0
    err = capsys.readouterr().err
    assert "step 2 is past the end of the learning-rate schedule (steps 0-2)" in err and "--restart-schedule" in err
    out2 = tmp_path / "restart"
    assert train.main(_args(footage, out2, "--max-steps", "1", "--restart-schedule", "--total-steps", "500",
                            "--init-weights", str(out / "weights.safetensors"))) == 0
    assert "past the end" not in capsys.readouterr().err
    config = json.loads((out2 / "train_config.json").read_text())
    assert config["schedule_start"] == 2 and config["total_steps"] == 500
    out3 = tmp_path / "resumed"  # a resumed state keeps the restarted schedule
    assert train.main(_args(footage, out3, "--max-steps", "1", "--resume", str(out2))) == 0
    assert json.loads((out3 / "train_config.json").read_text())["schedule_start"] == 2


def test_rewarm_ramps_the_rate_onto_the_schedule_where_it_stands(footage, tmp_path, capsys, monkeypatch):
    import training.schedule
    from training.schedule import learning_rate, rewarmed

    rate = learning_rate(25000, 3e-4, 1000, 100000)
    assert rewarmed(rate, 25000, 25000, 500) == pytest.approx(rate / 500)  # the chunk's first step
    assert rewarmed(rate, 25249, 25000, 500) == pytest.approx(rate / 2)
    assert rewarmed(rate, 25500, 25000, 500) == rate  # then the schedule itself, which was not restarted
    assert rewarmed(rate, 25000, 25000, 0) == rate
    out = tmp_path / "run"
    assert train.main(_args(footage, out, "--max-steps", "2")) == 0
    used = []  # the rates train.py sets, through the real function
    monkeypatch.setattr(training.schedule, "rewarmed", lambda *a: used.append(rewarmed(*a)) or used[-1])
    out2 = tmp_path / "cont"
    assert train.main(_args(footage, out2, "--max-steps", "2", "--rewarm", "4",
                            "--init-weights", str(out / "weights.safetensors"))) == 0
    config = json.loads((out2 / "train_config.json").read_text())
    assert config["schedule_start"] == 0  # the schedule goes on; only this chunk's first steps are scaled
    full = [learning_rate(s, config["lr"], config["warmup"], config["total_steps"]) for s in (2, 3)]
    assert used == pytest.approx([full[0] / 4, full[1] * 2 / 4])
    assert train.main(_args(footage, tmp_path / "bad", "--rewarm", "-1")) == 2
    assert "--rewarm" in capsys.readouterr().err


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


def test_flow_loss_weighs_the_full_resolution_level():
    """--flow-loss-full-res scales the end-point error of a full-resolution flow level (convex upsampling)
    against 1 for each coarser level, in a weighted mean; 0 leaves that level unsupervised."""
    from train import _step_losses

    torch.manual_seed(0)
    pred = mid = torch.rand(2, 3, 32, 32)
    gt = torch.zeros(2, 2, 32, 32)  # one synthetic sample: its forward flow, then its backward flow
    coarse = torch.zeros(4, 2, 8, 8)
    coarse[:, 0] = 1.0  # 1 px of error in 1/4-level pixels
    full = torch.zeros(4, 2, 32, 32)
    full[:, 0] = 4.0  # the same error in full-resolution pixels
    pyramid = [coarse, full]

    def flow_loss(weight: float) -> float:
        return float(_step_losses(pred, pyramid, mid, gt, 1, 2, 1.0, 0.05, weight)[3])

    assert flow_loss(1.0) == pytest.approx((1.0 + 4.0) / 2)
    assert flow_loss(0.25) == pytest.approx((1.0 + 1.0) / 1.25)
    assert flow_loss(0.0) == pytest.approx(1.0)


def test_flow_loss_in_quarter_resolution_units_counts_coarse_misses_fully():
    """--flow-loss-units quarter: the same miss in full-resolution pixels counts the same at every level (in the
    levels' own units a 1/32 level's miss counts 8x less than a 1/4 level's)."""
    from train import _step_losses

    pred = mid = torch.rand(2, 3, 64, 64)
    gt = torch.zeros(2, 2, 64, 64)
    pyramid = []
    for size in (2, 16):  # 1/32 and 1/4 of 64 px, each off by 8 full-resolution pixels
        level = torch.zeros(4, 2, size, size)
        level[:, 0] = 8.0 * size / 64
        pyramid.append(level)

    def flow_loss(units: str) -> float:
        return float(_step_losses(pred, pyramid, mid, gt, 1, 2, 1.0, 0.05, 1.0, units)[3])

    assert flow_loss("level") == pytest.approx((0.25 + 2.0) / 2)
    assert flow_loss("quarter") == pytest.approx((2.0 + 2.0) / 2)


def test_validation_crop_does_not_follow_a_larger_training_crop(footage, tmp_path, monkeypatch):
    """Validation triplets are VALIDATION_CROP (256) px whatever --crop is (smaller only for a smaller training
    crop), so an A/B of training crop sizes is scored on the same triplets: the same weights get the same figure."""
    import training.config

    monkeypatch.setattr(training.config, "VALIDATION_CROP", 48)  # the tests' clips are 96 x 80
    scores = []
    for crop in ("64", "80"):
        out = tmp_path / f"crop{crop}"
        assert train.main(_args(footage, out, "--crop", crop, "--max-steps", "1", "--validate-first",
                                "--seed", "3")) == 0
        first = next(json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if "score" in line)
        assert first["step"] == 0
        scores.append(first["score"])
    assert scores[0] == scores[1]


def test_resume_keeps_the_validation_size(footage, tmp_path, capsys):
    """A resumed run validates on the triplets its best score was measured on, unless told otherwise; then the
    old best, from other triplets, is not the bar for the new scores."""
    out = tmp_path / "run"
    assert train.main(_args(footage, out, "--max-steps", "2", "--val-batches", "2")) == 0
    progress = json.loads((out / "progress.json").read_text())
    assert progress["val_batches"] == 2
    out2 = tmp_path / "same"
    assert train.main(_args(footage, out2, "--max-steps", "2", "--resume", str(out))) == 0
    assert json.loads((out2 / "progress.json").read_text())["val_batches"] == 2
    assert json.loads((out2 / "progress.json").read_text())["best_score"] >= progress["best_score"]
    (out / "progress.json").write_text(json.dumps(dict(progress, best_score=99.0, kept_score=99.0)))
    capsys.readouterr()
    out3 = tmp_path / "other"
    assert train.main(_args(footage, out3, "--max-steps", "2", "--resume", str(out), "--val-batches", "1")) == 0
    assert "not carried over" in capsys.readouterr().err
    after = json.loads((out3 / "progress.json").read_text())
    assert after["val_batches"] == 1 and after["best_score"] < 99.0
    assert (out3 / "weights.safetensors").is_file()  # this chunk's own best was kept


def test_resume_keeps_cuda_graph_where_it_can(footage, tmp_path, capsys):
    out = tmp_path / "run"
    assert train.main(_args(footage, out, "--max-steps", "1")) == 0
    progress = json.loads((out / "progress.json").read_text())
    assert progress["cuda_graph"] is False
    # a state saved by a --cuda-graph run (on a GPU), resumed where graphs cannot run: eager, with a note
    (out / "progress.json").write_text(json.dumps({**progress, "cuda_graph": True}))
    out2 = tmp_path / "resumed"
    assert train.main(_args(footage, out2, "--max-steps", "1", "--resume", str(out))) == 0
    assert "used --cuda-graph" in capsys.readouterr().err
    assert json.loads((out2 / "progress.json").read_text())["cuda_graph"] is False
    out3 = tmp_path / "eager"  # said outright, no note
    assert train.main(_args(footage, out3, "--max-steps", "1", "--resume", str(out), "--no-cuda-graph")) == 0
    assert "used --cuda-graph" not in capsys.readouterr().err


def test_oracle_probe_bounds_constant_velocity_motion():
    """bench/diagnose_validation.py --oracle: on a texture moving at constant velocity, interpolation told the
    middle frame's motion is near exact, straightening it changes nothing, and both beat blending."""
    import cv2
    import numpy as np

    from bench.diagnose_validation import _oracle_rows
    from model import load_weights

    rng = np.random.default_rng(0)
    texture = cv2.GaussianBlur(rng.random((96, 120, 3)).astype(np.float32), (0, 0), 2.0)
    texture = (texture - texture.min()) / (texture.max() - texture.min())
    frames = [torch.from_numpy(np.ascontiguousarray(texture[16:80, 16 + 3 * k:80 + 3 * k])).permute(2, 0, 1)
              for k in range(3)]  # 3 px per frame to the left
    batch = {"one": frames[0][None], "mid": frames[1][None], "two": frames[2][None], "t": torch.tensor([0.5])}
    weights = Path(__file__).resolve().parent.parent / "weights" / "network.safetensors"
    with torch.no_grad():
        rows = {k: float(v) for k, v in _oracle_rows(load_weights(weights, torch.device("cpu")).eval(), batch).items()}
    assert rows["middle-frame flow"] > rows["frame blend"] + 8
    assert abs(rows["constant velocity"] - rows["middle-frame flow"]) < 1.0
    assert rows["+ best input per pixel"] >= rows["middle-frame flow"] - 0.5
    assert rows["network"] > rows["frame blend"]


def test_diagnose_skip_batches_scores_only_the_later_batches(monkeypatch, capsys):
    """bench/diagnose_validation.py --val-batches 32 --skip-batches 16 scores batches 17-32 of every set exactly
    (the fresh triplets of a run validated on 16), and refuses a skip that leaves nothing."""
    import bench.diagnose_validation as diagnose

    drawn = {name: [{"batch": k} for k in range(4)] for name in ("motion-weighted", "consecutive")}
    seen = {}

    def fake_psnr(net, sets, boundaries, near_linear):
        seen["sets"], seen["near_linear"] = sets, near_linear
        return {"motion-weighted": 30.0, "consecutive": 32.0}, 24.0

    monkeypatch.setattr(diagnose, "validation_sets", lambda clips, crop, gap, batches: drawn)
    monkeypatch.setattr(diagnose, "boundary_masks", lambda sets: {n: len(b) for n, b in sets.items()})
    monkeypatch.setattr(diagnose, "near_linear_subsets", lambda sets, names: {n: len(b) for n, b in sets.items()})
    monkeypatch.setattr(diagnose, "load_weights", lambda path, device: torch.nn.Identity())
    monkeypatch.setattr(diagnose, "validation_psnr", fake_psnr)
    assert diagnose.boundary_scores([], [Path("w.safetensors")], torch.device("cpu"), batches=4, skip=3) == 0
    assert seen["sets"] == {name: [{"batch": 3}] for name in drawn}
    assert seen["near_linear"] == {name: 1 for name in drawn}  # measured on the scored batches only
    assert "31.000" in capsys.readouterr().out  # the score, (30 + 32) / 2
    with pytest.raises(SystemExit):
        diagnose.main(["--data", ".", "--boundaries", "--val-batches", "16", "--skip-batches", "16"])
    assert "--skip-batches 16: use 0 to 15" in capsys.readouterr().err


def test_diagnose_flow_scale_scores_the_network_with_its_flow_at_other_sizes(monkeypatch, capsys):
    """bench/diagnose_validation.py --boundaries --flow-scale 1 2 gives a row per weights file and scale, the
    network estimating its flow at that scale of the frames (full-resolution flow back), and the option is
    refused without --boundaries or outside (0, 4]."""
    import bench.diagnose_validation as diagnose
    from model import Network

    torch.manual_seed(0)
    net = Network().eval()
    one, two = torch.rand(1, 3, 64, 96), torch.rand(1, 3, 64, 96)
    with torch.no_grad():
        plain = net.estimate_flow(one, two)
        scaled = diagnose.ScaledFlow(net, 2.0).estimate_flow(one, two)
        frame = diagnose.ScaledFlow(net, 2.0).synthesize(scaled, torch.tensor([0.5]))
    assert scaled.flow_fwd.shape == plain.flow_fwd.shape == (1, 2, 64, 96)
    assert frame.shape == (1, 3, 64, 96)
    assert not torch.allclose(scaled.flow_fwd, plain.flow_fwd)  # the scale reached the flow estimate

    drawn = {name: [{"batch": 0}] for name in ("motion-weighted", "consecutive")}
    scales = []

    def fake_psnr(model, sets, boundaries, near_linear):
        scales.append(getattr(model, "scale", 1.0))
        return {"motion-weighted": 30.0, "consecutive": 32.0}, 24.0

    monkeypatch.setattr(diagnose, "validation_sets", lambda clips, crop, gap, batches: drawn)
    monkeypatch.setattr(diagnose, "boundary_masks", lambda sets: {})
    monkeypatch.setattr(diagnose, "near_linear_subsets", lambda sets, names: {})
    monkeypatch.setattr(diagnose, "load_weights", lambda path, device: torch.nn.Identity())
    monkeypatch.setattr(diagnose, "validation_psnr", fake_psnr)
    assert diagnose.boundary_scores([], [Path("w.safetensors")], torch.device("cpu"), flow_scales=(1.0, 2.0)) == 0
    assert scales == [1.0, 2.0]
    out = capsys.readouterr().out
    assert "(flow scale 1)" in out and "(flow scale 2)" in out
    for argv, message in ((["--flow-scale", "2"], "--flow-scale goes with --boundaries"),
                          (["--boundaries", "--flow-scale", "0"], "--flow-scale 0: use values in (0, 4]")):
        with pytest.raises(SystemExit):
            diagnose.main(["--data", ".", *argv])
        assert message in capsys.readouterr().err


def test_unpack_builds_a_state_that_resumes(footage, tmp_path, capsys):
    """training.unpack: a device chunk's files (small.tar's t/ and train/state_*, as device_chunk.sh leaves them)
    become a state folder and a lean resume folder that train.py --resume takes."""
    import shutil
    import tarfile

    from training.unpack import main as unpack

    returned = tmp_path / "returned"
    assert train.main(_args(footage, returned / "train", "--max-steps", "2", "--ema", "0.9")) == 0
    small = returned / "t"
    small.mkdir()
    for path in list((returned / "train").iterdir()):  # what device_chunk.sh moves into the tar
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
    assert train.main(_args(footage, tmp_path / "next", "--max-steps", "1", "--resume", str(resume))) == 0
    assert json.loads((tmp_path / "next" / "progress.json").read_text())["step"] == 3
    assert unpack([str(returned), str(tmp_path / "state")]) == 2  # not over an earlier chunk
    assert "not empty" in capsys.readouterr().err
    assert unpack([str(tmp_path / "nothing"), str(tmp_path / "other")]) == 2
    assert "small.tar" in capsys.readouterr().err
