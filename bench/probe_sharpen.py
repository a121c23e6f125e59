"""Does an unsharp mask on our middle frames raise held-out PSNR? (Rule AE, written before its runs.)

Our frames keep 0.73 of the truth's detail where RIFE keeps 0.90-1.08. This probe asks whether part of that
softness is below the PSNR optimum, so that a fixed sharpening after the network would both score higher and look
sharper: out + amount * (out - gaussian(out, sigma)), clamped to [0, 1].

Rule AE: the shipped default network through the engine at run.py's defaults on this machine (the CPU: float32,
flow scale from the weights, whole frames), the pairs path (each triplet's two frames alone), t = 0.5.
- Choose on ``--set standard``: the candidate (sigma, amount) of the grid below with the highest mean PSNR.
- Adopt it only if (1) its mean gain there is at least +0.03 dB, (2) on ``--set fresh``, scored once for that
  candidate alone, the gain is at least +0.01 dB, and (3) its detail kept rises on both sets and stays at most 1.0.
- Otherwise reject, and the finding keeps the numbers.

    python -m bench.probe_sharpen --data FOOTAGE FOOTAGE2 --set standard --json OUT.json
    python -m bench.probe_sharpen --data FOOTAGE FOOTAGE2 --set fresh --only SIGMA AMOUNT --json OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

from evaluation.holdout import middle_frame
from evaluation.methods import ours
from evaluation.metrics import detail_kept, nchw, psnr
from softsplat_vfi.engine import InterpolatorOptions
from training.holdout import TRIPLET_SETS, load_holdout

SIGMAS = (0.5, 0.8, 1.2, 2.0)
AMOUNTS = (0.1, 0.2, 0.3, 0.5, 0.8)


def gaussian(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """``x`` (N x C x H x W) blurred by a separable Gaussian of ``sigma`` pixels (radius 3 sigma, edges reflected)."""
    radius = max(1, int(3 * sigma + 0.5))
    taps = torch.exp(-torch.arange(-radius, radius + 1, dtype=x.dtype) ** 2 / (2 * sigma * sigma))
    taps = taps / taps.sum()
    c = x.shape[1]
    x = F.pad(x, (radius, radius, radius, radius), mode="reflect")
    x = F.conv2d(x, taps.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
    return F.conv2d(x, taps.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)


def sharpened(out: torch.Tensor, sigma: float, amount: float) -> torch.Tensor:
    return (out + amount * (out - gaussian(out, sigma))).clamp(0, 1)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, nargs="+", required=True, help="footage folders (footage, footage2)")
    p.add_argument("--weights", default="softsplat_vfi/weights/network.safetensors")
    p.add_argument("--set", choices=TRIPLET_SETS, default="standard")
    p.add_argument("--only", type=float, nargs=2, default=None, metavar=("SIGMA", "AMOUNT"),
                   help="score this one candidate (the confirmation)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    grid: Sequence[Tuple[float, float]] = ([tuple(args.only)] if args.only else
                                           [(s, a) for s in SIGMAS for a in AMOUNTS])
    _, triplets = load_holdout(args.data, triplet_set=args.set)
    method = ours(InterpolatorOptions(weights=args.weights, device="cpu", tile=0))
    print(f"{len(triplets)} {args.set} triplets; {method.settings}", flush=True)
    rows: Dict[str, List[List[float]]] = {"plain": []}
    start = time.perf_counter()
    with torch.no_grad():
        for k, triplet in enumerate(triplets):
            out = nchw(middle_frame(method, triplet)).clamp(0, 1)
            mid = triplet.mid.float().div(255).unsqueeze(0)
            rows["plain"].append([float(psnr(out, mid)), detail_kept(out, mid)])
            for sigma, amount in grid:
                sharp = sharpened(out, sigma, amount)
                rows.setdefault(f"{sigma} {amount}", []).append([float(psnr(sharp, mid)), detail_kept(sharp, mid)])
            if k % 20 == 0:
                print(f"  {k + 1}/{len(triplets)} triplets, {time.perf_counter() - start:.0f} s", flush=True)
    plain = torch.tensor(rows["plain"])
    summary = {}
    for name, values in rows.items():
        v = torch.tensor(values)
        summary[name] = {"psnr": round(float(v[:, 0].mean()), 4),
                         "gain": round(float((v[:, 0] - plain[:, 0]).mean()), 4),
                         "detail": round(float(v[:, 1].mean()), 4),
                         "worse_triplets": int((v[:, 0] < plain[:, 0]).sum())}
    for name, figures in sorted(summary.items(), key=lambda kv: -kv[1]["psnr"]):
        print(f"{name:>10}: {figures}")
    if args.json:
        args.json.write_text(json.dumps({"set": args.set, "triplets": len(triplets), "summary": summary,
                                         "rows": rows}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
