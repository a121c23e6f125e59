"""The diagnostics of scripts/diagnose on tensors: the oracle probe, and validation.py's batch and scale options."""

from pathlib import Path

import pytest
import torch


def test_oracle_probe_bounds_constant_velocity_motion():
    """scripts/diagnose/validation.py --oracle: on a texture moving at constant velocity, interpolation told the
    middle frame's motion is near exact, straightening it changes nothing, and both beat blending."""
    import cv2
    import numpy as np

    from scripts.diagnose.validation import _oracle_rows
    from softsplat_vfi.model import load_weights

    rng = np.random.default_rng(0)
    texture = cv2.GaussianBlur(rng.random((96, 120, 3)).astype(np.float32), (0, 0), 2.0)
    texture = (texture - texture.min()) / (texture.max() - texture.min())
    frames = [torch.from_numpy(np.ascontiguousarray(texture[16:80, 16 + 3 * k:80 + 3 * k])).permute(2, 0, 1)
              for k in range(3)]  # 3 px per frame to the left
    batch = {"one": frames[0][None], "mid": frames[1][None], "two": frames[2][None], "t": torch.tensor([0.5])}
    weights = Path(__file__).resolve().parent.parent / "softsplat_vfi" / "weights" / "network.safetensors"
    with torch.no_grad():
        rows = {k: float(v) for k, v in _oracle_rows(load_weights(weights, torch.device("cpu")).eval(), batch).items()}
    assert rows["middle-frame flow"] > rows["frame blend"] + 8
    assert abs(rows["constant velocity"] - rows["middle-frame flow"]) < 1.0
    assert rows["+ best input per pixel"] >= rows["middle-frame flow"] - 0.5
    assert rows["network"] > rows["frame blend"]


def test_diagnose_skip_batches_scores_only_the_later_batches(monkeypatch, capsys):
    """scripts/diagnose/validation.py --val-batches 32 --skip-batches 16 scores batches 17-32 of every set exactly
    (the fresh triplets of a run validated on 16), and refuses a skip that leaves nothing."""
    import scripts.diagnose.validation as diagnose

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
    """scripts/diagnose/validation.py --boundaries --flow-resize 1 2 gives a row per weights file and scale, the
    network estimating its flow at that scale of the frames (full-resolution flow back), and the option is
    refused without --boundaries or outside (0, 4]."""
    import scripts.diagnose.validation as diagnose
    from softsplat_vfi.model import Network

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
    for argv, message in ((["--flow-resize", "2"], "--flow-resize goes with --boundaries"),
                          (["--boundaries", "--flow-resize", "0"], "--flow-resize 0: use values in (0, 4]")):
        with pytest.raises(SystemExit):
            diagnose.main(["--data", ".", *argv])
        assert message in capsys.readouterr().err


def test_patterns_have_exact_middle_frames_and_score_the_fast_weights(capsys):
    """scripts.diagnose.patterns: every pattern's middle frame is the rigid motion halfway (the second frame moved
    on by the same shift reproduces it), the fast weights get the 2-px stripes right (no pixel off by 0.1), and on the
    fine blinds they are further off than the classical baseline (README, limits)."""
    import numpy as np

    from scripts.diagnose.patterns import errors, main, patterns

    cases = patterns()
    assert set(cases) == {"sine", "sine-6px", "blinds", "shapes", "noise"}
    one, mid, two = cases["noise"]
    np.testing.assert_array_equal(mid[:, :-1], one[:, 1:])  # 1 px per half step: the middle frame is one moved 1 px
    np.testing.assert_array_equal(two[:, :-1], mid[:, 1:])
    one, mid, two = cases["sine"]
    assert errors(mid, mid) == {"mean": 0.0, "max": 0.0, "blotch_px": 0}
    assert errors((one + two) / 2, mid)["mean"] < errors(one, mid)["mean"]
    one, mid, two = cases["blinds"]  # 1 px down per half step
    np.testing.assert_allclose(mid[1:, :, :2], one[:-1, :, :2], atol=1e-6)
    np.testing.assert_allclose(two[1:, :, :2], mid[:-1, :, :2], atol=1e-6)
    fast = str(Path(__file__).resolve().parent.parent / "softsplat_vfi" / "weights" / "fast.safetensors")
    assert main(["--weights", fast, "--classical"]) == 0
    network, baseline = [row.split("|") for row in capsys.readouterr().out.splitlines()[-2:]]
    sine = network[2].split("/")
    assert float(sine[0]) < 0.005 and int(sine[2]) == 0
    # the 8-px blinds: the fast network's middle frame is wrong nearly everywhere (mean error over 0.1), the
    # classical baseline's on part of the pattern (README, limits)
    assert baseline[1].strip().startswith("classical")
    assert float(baseline[4].split("/")[0]) < float(network[4].split("/")[0]) and float(network[4].split("/")[0]) > 0.1
