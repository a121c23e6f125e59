"""Session 29 probe: the held-out margin by motion size. Each held-out triplet's motion is the 95th percentile of
the DIS flow's length between its outer frames (the baseline's own flow, one -> two, in pixels); the per-triplet
scores come from earlier CPU runs of training.holdout (their --json files), matched by clip, centre and gap.

    PYTHONPATH=. python docs/journal/raw/probe_s29_margin_by_motion.py --data FOOTAGE FOOTAGE2 \
        --scores raw/holdout_s25_l0b_cpu.json raw/holdout_s28_af_ax_cpu.json --json OUT.json
"""

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from training.config import VALIDATION_CROP
from training.data import load_clips
from training.holdout import holdout_triplets, is_holdout, triplet_flows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, nargs="+", required=True)
    p.add_argument("--scores", type=Path, nargs="+", required=True)
    p.add_argument("--json", type=Path, required=True)
    args = p.parse_args()
    clips = load_clips(args.data, None, torch.device("cpu"), VALIDATION_CROP,
                       keep=lambda root, entry: is_holdout(entry))
    triplets = holdout_triplets(clips)
    motion = np.array([float(torch.quantile(fwd[0].norm(dim=0).flatten(), 0.95))
                       for fwd, _ in triplet_flows(triplets)])
    keys = [(t.clip, t.centre, t.gap) for t in triplets]
    edges = np.quantile(motion, [0.25, 0.5, 0.75])
    bins = np.digitize(motion, edges)
    report = {"motion_p95_px": motion.tolist(), "quartile_edges_px": edges.tolist(), "weights": {}}
    for path in args.scores:
        d = json.loads(path.read_text())
        order = {(t["clip"], t["centre"], t["gap"]): i for i, t in enumerate(d["triplets"])}
        index = [order[k] for k in keys]
        base = np.array(d["baseline"])[index]
        for name, w in d["weights"].items():
            margin = np.array(w["scores"])[index] - base
            rows = [float(margin[bins == b].mean()) for b in range(4)]
            report["weights"][name] = rows
            print(f"{name}: margin by motion quartile " + ", ".join(f"{m:+.3f}" for m in rows)
                  + f" (all {margin.mean():+.3f})")
    lows = [0.0, *edges]
    highs = [*edges, float(motion.max())]
    print("quartiles (95th-percentile flow, px): " + ", ".join(f"{a:.1f}-{b:.1f}" for a, b in zip(lows, highs)))
    args.json.write_text(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
