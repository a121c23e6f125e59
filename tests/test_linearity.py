"""training.linearity: how far footage triplets stray from constant velocity, and train.py --max-nonlinearity
(under torchrun: tests/test_train.py's two-process run)."""

import dataclasses

import numpy as np
import pytest
import torch

from tests.training_fixtures import run_args
from training.data import Clip, FootageSampler
from training.linearity import clip_nonlinearity, near_linear_subsets, triplet_nonlinearity


def _texture(height: int = 96, width: int = 200) -> np.ndarray:
    import cv2

    rng = np.random.default_rng(0)
    texture = cv2.GaussianBlur(rng.random((height, width, 3)).astype(np.float32), (0, 0), 2.0)
    return (texture - texture.min()) / (texture.max() - texture.min())


def _frames(positions, size: int = 64) -> torch.Tensor:
    """Crops of one texture at these horizontal offsets: the scene moves left by the differences."""
    texture = _texture()
    return torch.stack([torch.from_numpy(np.ascontiguousarray(texture[16:16 + size, 16 + p:16 + p + size]))
                        .permute(2, 0, 1) for p in positions])


def test_constant_velocity_measures_near_zero_and_acceleration_its_offset():
    steady = _frames([0, 3, 6])  # 3 px per frame
    jerky = _frames([0, 1, 10])  # the middle frame 1 px along, where constant velocity puts it at 5
    t = torch.tensor([0.5])
    low = float(triplet_nonlinearity(steady[:1], steady[1:2], steady[2:], t)[0])
    high = float(triplet_nonlinearity(jerky[:1], jerky[1:2], jerky[2:], t)[0])
    assert low < 0.3
    assert 3.0 < high < 5.0  # (1 - t) * (-1) + t * 9 = 4 px
    # an uneven triplet with t = 1/3 at constant velocity: frames 0, 1, 3 of a 3 px-per-frame motion
    uneven = _frames([0, 3, 9])
    assert float(triplet_nonlinearity(uneven[:1], uneven[1:2], uneven[2:], torch.tensor([1 / 3]))[0]) < 0.3


def test_clip_table_follows_the_triplets_and_leaves_the_end_undefined():
    positions = [0, 2, 4, 6, 12, 14]  # steady, then a jump between frames 3 and 4
    frames = (_frames(positions) * 255).round().to(torch.uint8)
    table = clip_nonlinearity(frames, 2, scale=1.0)
    assert table.shape == (6, 2, 2)
    assert float(table[0, 0, 0]) < 0.3 and float(table[0, 0, 1]) < 0.3  # (0, 1, 2) and (0, 1, 3): 2 px a frame
    assert float(table[2, 0, 0]) > 1.0 and float(table[1, 1, 1]) > 1.0  # (2, 3, 4) and (1, 3, 5) span the jump
    assert torch.isnan(table[4, 0, 0]) and torch.isnan(table[3, 1, 1])  # past the last frame
    # the table's entry is the triplet measure of the same three frames
    single = triplet_nonlinearity(frames[2:3].float() / 255, frames[3:4].float() / 255, frames[4:5].float() / 255,
                                  torch.tensor([0.5]))
    assert abs(float(single[0]) - float(table[2, 0, 0])) < 0.05


def test_sampler_leaves_out_the_triplets_above_the_limit():
    frames = torch.arange(30, dtype=torch.uint8).view(30, 1, 1, 1).expand(30, 3, 70, 70).contiguous()
    clip = Clip("c", frames, 0.3, (), torch.zeros(29, dtype=torch.bool))  # slow: k up to 4
    sampler = FootageSampler([clip], 64, 4, generator=torch.Generator().manual_seed(0))
    table = torch.full((30, 4, 4), 5.0)
    table[7, 1, 1] = 0.5  # only (7, 9, 11) is near-linear
    sampler.limit_nonlinearity([table], 1.0)
    assert {sampler.triplet()[1:] for _ in range(20)} == {(7, 9, 11)}
    with pytest.raises(ValueError, match="measure it again"):
        sampler.limit_nonlinearity([table[:, :2, :2]], 1.0)
    with pytest.raises(ValueError, match="positive"):
        sampler.limit_nonlinearity([table], 0.0)
    sampler.limit_nonlinearity([torch.full((30, 4, 4), 5.0)], 1.0)
    with pytest.raises(RuntimeError, match="max-nonlinearity"):
        sampler.triplet()


def test_near_linear_subsets_pick_the_steady_triplets():
    steady, jerky = _frames([0, 3, 6]), _frames([0, 1, 10])
    batch = {"one": torch.stack([steady[0], jerky[0]]), "mid": torch.stack([steady[1], jerky[1]]),
             "two": torch.stack([steady[2], jerky[2]]), "t": torch.tensor([0.5, 0.5])}
    subsets = near_linear_subsets({"a": [batch], "b": [batch]}, ["a"])
    assert list(subsets) == ["a"] and subsets["a"][0].tolist() == [True, False]


