"""Session 29 probe: are the network's and the classical baseline's errors complementary? On the held-out triplets
(whole frames, t = 0.5, CPU fp32): PSNR of the network's frame, the baseline's frame and their mean, by motion
quartile (the 95th percentile of the DIS flow's length, as probe_s29_margin_by_motion.py).

    PYTHONPATH=. python docs/journal/raw/probe_s29_blend.py --data FOOTAGE FOOTAGE2 --weights W --json OUT.json
"""

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from model.weights import load_weights
from training.config import VALIDATION_CROP
from training.data import load_clips
from training.holdout import classical_interpolation, holdout_triplets, is_holdout, triplet_flows
from training.losses import psnr


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, nargs="+", required=True)
    p.add_argument("--weights", type=Path, required=True)
    p.add_argument("--json", type=Path, required=True)
    args = p.parse_args()
    clips = load_clips(args.data, None, torch.device("cpu"), VALIDATION_CROP,
                       keep=lambda root, entry: is_holdout(entry))
    triplets = holdout_triplets(clips)
    flows = triplet_flows(triplets)
    net = load_weights(args.weights, torch.device("cpu")).eval()
    rows = []
    with torch.no_grad():
        for tr, (fwd, bwd) in zip(triplets, flows):
            one, two, mid = (x.float().div(255).unsqueeze(0) for x in (tr.one, tr.two, tr.mid))
            base = classical_interpolation(one, two, 0.5, fwd, bwd).clamp(0, 1)
            out = net(one, two, (0.5,))[0].float().clamp(0, 1)
            motion = float(torch.quantile(fwd[0].norm(dim=0).flatten(), 0.95))
            rows.append([motion, *(float(psnr(x, mid)) for x in (out, base, (out + base) / 2))])
    r = np.array(rows)
    edges = np.quantile(r[:, 0], [0.25, 0.5, 0.75])
    q = np.digitize(r[:, 0], edges)
    table = {}
    for name, sub in [*((f"quartile {k}", q == k) for k in range(4)), ("all", np.ones(len(r), bool))]:
        net_m, base_m, mean_m = (float(r[sub, c].mean()) for c in (1, 2, 3))
        table[name] = {"network": net_m, "baseline": base_m, "mean": mean_m}
        print(f"{name}: network {net_m:.3f}, baseline {base_m:.3f}, mean of the two {mean_m:.3f} "
              f"(mean - network {mean_m - net_m:+.3f})", flush=True)
    args.json.write_text(json.dumps({"edges_px": edges.tolist(), "table": table, "rows": r.tolist()}) + "\n")


if __name__ == "__main__":
    main()
