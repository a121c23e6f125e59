"""Is the flow or the synthesis what holds the network level with the classical baseline on held-out footage?

On the held-out triplets of ``training.holdout`` it scores, against the classical baseline (DIS flow, backward
warping): the network as it is, and the network's own synthesis (metric, splatting, decoder) fed OpenCV DIS
flows in place of its flow estimate. Where the second beats the first, better flow is the lever; where it does
not, the synthesis is.

    python -m bench.probe_flow_source --data FOOTAGE FOOTAGE2 --weights W [--device cuda] [--json OUT]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import List, Optional

import torch

from model.warp import InputPadder
from model.weights import load_weights
from training.holdout import baseline_scores, describe, load_holdout, summary, triplet_flows
from training.losses import psnr


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, nargs="+", required=True, help="footage folders (footage, footage2)")
    p.add_argument("--weights", type=Path, required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--limit", type=int, default=0, help="score only every n-th triplet's share (0: all)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    device = torch.device(args.device)
    _, triplets = load_holdout(args.data)
    if args.limit:
        triplets = triplets[::max(1, len(triplets) // args.limit)]
    flows = triplet_flows(triplets)
    base = baseline_scores(triplets, flows=flows)
    net = load_weights(args.weights, device).eval()
    scores = {"network": [], "network_dis_flow": []}
    with torch.no_grad():
        for tr, (fwd, bwd) in zip(triplets, flows):
            one, two, mid = (x.to(device).float().div(255).unsqueeze(0) for x in (tr.one, tr.two, tr.mid))
            padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
            one_p, two_p = padder.pad(one, two)
            state = net.estimate_flow(one_p, two_p)
            out = padder.unpad(net.synthesize(state, 0.5))
            scores["network"].append(psnr(out.clamp(0, 1), mid).cpu())
            fwd_p, bwd_p = padder.pad(fwd.to(device), bwd.to(device))
            dis_state = dataclasses.replace(state, flow_fwd=fwd_p, flow_bwd=bwd_p,
                                            metric_one=net.metric(one_p, two_p, fwd_p),
                                            metric_two=net.metric(two_p, one_p, bwd_p))
            out = padder.unpad(net.synthesize(dis_state, 0.5))
            scores["network_dis_flow"].append(psnr(out.clamp(0, 1), mid).cpu())
    report = {"weights": str(args.weights), "triplets": len(triplets)}
    for name in ("network", "network_dis_flow"):
        figures = summary(torch.cat(scores[name]), base, triplets)
        report[name] = figures
        print(f"{name}: {describe(figures)}")
    if args.json:
        report["scores"] = {"baseline": base.tolist(), **{k: torch.cat(v).tolist() for k, v in scores.items()}}
        report["clips"] = [t.clip for t in triplets]
        args.json.write_text(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
