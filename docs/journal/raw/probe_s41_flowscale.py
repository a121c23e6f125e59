"""Probe (session 41): flow scale per held-out triplet, at constant velocity and along quadratic paths.

Per triplet: the two-frame baseline, the network's own forward-flow p95 at scale 1, the input frames' sharpness
(mean absolute Laplacian of each grey image, 0-255, averaged) and the middle frame's, and the network's PSNR with flow
at scales 0.5, 1 and 2, linear (``lin_S``) and, where the triplet kept its outer neighbours, quadratic (``quad_S``,
as ``Network.forward_four``: the outer flows at the pair's scale). fp32; on CUDA with TF32 off.

    python docs/journal/raw/probe_s41_flowscale.py --data FOOTAGE FOOTAGE2 --set standard|fresh --json OUT
        [--device cuda] [--weights weights/network.safetensors] [--limit N]
"""
import argparse
import json
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from model.warp import InputPadder
from model.weights import load_weights
from training.holdout import PER_CLIP, baseline_scores, holdout_triplets, load_holdout, triplet_flows
from training.losses import psnr

SCALES = (0.5, 1.0, 2.0)


def sharpness(frame: torch.Tensor) -> float:
    grey = cv2.cvtColor(frame.permute(1, 2, 0).numpy(), cv2.COLOR_RGB2GRAY).astype(np.float32)
    return float(np.abs(cv2.Laplacian(grey, cv2.CV_32F)).mean())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, nargs="+", required=True)
    p.add_argument("--set", choices=("standard", "fresh"), required=True)
    p.add_argument("--json", type=Path, required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--weights", type=Path, default=Path("weights/network.safetensors"))
    p.add_argument("--limit", type=int, default=None)
    args = p.parse_args()
    torch.set_grad_enabled(False)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    clips, triplets = load_holdout(args.data, neighbours=True)
    if args.set == "fresh":
        seen = {(t.clip, t.gap, t.centre) for t in triplets}
        triplets = [t for t in holdout_triplets(clips, per_clip=2 * PER_CLIP - 1, neighbours=True)
                    if (t.clip, t.gap, t.centre) not in seen]
    triplets = triplets[:args.limit] if args.limit else triplets
    start = time.time()
    flows = triplet_flows(triplets)
    base = baseline_scores(triplets, flows=flows)
    print(f"{len(triplets)} triplets ({args.set}); baseline in {time.time() - start:.0f} s", flush=True)
    device = torch.device(args.device)
    net = load_weights(args.weights, device).eval()
    rows = []
    for k, (tr, (fwd, _)) in enumerate(zip(triplets, flows)):
        one, two, mid = (x.to(device).float().div(255).unsqueeze(0) for x in (tr.one, tr.two, tr.mid))
        padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
        a, b = padder.pad(one, two)
        outer = None
        if tr.has_neighbours:
            outer = padder.pad(*(x.to(device).float().div(255).unsqueeze(0) for x in (tr.before, tr.after)))
        row = {"clip": tr.clip, "group": tr.group, "gap": tr.gap, "centre": tr.centre, "size": list(one.shape[2:]),
               "baseline": float(base[k]), "dis_p95": float(fwd.norm(dim=1).flatten().quantile(0.95)),
               "sharp_in": (sharpness(tr.one) + sharpness(tr.two)) / 2, "sharp_mid": sharpness(tr.mid),
               "neighbours": tr.has_neighbours}
        for s in SCALES:
            state = net.estimate_flow(a, b, s)
            if s == 1.0:
                row["own_p95"] = float(state.flow_fwd.norm(dim=1).flatten().quantile(0.95))
            out = padder.unpad(net.synthesize(state, 0.5))
            row[f"lin_{s}"] = float(psnr(out.clamp(0, 1), mid))
            if outer is not None:
                nf = net.outer_flows(a, b, *outer, s)
                out = padder.unpad(net.synthesize(state, 0.5, nf))
                row[f"quad_{s}"] = float(psnr(out.clamp(0, 1), mid))
        rows.append(row)
        if k % 40 == 0:
            print(k, f"{time.time() - start:.0f}s", json.dumps(row), flush=True)
    args.json.write_text(json.dumps(rows) + "\n")
    print("done", len(rows), f"{time.time() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
