"""Probe (issue 68, finding F34; removed after its commit): is the flow or the synthesis what fails on moving
patterns?

    python -m bench.probe_moving_patterns [--weights weights/network.safetensors]

For each moving scene of the repeated-pattern set (bench.patterns: the pattern moves (2.5, 1.25) px over the pair,
a textured occluder (36, 10) px), the default network's middle frame on the CPU (fp32) with its own flows, and
with the exact flows (the pattern's shift where the pixel shows the pattern in its frame, the occluder's motion
where it shows the occluder) put in its flow state before the metrics and the synthesis. Prints PSNR and far PSNR
of each, and the own flow's end-point error against the exact one far from the occluder (mean, and the share of far
pixels off by more than a quarter of the period).
"""

import argparse
from pathlib import Path

import numpy as np
import torch

from bench.patterns import far_mask, occluder_mask, psnr, render, scenes
from model import load_weights
from model.warp import InputPadder


def exact_flows(scene, size):
    h, w = scene.size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    flows = []
    for t, sign in ((0.0, 1.0), (1.0, -1.0)):
        occ = occluder_mask(scene, xx, yy, t) > 0
        f = np.empty((2, h, w), np.float32)
        for c in range(2):
            f[c] = sign * np.where(occ, scene.occluder[c], scene.shift[c])
        flows.append(torch.from_numpy(f)[None])
    return flows


def middle(net, one, two, flows=None):
    padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
    a, b = padder.pad(one, two)
    state = net.estimate_flow(a, b, 1.0)
    own = (padder.unpad(state.flow_fwd), padder.unpad(state.flow_bwd))
    if flows is not None:
        fwd, bwd = padder.pad(*flows) if any(padder.padding) else flows
        state = net.flow_state(a, b, state.feats_one, state.feats_two, fwd, bwd)
    out = padder.unpad(net.synthesize(state, 0.5)).clamp(0, 1)
    return out[0].permute(1, 2, 0).numpy(), own


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--weights", type=Path, default=Path("weights/network.safetensors"))
    args = p.parse_args()
    torch.set_grad_enabled(False)
    net = load_weights(args.weights, torch.device("cpu"))
    rows = []
    for scene in scenes():
        if scene.shift == (0.0, 0.0):
            continue
        one, truth, two = (render(scene, t) for t in (0.0, 0.5, 1.0))
        a, b = (torch.from_numpy(x).permute(2, 0, 1)[None] for x in (one, two))
        far = far_mask(scene)
        own_out, (own_fwd, _) = middle(net, a, b)
        exact = exact_flows(scene, scene.size)
        exact_out, _ = middle(net, a, b, exact)
        epe = (own_fwd[0] - exact[0][0]).norm(dim=0).numpy()
        rows.append((scene.name, scene.period, psnr(own_out, truth), psnr(own_out, truth, far),
                     psnr(exact_out, truth), psnr(exact_out, truth, far), float(epe[far].mean()),
                     float((epe[far] > scene.period / 4).mean())))
        print(" | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in rows[-1]), flush=True)
    r = np.array([row[1:] for row in rows], np.float64)
    print(f"\n{len(rows)} moving scenes")
    print("| flows | PSNR dB | far PSNR dB |\n|---|---|---|")
    print(f"| own | {r[:, 1].mean():.2f} | {r[:, 2].mean():.2f} |")
    print(f"| exact | {r[:, 3].mean():.2f} | {r[:, 4].mean():.2f} |")
    print(f"own flow, far pixels: mean end-point error {r[:, 5].mean():.2f} px, "
          f"off by more than a quarter period {100 * r[:, 6].mean():.1f}%")
    for period in sorted(set(r[:, 0])):
        sel = r[:, 0] == period
        print(f"period {period:g}: far PSNR own {r[sel, 2].mean():.2f}, exact {r[sel, 4].mean():.2f}, "
              f"EPE {r[sel, 5].mean():.2f}, off {100 * r[sel, 6].mean():.0f}%")


if __name__ == "__main__":
    main()