def test_measuring_tool_tables_cover_the_samplers_gap_range(footage, tmp_path, capsys):
    """python -m training.linearity writes one table per training clip over the k range the sampler draws from
    (a clip of 2 px a frame: k up to 3 of the recipe's max_gap 4), and says so; footage too small for the
    recipe's crop is the sampler's error."""
    from tests.training_fixtures import make_footage
    from training.linearity import main

    data = make_footage(tmp_path / "footage", clips=(("a.mp4", "testsrc2"),), frames=6, size="256x256")
    out = tmp_path / "nonlinearity.pt"
    assert main(["--data", str(data), "--out", str(out), "--workers", "2"]) == 0
    tables = torch.load(out)["tables"]
    assert list(tables) == ["a.mp4"] and tables["a.mp4"].shape == (6, 3, 3)
    # the triplets (a, a + k1, a + k1 + k2) of 6 frames with k1, k2 in 1..3
    count = sum(1 for a in range(6) for k1 in range(1, 4) for k2 in range(1, 4) if a + k1 + k2 < 6)
    assert int((~tables["a.mp4"].isnan()).sum()) == count
    assert capsys.readouterr().out.startswith(f"non-linearity: measured 1 of 1 clips with OpenCV DIS, saved to "
                                              f"{out}\n1 clips, {count} triplets: non-linearity quartiles ")
    with pytest.raises(ValueError, match="no clips to sample from: check --data and the crop size"):
        main(["--data", str(footage), "--out", str(tmp_path / "none.pt")])  # 96x80 clips, crop 256


def _trainer(footage, out, *extra, resume=None):
    """A trainer of the study recipe with the filter at 50 px, its data loaded (the table measured or read)."""
    from training.options import parse
    from training.trainer import Process, Trainer, start_point

    options, overrides = parse(run_args(footage, out, "--max-nonlinearity", "50", *extra))
    start = start_point(options, overrides)
    if resume is not None:  # a resumed run's options, without its state: only the table is asked for here
        options = dataclasses.replace(options, resume=resume)
    trainer = Trainer(options, start, Process(torch.device("cpu")))
    trainer.load_data()
    return trainer


def test_train_measures_once_and_resumes_with_the_table(footage, tmp_path, capsys):
    out = tmp_path / "run"
    trainer = _trainer(footage, out)
    text = capsys.readouterr().out
    assert "non-linearity: measured 2 of 2 clips" in text and "left out" in text
    assert (out / "nonlinearity.pt").is_file() and trainer.sampler.nonlinearity is not None
    # a resumed run reads the table it finds beside the state instead of measuring again
    _trainer(footage, tmp_path / "next", resume=out)
    text = capsys.readouterr().out
    assert "measured" not in text and "left out" in text
    assert (tmp_path / "next" / "nonlinearity.pt").is_file()
    # a table file given by hand
    _trainer(footage, tmp_path / "given", "--nonlinearity", str(out / "nonlinearity.pt"))
    assert "measured" not in capsys.readouterr().out


def test_validation_pools_the_near_linear_triplets_of_the_named_sets():
    from evaluation.metrics import psnr
    from training.validation import validation_psnr

    class Blend:  # stands in for the network: the frame blend at t
        def estimate_flow(self, one, two):
            return one, two

        def synthesize(self, state, t):
            return (1 - t.view(-1, 1, 1, 1)) * state[0] + t.view(-1, 1, 1, 1) * state[1]

    gen = torch.Generator().manual_seed(0)
    batch = {k: torch.rand(4, 3, 16, 16, generator=gen) for k in ("one", "mid", "two")}
    batch["t"] = torch.full((4,), 0.5)
    scores = psnr(Blend().synthesize((batch["one"], batch["two"]), batch["t"]), batch["mid"])
    picks = torch.tensor([True, False, True, False])
    means, _ = validation_psnr(Blend(), {"a": [batch], "b": [batch]}, {}, {"a": [picks]})
    assert abs(means["near-linear"] - float(scores[picks].mean())) < 1e-5
    assert abs(means["a"] - float(scores.mean())) < 1e-5
    means, _ = validation_psnr(Blend(), {"a": [batch]}, {}, {"a": [torch.zeros(4, dtype=torch.bool)]})
    assert means["near-linear"] != means["near-linear"]  # NaN: no such triplet
    assert "near-linear" not in validation_psnr(Blend(), {"a": [batch]}, {})[0]

