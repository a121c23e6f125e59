"""Session 29 probe: the margin over the classical baseline on clips of the *training* sources, built exactly as
training.holdout builds the held-out triplets (8 centres per clip, gaps 1 and 2, whole frames, t = 0.5), to
compare with the held-out margin (docs/journal/scaling-study.md, "Session 29: fit or diversity").

    PYTHONPATH=. python docs/journal/raw/probe_s29_train_sources.py --data FOOTAGE FOOTAGE2 --clips 23 \
        --weights weights/network.safetensors --json OUT.json
"""

import argparse
import json
from pathlib import Path

import torch

from model.weights import load_weights
from training.config import VALIDATION_CROP
from training.data import footage_entries, load_clips
from training.holdout import baseline_scores, describe, holdout_triplets, is_holdout, network_scores, summary


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, nargs="+", required=True)
    p.add_argument("--clips", type=int, default=23)
    p.add_argument("--weights", type=Path, nargs="+", required=True)
    p.add_argument("--json", type=Path, required=True)
    args = p.parse_args()
    entries = sorted((r.name, e["file"]) for r, e in footage_entries(args.data)
                     if not is_holdout(e) and min(e["width"], e["height"]) >= VALIDATION_CROP and e["frames"] >= 5)
    step = len(entries) / args.clips
    chosen = [entries[int(i * step)] for i in range(args.clips)]
    clips = load_clips(args.data, [f for _, f in chosen], torch.device("cpu"), VALIDATION_CROP)
    triplets = holdout_triplets(clips)
    base = baseline_scores(triplets)
    print(f"{len(clips)} training-source clips of {len(entries)}, {len(triplets)} triplets; "
          f"baseline {float(base.mean()):.3f} dB", flush=True)
    report = {"clips": [c.name for c in clips], "baseline": base.tolist(), "weights": {}}
    for path in args.weights:
        net = load_weights(path, torch.device("cpu")).eval()
        scores = network_scores(net, triplets, torch.device("cpu"))
        figures = summary(scores, base, triplets)
        report["weights"][str(path)] = {"figures": figures, "scores": scores.tolist()}
        print(f"{path}: {describe(figures)}", flush=True)
    report["triplets"] = [{"group": t.group, "clip": t.clip, "centre": t.centre, "gap": t.gap} for t in triplets]
    args.json.write_text(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
