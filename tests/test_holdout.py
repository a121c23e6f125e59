"""Source-disjoint validation, the classical baseline, staging footage in bundles, and training from the frame cache."""

import json
import subprocess
from pathlib import Path

import pytest
import torch

import train
from softsplat_vfi.media.video import ffmpeg_exe
from softsplat_vfi.model.network import Network, NetworkConfig, count_parameters
from training.data import Clip, clean_span, load_clips
from training.holdout import (TRIPLET_SETS, baseline_scores, classical_interpolation, holdout_triplets, is_holdout,
                              summary)
from training.listing import clip_entries
from training.stage import check, pack, select_clips, unpack
from training.stage import main as stage_main

FAST = Path(__file__).resolve().parent.parent / "softsplat_vfi" / "weights" / "fast.safetensors"


def _clip(folder, name, source, frames=12, size="96x80"):
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi", "-i", f"{source}=size={size}:rate=10",
                    "-frames:v", str(frames), "-c:v", "libx264", "-pix_fmt", "yuv444p", str(folder / name)], check=True)


def _held_out_folder(tmp_path, monkeypatch, frames=8):
    """A 'footage' folder of one 64 x 64 clip from a held-out source repository (whole-frame held-out scoring),
    with the held-out clips' least size (VALIDATION_CROP, 256) lowered to 64 for the test: a sixteenth of the
    pixels of the 256 x 256 clip it took, the same code."""
    import training.holdout

    monkeypatch.setattr(training.holdout, "VALIDATION_CROP", 64)
    folder = tmp_path / "footage"
    _clip(folder, "held.mp4", "testsrc2", frames=frames, size="64x64")
    row = {"file": "held.mp4", "frames": frames, "width": 64, "height": 64, "frame_step": 1, "orig_size": "64x64",
           "flow_mean_px_per_orig_frame": 2.0, "cuts_before_frame": [], "source": "STVIR/pysot @ 1"}
    (folder / "clips.jsonl").write_text(json.dumps(row) + "\n")
    return folder


