"""Session 30 probe: how much margin over the classical baseline can a two-frame method reach on the held-out
triplets? Bounds told the true middle frame's motion (as scripts/diagnose/validation.py --oracle does for the old
validation sets), here on training.holdout's 368 source-disjoint triplets, each as a margin over the baseline:
- "middle-frame flow": DIS flow from the middle frame to each input, backward warping, blended (not a two-frame
  bound: it sees the middle frame's motion, acceleration included);
- "constant velocity": each pixel's path from one input to the other taken from those flows and straightened
  (what perfect correspondences give a method that cannot see acceleration; pessimistic by DIS's own noise);
- "+ acceleration smoothed": the same with the acceleration offset averaged over 15 px (less of that noise).
The network's per-triplet CPU scores come from an earlier training.holdout --json file (matched by clip, centre
and gap).

    PYTHONPATH=. python docs/journal/raw/probe_s30_ceiling.py --data FOOTAGE FOOTAGE2 \
        --scores docs/journal/raw/holdout_s25_l0b_cpu.json --json OUT.json
"""

import argparse
import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from model.warp import backwarp
from training.data import dis_flows
from training.holdout import baseline_scores, grey_frame, load_holdout, triplet_flows
from training.losses import psnr


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, nargs="+", required=True)
    p.add_argument("--scores", type=Path, required=True)
    p.add_argument("--json", type=Path, required=True)
    args = p.parse_args()
    _, triplets = load_holdout(args.data)
    flows = triplet_flows(triplets)
    base = baseline_scores(triplets, flows=flows).numpy()
    motion = np.array([float(torch.quantile(fwd[0].norm(dim=0).flatten(), 0.95)) for fwd, _ in flows])
    pairs = []
    for tr in triplets:
        m = grey_frame(tr.mid)
        pairs += [(m, grey_frame(tr.one)), (m, grey_frame(tr.two))]
    mids = [f.unsqueeze(0) for f in dis_flows(pairs, 8)]
    rows = {"middle-frame flow": [], "constant velocity": [], "+ acceleration smoothed": []}
    for k, tr in enumerate(triplets):
        one, two, mid = (x.float().div(255).unsqueeze(0) for x in (tr.one, tr.two, tr.mid))
        to_one, to_two = mids[2 * k], mids[2 * k + 1]
        t = 0.5
        oracle = (1 - t) * backwarp(one, to_one, "border") + t * backwarp(two, to_two, "border")
        path = to_two - to_one
        straight = (1 - t) * backwarp(one, -t * path, "border") + t * backwarp(two, (1 - t) * path, "border")
        smooth = F.avg_pool2d((1 - t) * to_one + t * to_two, 15, 1, 7, count_include_pad=False)
        smoothed = (1 - t) * backwarp(one, to_one - smooth, "border") + t * backwarp(two, to_two - smooth, "border")
        for name, out in zip(rows, (oracle, straight, smoothed)):
            rows[name].append(float(psnr(out.clamp(0, 1), mid)))
    d = json.loads(args.scores.read_text())
    order = {(t["clip"], t["centre"], t["gap"]): i for i, t in enumerate(d["triplets"])}
    index = [order[(t.clip, t.centre, t.gap)] for t in triplets]
    for name, w in d["weights"].items():
        rows[f"network {name}"] = list(np.array(w["scores"])[index])
    gap = np.array([t.gap for t in triplets])
    edges = np.quantile(motion, [0.25, 0.5, 0.75])
    bins = np.digitize(motion, edges)
    report = {"triplets": len(triplets), "baseline_mean": float(base.mean()), "quartile_edges_px": edges.tolist(),
              "margins": {}, "scores": {k: list(map(float, v)) for k, v in rows.items()},
              "baseline": base.tolist()}
    print(f"baseline {base.mean():.3f} dB on {len(triplets)} triplets; margins all / t±1 / t±2 / motion quartiles")
    for name, scores in rows.items():
        m = np.array(scores) - base
        figures = {"all": m.mean(), "t1": m[gap == 1].mean(), "t2": m[gap >= 2].mean(),
                   "quartiles": [m[bins == b].mean() for b in range(4)]}
        report["margins"][name] = {k: (list(map(float, v)) if isinstance(v, list) else float(v))
                                   for k, v in figures.items()}
        print(f"{name:28s} {figures['all']:+.3f} / {figures['t1']:+.3f} / {figures['t2']:+.3f} / "
              + " ".join(f"{q:+.3f}" for q in figures["quartiles"]))
    args.json.write_text(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
