"""Probe (issue 68, finding F33; removed after its commit): where the default network's frames lose edge energy.

    python -m bench.probe_detail --data FOOTAGE FOOTAGE2 [--every 8]

On every ``--every``-th held-out triplet (two frames, constant velocity, t = 0.5, fp32 on the CPU, the still guard
and ``--flow-scale auto`` as run.py runs image pairs) the middle frame is taken apart as the synthesis decoder makes
it: each frame softmax-splatted to t, the decoder's mask blend of the two, and the output (blend + residual).
Prints the detail kept (mean absolute Laplacian over the truth's) and the PSNR of each, averaged over triplets.
"""

import argparse
from pathlib import Path

import numpy as np
import torch

from model import load_weights
from model.motion import linear_flows
from model.synthesis import splat_pyramid
from model.warp import InputPadder
from training.holdout import load_holdout
from training.losses import detail_kept, psnr


def parts(net, one, two):
    padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
    a, b = padder.pad(one, two)
    state = net.estimate_flow(a, b, "auto")
    to_one, to_two = linear_flows(state.flow_fwd, state.flow_bwd, 0.5)
    w1 = splat_pyramid(state.one, state.feats_one, to_one, state.metric_one)
    w2 = splat_pyramid(state.two, state.feats_two, to_two, state.metric_two)
    dec = net.decoder
    x = None
    for i, level in enumerate(range(dec.levels - 1, -1, -1)):
        p, q = w1[level + 1], w2[level + 1]
        if x is None:
            x = torch.cat([p, q, torch.zeros_like(p[:, :1]) + 0.5], 1)
        else:
            x = torch.cat([p, q, torch.nn.functional.interpolate(x, size=p.shape[2:], mode="bilinear",
                                                                 align_corners=False)], 1)
        x = dec.blocks[i](x)
    img1, img2 = w1[0], w2[0]
    x = torch.nn.functional.interpolate(x, size=img1.shape[2:], mode="bilinear", align_corners=False)
    out = dec.full(torch.cat([img1, img2, x], 1))
    mask = torch.sigmoid(out[:, 3:4])
    blend = mask * img1[:, :3] + (1 - mask) * img2[:, :3]
    final = blend + out[:, :3]
    # a splatted frame where it is covered (coverage channel over 0.5), the other frame's splat elsewhere
    cov1 = (img1[:, 3:4] > 0.5).float()
    filled1 = cov1 * img1[:, :3] + (1 - cov1) * img2[:, :3]
    mean = 0.5 * (img1[:, :3] + img2[:, :3])
    mixed = (mask > 0.5).float() * img1[:, :3] + (mask <= 0.5).float() * img2[:, :3]  # the mask, hard
    return {k: padder.unpad(v) for k, v in {"frame one splatted (gaps from two)": filled1,
                                            "mean of the two splats": mean,
                                            "hard mask (no mixing)": mixed,
                                            "mask blend": blend, "output (blend + residual)": final}.items()}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, nargs="+", required=True)
    p.add_argument("--weights", type=Path, default=Path("weights/network.safetensors"))
    p.add_argument("--every", type=int, default=8)
    args = p.parse_args()
    torch.set_grad_enabled(False)
    net = load_weights(args.weights, torch.device("cpu"))
    _, triplets = load_holdout(args.data)
    picked = triplets[::args.every]
    sums: dict = {}
    for n, tr in enumerate(picked):
        one, mid, two = (x[None].float() / 255.0 for x in (tr.one, tr.mid, tr.two))
        for name, frame in parts(net, one, two).items():
            frame = frame.clamp(0, 1)
            d, q = detail_kept(frame, mid), float(psnr(frame, mid).mean())
            sums.setdefault(name, []).append((d, q, tr.gap))
        print(f"{n + 1}/{len(picked)}", flush=True, end="\r")
    print(f"\n{len(picked)} triplets of {len(triplets)}")
    print("| part | detail kept | PSNR dB | detail, t±1 | detail, t±2 |\n|---|---|---|---|---|")
    for name, rows in sums.items():
        r = np.array(rows)
        print(f"| {name} | {r[:, 0].mean():.3f} | {r[:, 1].mean():.2f} | {r[r[:, 2] == 1, 0].mean():.3f} | "
              f"{r[r[:, 2] == 2, 0].mean():.3f} |")


if __name__ == "__main__":
    main()
