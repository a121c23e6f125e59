"""Session 37 probe: session 30's two-frame bound again, with the paths taken from the default network's flow
estimator instead of OpenCV DIS (a second, independent estimate of the true paths; DIS's noise made the first bound
pessimistic). For each held-out triplet the network estimates flow from the middle frame to each input
(``Network.estimate_flow(mid, one)`` and ``(mid, two)``, fp32 on the CPU), and the three interpolations of
probe_s30_ceiling.py are scored from those paths. "best of both" takes, per triplet, the better of the DIS and the
network constant-velocity scores (choosing by the ground truth: an estimate of what better paths give, not a
method). Reads session 30's per-triplet DIS results from its raw file (the same 368 triplets in the same order).

    PYTHONPATH=. python docs/journal/raw/probe_s37_ceiling_netflow.py --data FOOTAGE FOOTAGE2 \
        --weights weights/network.safetensors --json OUT.json
"""

import argparse
import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from model.warp import InputPadder, backwarp
from model.weights import load_weights
from training.holdout import load_holdout
from training.losses import psnr

RAW = Path(__file__).resolve().parent


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, nargs="+", required=True)
    p.add_argument("--weights", type=Path, required=True)
    p.add_argument("--json", type=Path, required=True)
    args = p.parse_args()
    _, triplets = load_holdout(args.data)
    dis = json.loads((RAW / "probe_s30_ceiling.json").read_text())
    base = np.array(dis["baseline"])
    if len(base) != len(triplets):
        raise SystemExit("session 30's file lists another set of triplets")
    net = load_weights(args.weights, torch.device("cpu")).eval()
    levels = 2 ** len(net.config.encoder_widths)
    rows = {"net middle-frame flow": [], "net constant velocity": [], "net + acceleration smoothed": []}
    with torch.no_grad():
        for k, tr in enumerate(triplets):
            one, two, mid = (x.float().div(255).unsqueeze(0) for x in (tr.one, tr.two, tr.mid))
            padder = InputPadder(mid.shape, levels)
            mid_p, one_p, two_p = padder.pad(mid, one, two)
            to_one = padder.unpad(net.estimate_flow(mid_p, one_p).flow_fwd)
            to_two = padder.unpad(net.estimate_flow(mid_p, two_p).flow_fwd)
            t = 0.5
            oracle = (1 - t) * backwarp(one, to_one, "border") + t * backwarp(two, to_two, "border")
            path = to_two - to_one
            straight = (1 - t) * backwarp(one, -t * path, "border") + t * backwarp(two, (1 - t) * path, "border")
            smooth = F.avg_pool2d((1 - t) * to_one + t * to_two, 15, 1, 7, count_include_pad=False)
            smoothed = (1 - t) * backwarp(one, to_one - smooth, "border") + t * backwarp(two, to_two - smooth,
                                                                                         "border")
            for name, out in zip(rows, (oracle, straight, smoothed)):
                rows[name].append(float(psnr(out.clamp(0, 1), mid)))
            if k % 46 == 0:
                print(f"{k + 1}/{len(triplets)}", flush=True)
    for name in ("constant velocity", "+ acceleration smoothed"):
        rows[f"best of both: {name}"] = list(np.maximum(np.array(dis["scores"][name]),
                                                        np.array(rows[f"net {name}"])))
    for name in ("middle-frame flow", "constant velocity", "+ acceleration smoothed"):
        rows[f"DIS {name}"] = dis["scores"][name]
    gap = np.array([t.gap for t in triplets])
    # session 30's quartiles by the DIS motion of the outer frames (p95 per triplet, kept in session 36's raw file,
    # which lists the same triplets in the same order)
    per_triplet = json.loads((RAW / "flowscale2_s36_default_cpu.json").read_text())
    if [r["baseline"] for r in per_triplet] != dis["baseline"]:
        raise SystemExit("session 36's file lists another set of triplets")
    bins = np.array([sum(r["dis_p95"] >= e for e in dis["quartile_edges_px"]) for r in per_triplet])
    report = {"weights": str(args.weights), "margins": {}, "scores": rows, "baseline": base.tolist()}
    print(f"margins over the baseline ({base.mean():.3f} dB): all / t±1 / t±2 / DIS motion quartiles")
    for name, scores in rows.items():
        m = np.array(scores) - base
        figures = {"all": m.mean(), "t1": m[gap == 1].mean(), "t2": m[gap >= 2].mean(),
                   "quartiles": [m[bins == b].mean() for b in range(4)]}
        report["margins"][name] = {k: (list(map(float, v)) if isinstance(v, list) else float(v))
                                   for k, v in figures.items()}
        print(f"{name:45s} {figures['all']:+.3f} / {figures['t1']:+.3f} / {figures['t2']:+.3f} / "
              + " ".join(f"{q:+.3f}" for q in figures["quartiles"]))
    args.json.write_text(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
