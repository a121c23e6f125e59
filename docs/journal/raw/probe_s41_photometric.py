"""Probe (session 41, rule C): the photometric error of the network's pair flows at scales 0.5 and 1, per held-out
triplet of probe_s41_flowscale.py's sets (joined to its file by clip, gap and centre): the mean absolute difference
(RGB, 0-1) between each input frame and the other frame backward-warped to it by the pair's flow (edge pixels
repeated), averaged over both directions. fp32; on CUDA with TF32 off.

    python docs/journal/raw/probe_s41_photometric.py --data FOOTAGE FOOTAGE2 --set standard|fresh --json OUT
        [--device cuda] [--weights weights/network.safetensors]
"""
import argparse
import json
import time
from pathlib import Path

import torch

from model.warp import InputPadder, backwarp
from model.weights import load_weights
from training.holdout import load_holdout


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
    _, triplets = load_holdout(args.data, triplet_set=args.set)
    triplets = triplets[:args.limit] if args.limit else triplets
    device = torch.device(args.device)
    net = load_weights(args.weights, device).eval()
    rows, start = [], time.time()
    for tr in triplets:
        one, two = (x.to(device).float().div(255).unsqueeze(0) for x in (tr.one, tr.two))
        padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
        a, b = padder.pad(one, two)
        row = {"clip": tr.clip, "gap": tr.gap, "centre": tr.centre}
        for s in (0.5, 1.0):
            state = net.estimate_flow(a, b, s)
            fwd, bwd = padder.unpad(state.flow_fwd), padder.unpad(state.flow_bwd)
            err = ((one - backwarp(two, fwd, "border")).abs().mean() + (two - backwarp(one, bwd, "border")).abs().mean())
            row[f"err_{s}"] = float(err) / 2
        rows.append(row)
    args.json.write_text(json.dumps(rows) + "\n")
    print("done", len(rows), f"{time.time() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
