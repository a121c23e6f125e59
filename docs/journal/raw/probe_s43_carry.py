"""Probe (session 43, rules K and V): the default weights per held-out triplet at t = 0.5, with each side's
neighbour (3 gaps from the centre) kept where its span is clean, made four ways: L constant velocity, P per side as
the video tool ran before session 43 (a missing side's acceleration zero), K a missing side's acceleration carried
from the other side (``model.motion.fill_neighbour_flows``), V (both sides only) each side's acceleration the mean of
its own and the other's carried one. One flow estimate per frame pair, as the video tool makes them.

    PYTHONPATH=. python3 docs/journal/raw/probe_s43_carry.py --data FOOTAGE FOOTAGE2 --set standard|fresh|quarter
        --json OUT [--device cuda] [--bf16] [--flow-scale auto]
"""
import argparse
import json
import time
from pathlib import Path

from typing import Optional, Tuple

import torch

from engine.options import flow_scale_value
from model.motion import Time
from model.warp import InputPadder, backwarp
from model.weights import load_weights
from training.data import clean_span
from training.holdout import load_holdout, psnr


def acceleration(flow_pair: torch.Tensor, flow_side: torch.Tensor, gap: Time = 1.0) -> torch.Tensor:
    """A frame's acceleration per pixel, in pixels per pair interval squared, from its flow to the pair's other
    frame (``flow_pair``) and to its neighbour ``gap`` intervals away on the other side (``flow_side``)."""
    return (flow_pair * gap + flow_side) * (2.0 / (gap * (1.0 + gap)))


def fill_neighbour_flows(flow_fwd: torch.Tensor, flow_bwd: torch.Tensor, flow_before: Optional[torch.Tensor],
                         flow_after: Optional[torch.Tensor], before: Time = 1.0,
                         after: Time = 1.0) -> Tuple[torch.Tensor, torch.Tensor, Time, Time]:
    """``quadratic_flows``' neighbour flows and gaps where one side of the pair has no neighbour (None): that side
    takes the other frame's acceleration carried across the pair (backward-warped by the pair's flow, edge values
    repeated), as the flow to a neighbour one interval away. Both given: returned as they are."""
    if flow_before is None and flow_after is None:
        raise ValueError("no neighbour on either side: move the pair at constant velocity (linear_flows)")
    if flow_after is None:  # frame two's pixel y came from frame one's y + flow_bwd(y)
        carried = backwarp(acceleration(flow_fwd, flow_before, before).float(), flow_bwd.float(), "border")
        flow_after, after = (carried - flow_bwd.float()).to(flow_bwd.dtype), 1.0
    elif flow_before is None:
        carried = backwarp(acceleration(flow_bwd, flow_after, after).float(), flow_fwd.float(), "border")
        flow_before, before = (carried - flow_fwd.float()).to(flow_fwd.dtype), 1.0
    return flow_before, flow_after, before, after


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", type=Path, nargs="+", required=True)
    p.add_argument("--set", choices=("standard", "fresh", "quarter"), required=True)
    p.add_argument("--json", type=Path, required=True)
    p.add_argument("--device", default="cpu")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--flow-scale", type=flow_scale_value, default="auto")
    p.add_argument("--weights", type=Path, default=Path("weights/network.safetensors"))
    p.add_argument("--limit", type=int, default=None, help="the first N triplets only (a smoke test)")
    args = p.parse_args()
    torch.set_grad_enabled(False)
    clips, triplets = load_holdout(args.data, triplet_set=args.set)
    by_name = {c.name: c for c in clips}
    triplets = triplets[:args.limit] if args.limit else triplets
    device = torch.device(args.device)
    net = load_weights(args.weights, device).eval()
    rows, start = [], time.time()
    for tr in triplets:
        clip, i, g = by_name[tr.clip], tr.centre, tr.gap
        n = clip.frames.shape[0]
        has_before = i - 3 * g >= 0 and clean_span(clip, i - 3 * g, i + g)
        has_after = i + 3 * g < n and clean_span(clip, i - g, i + 3 * g)

        def frame(j: int) -> torch.Tensor:
            return clip.frames[j].to(device).float().div(255).unsqueeze(0)

        one, mid, two = frame(i - g), frame(i), frame(i + g)
        padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16):
            one_p, two_p = padder.pad(one, two)
            state = net.estimate_flow(one_p, two_p, args.flow_scale)
            fwd, bwd = state.flow_fwd, state.flow_bwd
            flow_before = flow_after = None
            if has_before:
                flow_before = net.estimate_flow(padder.pad(frame(i - 3 * g))[0], one_p, args.flow_scale).flow_bwd
            if has_after:
                flow_after = net.estimate_flow(two_p, padder.pad(frame(i + 3 * g))[0], args.flow_scale).flow_fwd

            def score(neighbours=None) -> float:
                out = padder.unpad(net.synthesize(state, 0.5, *neighbours) if neighbours else
                                   net.synthesize(state, 0.5)).float()
                return float(psnr(out.clamp(0, 1), mid).item())

            row = {"clip": tr.clip, "group": tr.group, "gap": g, "centre": i,
                   "sides": ("both" if has_before and has_after else "before" if has_before else
                             "after" if has_after else "none"), "L": score()}
            if has_before or has_after:
                zero_before = flow_before if has_before else -fwd
                zero_after = flow_after if has_after else -bwd
                row["P"] = score(((zero_before, zero_after), (1.0, 1.0)))
                filled = fill_neighbour_flows(fwd, bwd, flow_before, flow_after)
                row["K"] = score((filled[:2], filled[2:]))
            if has_before and has_after:
                acc_one = acceleration(fwd, flow_before).float()
                acc_two = acceleration(bwd, flow_after).float()
                mean_one = (acc_one + backwarp(acc_two, fwd.float(), "border")) / 2
                mean_two = (acc_two + backwarp(acc_one, bwd.float(), "border")) / 2
                row["V"] = score((((mean_one - fwd.float()).to(fwd.dtype), (mean_two - bwd.float()).to(bwd.dtype)),
                                  (1.0, 1.0)))
        rows.append(row)
    args.json.write_text(json.dumps(rows) + "\n")
    print(f"{args.set}: {len(rows)} triplets in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