@pytest.fixture(scope="module")
def two_folders(tmp_path_factory):
    """A 'footage' folder (old layout: motion per source frame) and a 'footage2' folder (shards, a val split)."""
    root = tmp_path_factory.mktemp("data")
    old, new = root / "footage", root / "footage2"
    old.mkdir()
    new.mkdir()
    rows = []
    for name, src, repo in (("a.mp4", "testsrc2", "x/train-a"), ("held.mp4", "life", "STVIR/pysot")):
        _clip(old, name, src)
        rows.append({"file": name, "frames": 12, "width": 96, "height": 80, "frame_step": 1, "orig_size": "96x80",
                     "flow_mean_px_per_orig_frame": 2.0, "cuts_before_frame": [], "source": f"{repo} @ 123"})
    (old / "clips.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rows = []
    for name, src, split in (("shard-00/b.mp4", "mandelbrot", "train"), ("shard-01/v.mp4", "testsrc2", "val")):
        _clip(new, name, src)
        rows.append({"file": name, "shard": name.split("/")[0], "split": split, "frames": 12, "width": 96,
                     "height": 80, "frame_step": 1, "flow_mean_px": 3.0, "cuts_before_frame": [5],
                     "source": f"y/{split} @ 456"})
    (new / "clips.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return old, new


def test_holdout_is_by_source():
    assert is_holdout({"split": "val", "source": "a/b @ 1"})
    assert is_holdout({"source": "STVIR/pysot @ 2"})
    assert not is_holdout({"split": "train", "source": "a/b @ 1"})


def test_classical_interpolation_zero_flow_blends_and_shift_is_exact():
    one, two = torch.rand(1, 3, 20, 24), torch.rand(1, 3, 20, 24)
    zero = torch.zeros(1, 2, 20, 24)
    assert torch.allclose(classical_interpolation(one, two, 0.5, zero, zero), (one + two) / 2, atol=1e-6)
    # a pattern moving 4 px right between the frames: the baseline puts it 2 px right at t = 0.5
    base = torch.rand(1, 3, 20, 40)
    one, mid, two = base[..., 8:32], base[..., 6:30], base[..., 4:28]
    fwd = torch.zeros(1, 2, 20, 24)
    fwd[:, 0] = 4.0  # one[x] = base[x + 8] = two[x + 4]: content moves 4 px right
    out = classical_interpolation(one, two, 0.5, fwd, -fwd)
    assert torch.allclose(out[..., 4:20], mid[..., 4:20], atol=1e-5)


def test_triplets_skip_cuts_and_summary_splits_gaps(two_folders):
    clips = load_clips(list(two_folders), None, torch.device("cpu"), 64, keep=lambda r, e: is_holdout(e))
    assert sorted(c.name for c in clips) == ["held.mp4", "shard-01/v.mp4"]
    triplets = holdout_triplets(clips, per_clip=4)
    assert {t.gap for t in triplets} == {1, 2}
    for t in triplets:
        if t.clip == "shard-01/v.mp4":  # the cut before frame 5: no triplet spans it
            assert not (t.centre - t.gap < 5 <= t.centre + t.gap)
    base = baseline_scores(triplets, workers=2)
    assert base.shape == (len(triplets),) and torch.isfinite(base).all()
    figures = summary(base + 1.0, base, triplets)
    assert figures["margin"] == pytest.approx(1.0) and figures["margin_t2"] == pytest.approx(1.0)
    assert set(figures) >= {"margin_t1", "margin_footage", "margin_footage2", "baseline_psnr"}


def test_confirmation_triplets_lie_between_the_standard_ones(two_folders):
    """The fresh centres lie between consecutive standard ones, the quarter centres between consecutive centres of
    those two sets together; no centre is in two sets, and none spans a cut."""
    clips = load_clips(list(two_folders), None, torch.device("cpu"), 64, keep=lambda r, e: is_holdout(e))
    sets = {name: holdout_triplets(clips, per_clip=3, triplet_set=name) for name in TRIPLET_SETS}
    keys = {name: {(t.clip, t.gap, t.centre) for t in triplets} for name, triplets in sets.items()}
    assert all(keys.values())
    assert not keys["fresh"] & keys["standard"] and not keys["quarter"] & (keys["standard"] | keys["fresh"])
    for clip in {t.clip for t in sets["standard"]}:
        for gap in (1, 2):
            def centres(*names: str, clip=clip, gap=gap) -> list:
                return sorted(t.centre for n in names for t in sets[n] if (t.clip, t.gap) == (clip, gap))

            for inner, outer in ((centres("fresh"), centres("standard")),
                                 (centres("quarter"), centres("standard", "fresh"))):
                assert len(inner) <= len(outer) - 1
                assert all(any(a < c < b for a, b in zip(outer, outer[1:])) for c in inner)
    assert all(not (t.centre - t.gap < 5 <= t.centre + t.gap) for name in ("fresh", "quarter") for t in sets[name]
               if t.clip == "shard-01/v.mp4")
    with pytest.raises(ValueError, match="triplet_set must be one of"):
        holdout_triplets(clips, triplet_set="half")


def test_stage_bundles_round_trip(two_folders, tmp_path):
    bundles = pack(list(two_folders), tmp_path / "bundles", max_mib=0.05)
    assert len(bundles) >= 2
    dest, cache = tmp_path / "dest", tmp_path / "cache"
    assert check(dest.parent / "bundles" / "0", cache)  # a bundle alone is not the whole footage
    for bundle in bundles[:-1]:
        unpack(bundle, dest, cache, workers=2)
    report = check(dest, cache)
    assert set(report) == {folder.name for folder in two_folders}  # whichever folders the staged bundles held
    assert any(report.values())  # the last bundle is still missing
    unpack(bundles[-1], dest, cache, workers=2)
    assert not any(check(dest, cache).values())
    clips = load_clips([dest / "footage", dest / "footage2"], None, torch.device("cpu"), 64, cache=cache)
    decoded = load_clips(list(two_folders), None, torch.device("cpu"), 64)
    for a, b in zip(clips, decoded):
        assert a.name == b.name and torch.equal(a.frames, b.frames) and torch.equal(a.repeated, b.repeated)


def test_stage_packs_a_selection_with_its_own_clip_lists(two_folders, tmp_path):
    """--held-out-only packs the held-out clips alone; --min-short-side drops the training clips under it (every
    clip here is 96 x 80) and keeps the held-out ones; each bundle's clips.jsonl lists only the selected clips, so
    the staged selection checks as complete."""
    for i, (keep, files) in enumerate(((select_clips(held_out_only=True), {"held.mp4", "shard-01/v.mp4"}),
                        (select_clips(min_short_side=81), {"held.mp4", "shard-01/v.mp4"}),
                        (select_clips(min_short_side=80), {"a.mp4", "held.mp4", "shard-00/b.mp4", "shard-01/v.mp4"}))):
        out = tmp_path / str(i)
        bundles = pack(list(two_folders), out, max_mib=10, keep=keep)
        folders = [folder for bundle in bundles for folder in bundle.iterdir()]
        assert {str(f.relative_to(folder)) for folder in folders for f in folder.rglob("*.mp4")} == files
        assert {e["file"] for folder in folders for e in clip_entries(folder)} == files
        dest, cache = out / "dest", out / "cache"
        for bundle in bundles:
            unpack(bundle, dest, cache, workers=2)
        assert not any(check(dest, cache).values())
    cli = tmp_path / "cli"
    assert stage_main(["pack", "--data", *map(str, two_folders), "--out", str(cli), "--held-out-only"]) == 0
    assert sorted(p.name for p in cli.rglob("*.mp4")) == ["held.mp4", "v.mp4"]


def test_train_two_folders_from_cache(two_folders, tmp_path):
    out = tmp_path / "run"
    code = train.main(["--data", *map(str, two_folders), "--out", str(out), "--recipe", "study", "--batch", "4",
                       "--crop", "64",
                       "--device", "cpu", "--val-every", "2", "--val-batches", "1", "--max-steps", "2", "--frame-cache",
                       str(tmp_path / "cache"), "--train-folders", "footage", "--width", "0.5"])
    assert code == 0
    entries = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    last = [e for e in entries if "margin" in e][-1]
    assert last["score"] == last["margin"] and {"margin_t1", "margin_t2", "margin_footage2"} <= set(last)
    config = json.loads((out / "config.json").read_text())
    assert config["encoder_widths"][0] == 12  # the half-width network the run built
    assert (tmp_path / "cache" / "footage" / "a.npy").is_file()
    assert not (tmp_path / "cache" / "footage2" / "shard-00" / "b.npy").exists()  # --train-folders footage


def test_train_refuses_partly_staged_footage(two_folders, tmp_path, capsys):
    old, new = two_folders
    partial = tmp_path / "footage2"
    partial.mkdir()
    (partial / "clips.jsonl").write_text((new / "clips.jsonl").read_text())
    assert train.main(["--data", str(old), str(partial), "--out", str(tmp_path / "o")]) == 2
    assert "missing" in capsys.readouterr().err


def test_widened_network_scales_parameters():
    base = count_parameters(Network(NetworkConfig()))
    assert 3.5 < count_parameters(Network(NetworkConfig().widened(2))) / base < 4.2
    with pytest.raises(ValueError):
        NetworkConfig().widened(0)


def test_holdout_cli_passes_the_flow_scale_to_the_network(tmp_path, capsys, monkeypatch):
    """training.holdout --flow-scale: the scores change with it, the report records it, and 0 is refused (on a
    3-frame clip: its one triplet is enough here, and each scoring run costs a network pass per triplet)."""
    from training.holdout import main as holdout_main

    folder = _held_out_folder(tmp_path, monkeypatch, frames=3)
    weights = FAST
    reports = {}
    for scale in (1.0, 0.5):
        out = tmp_path / f"scale{scale}.json"
        assert holdout_main(["--data", str(folder), "--weights", str(weights), "--flow-scale", str(scale),
                             "--json", str(out)]) == 0
        reports[scale] = json.loads(out.read_text())
        assert reports[scale]["flow_scale"] == scale
    full, half = (reports[s]["weights"][str(weights)]["scores"] for s in (1.0, 0.5))
    assert len(full) == len(half) > 0
    assert full != half
    assert reports[1.0]["baseline"] == reports[0.5]["baseline"]
    assert reports[1.0]["compile"] is False
    # --compile (run.py's flag) needs CUDA: said in one line before any footage is read
    assert holdout_main(["--data", str(tmp_path / "missing"), "--weights", str(weights), "--compile"]) == 2
    assert "error: --compile: torch.compile needs the network on a CUDA device" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        holdout_main(["--data", str(folder), "--weights", str(weights), "--flow-scale", "0"])
    assert "'0': use auto or a factor in (0, 1]" in capsys.readouterr().err  # the option's one rule


def test_holdout_cli_moves_pixels_along_quadratic_paths_where_the_shot_allows(tmp_path, capsys, monkeypatch):
    """training.holdout --motion quadratic: triplets whose frames centre +- 3 gaps exist take Network.forward_four,
    the others score as with --motion linear; the report says which."""
    from training.holdout import main as holdout_main

    folder = _held_out_folder(tmp_path, monkeypatch)
    reports = {}
    for motion in ("linear", "quadratic"):
        out = tmp_path / f"{motion}.json"
        assert holdout_main(["--data", str(folder), "--weights", str(FAST), "--motion", motion,
                             "--json", str(out)]) == 0
        reports[motion] = json.loads(out.read_text())
        assert reports[motion]["motion"] == motion
    linear, quadratic = (reports[m]["weights"][str(FAST)]["scores"] for m in ("linear", "quadratic"))
    moved = [t["quadratic"] for t in reports["quadratic"]["triplets"]]
    assert not any(t["quadratic"] for t in reports["linear"]["triplets"])
    assert 0 < sum(moved) < len(moved)  # the 8-frame clip has neighbours for some gap-1 triplets, none at gap 2
    assert all(t["gap"] == 1 for t, m in zip(reports["quadratic"]["triplets"], moved) if m)
    # gap 1, centres 1-6 of 8 frames: both neighbours at 3 and 4, one side at 1, 2 (after) and 5, 6 (before)
    sides = {t["centre"]: t["sides"] for t in reports["quadratic"]["triplets"] if t["gap"] == 1}
    assert sides == {1: "after", 2: "after", 3: "both", 4: "both", 5: "before", 6: "before"}
    assert [a for a, m in zip(linear, moved) if not m] == [b for b, m in zip(quadratic, moved) if not m]
    assert [a for a, m in zip(linear, moved) if m] != [b for b, m in zip(quadratic, moved) if m]
    printed = capsys.readouterr().out
    assert "(6 with outer neighbours, 2 of them on both sides: quadratic paths)" in printed
    assert "over the four-frame baseline" in printed
    two_frame, four_frame = reports["quadratic"]["baseline"], reports["quadratic"]["baseline_four_frames"]
    assert two_frame == reports["linear"]["baseline"] and "baseline_four_frames" not in reports["linear"]
    assert [a for a, m in zip(two_frame, moved) if not m] == [b for b, m in zip(four_frame, moved) if not m]
    assert [a for a, m in zip(two_frame, moved) if m] != [b for b, m in zip(four_frame, moved) if m]
    # --ensemble along quadratic paths: the ensemble's four-frame passes where the triplet moved, its two-frame
    # passes elsewhere
    for motion in ("linear", "quadratic"):
        out = tmp_path / f"{motion}_ensemble.json"
        assert holdout_main(["--data", str(folder), "--weights", str(FAST), "--motion", motion, "--ensemble", "2",
                             "--json", str(out)]) == 0
        reports[motion] = json.loads(out.read_text())["weights"][str(FAST)]["scores"]
    assert [a for a, m in zip(reports["linear"], moved) if not m] == [b for b, m in zip(reports["quadratic"], moved)
                                                                       if not m]
    assert [a for a, m in zip(quadratic, moved) if m] != [b for b, m in zip(reports["quadratic"], moved) if m]


def test_four_frame_baseline_equals_the_two_frame_one_under_constant_velocity():
    g = torch.Generator().manual_seed(0)
    one, two = torch.rand(2, 1, 3, 12, 16, generator=g)
    fwd = torch.randn(1, 2, 12, 16, generator=g)
    bwd = -fwd + 0.3 * torch.randn(1, 2, 12, 16, generator=g)
    for t in (0.3, 0.5):
        torch.testing.assert_close(classical_interpolation(one, two, t, fwd, bwd, (-fwd, -bwd)),
                                   classical_interpolation(one, two, t, fwd, bwd))

def test_clean_span_needs_the_frames_one_shot_and_no_repeats():
    repeated = torch.zeros(9, dtype=torch.bool)
    repeated[6] = True  # frame 7 repeats frame 6
    clip = Clip("c", torch.zeros(10, 3, 4, 4, dtype=torch.uint8), 1.0, (4,), repeated)  # a cut before frame 4
    assert clean_span(clip, 0, 3) and clean_span(clip, 4, 6)
    assert not clean_span(clip, -1, 2) and not clean_span(clip, 5, 10)  # frames outside the clip
    assert not clean_span(clip, 2, 5)  # across the cut
    assert not clean_span(clip, 5, 8)  # over the repeated frame
    assert clean_span(clip, 7, 9)


def test_clip_list_reads_one_entry_per_line(tmp_path):
    """training.listing: a folder is footage when it holds clips.jsonl; blank lines are skipped."""
    from training.listing import is_footage_folder, listing_path

    assert not is_footage_folder(tmp_path)
    listing_path(tmp_path).write_text('{"file": "a.mp4"}\n\n{"file": "b.mp4"}\n')
    assert is_footage_folder(tmp_path)
    assert [e["file"] for e in clip_entries(tmp_path)] == ["a.mp4", "b.mp4"]
