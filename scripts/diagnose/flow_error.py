"""Where the flow goes wrong, on synthetic scenes with exact flow: what bilinear upsampling of the 1/4-resolution
flow costs the synthesis, and the network's flow error by pyramid level and near motion boundaries.

    python -m scripts.diagnose.flow_error --data .data/footage [--model fast | --weights W] [--batches 3] [--device cpu]

Synthetic layered motion over the held-out clips' textures (``training.data.synthetic_set``; 16 triplets per
batch): soft-edged layers, four layers of 1-px edges moving up to 2x farther, and small motion with 1-px edges.
For each, PSNR of the network's frame with its own flow, with the true flow in its place, and with the true
flow taken to 1/4 resolution (area average) and upsampled bilinearly, as the network's own is; then the mean
end-point error (forward flow, px) of its own flow and of that 1/4 version of the true one. Session 13
(CPU, committed weights, 3 batches): 24.07 / 27.12 / 25.63 dB on the crisp 4-layer scenes.

With ``--gradients``, instead: the gradient norm that the flow loss term of train.py gives each flow decoder (1/4
to 1/32), on one batch of the recipe's synthetic mix (``training.step.step_losses``, weight 0.05): how strongly
each level is driven, its own term and the finer levels' terms through the residual chain together.

A second table gives, per scene type, the mean true motion, the end-point error of the network's forward flow at
each estimated level (in full-resolution pixels) and at full resolution within 4 px of a motion boundary (where
the true flow changes by more than 0.5 px between neighbours) and elsewhere, with the boundary pixels' share.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F

from softsplat_vfi.engine.interpolator import resolve_device
from softsplat_vfi.engine.options import add_flags, device_for, show_notes, weights_for
from softsplat_vfi.model import Network, load_weights
from softsplat_vfi.model.network import FlowState
from softsplat_vfi.model.warp import resize_flow
from training.config import VALIDATION_CLIPS
from training.data import load_clips, synthetic_set
from scripts.diagnose.validation import interpolate_with_flow
from evaluation.metrics import psnr
from training.step import step_losses


def through_quarter(flow: torch.Tensor) -> torch.Tensor:
    """``flow`` averaged over 4x4 blocks (in 1/4-resolution pixels) and upsampled bilinearly back."""
    return resize_flow(F.avg_pool2d(flow, 4) / 4.0, tuple(flow.shape[2:]))


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True, help="the footage folder (clips.jsonl and the clips)")
    p.add_argument("--batches", type=int, default=3, help="batches of 16 triplets per scene type")
    add_flags(p, only=("weights", "device"), defaults={"device": "cpu"})  # run.py's flags; here on the CPU by default
    p.add_argument("--gradients", action="store_true",
                   help="print the flow decoders' gradient norms from the flow loss term instead (see above)")
    p.add_argument("--crop", type=int, default=256,
                   help="size of the scenes (training's crop: 256); only clips at least this large lend textures")
    args = p.parse_args(argv)
    show_notes()  # the library's notes on stderr while this tool runs
    if args.batches < 1:
        p.error("--batches must be at least 1")
    try:
        device, weights = resolve_device(device_for(args)), weights_for(args)
    except ValueError as exc:
        p.error(str(exc))
    clips = load_clips(args.data, VALIDATION_CLIPS, device, args.crop)
    if not clips:
        p.error(f"no held-out clip is {args.crop} px or larger: use a smaller --crop")
    rich = {"layers": 4, "motion_scale": 2.0}
    if args.gradients:
        return decoder_gradients(load_weights(weights, device), synthetic_set(
            clips, args.crop, 1, small_share=0.3, edge_px=1.0, seed=99, **rich)[0])
    sets = {"soft edges": synthetic_set(clips, args.crop, args.batches),
            "4 layers, 2x, 1-px edges": synthetic_set(clips, args.crop, args.batches, edge_px=1.0, **rich),
            "small motion, 1-px edges": synthetic_set(clips, args.crop, args.batches, small_share=1.0, edge_px=1.0)}
    net = load_weights(weights, device).eval()
    print(f"{'scenes':26s} {'own flow':>9s} {'true':>9s} {'true 1/4':>9s} {'EPE own':>9s} {'EPE 1/4':>9s}")
    by_level = {}  # scene type -> its line of the second table, from the same flows
    with torch.no_grad():
        for name, batches in sets.items():
            rows = {"own": [], "true": [], "quarter": [], "epe": [], "epe_quarter": []}
            states = []
            for b in batches:
                state = net.estimate_flow(b["one"], b["two"])
                states.append(state)
                fwd, bwd = b["flow_fwd"], b["flow_bwd"]
                rows["own"].append(psnr(net.synthesize(state, b["t"]), b["mid"]))
                rows["true"].append(psnr(interpolate_with_flow(net, state, b["t"], fwd, bwd), b["mid"]))
                rows["quarter"].append(psnr(interpolate_with_flow(net, state, b["t"], through_quarter(fwd),
                                                                  through_quarter(bwd)), b["mid"]))
                rows["epe"].append((state.flow_fwd - fwd).norm(dim=1).flatten(1).mean(1))
                rows["epe_quarter"].append((through_quarter(fwd) - fwd).norm(dim=1).flatten(1).mean(1))
            mean = {k: float(torch.cat(v).mean()) for k, v in rows.items()}
            print(f"{name:26s} {mean['own']:9.2f} {mean['true']:9.2f} {mean['quarter']:9.2f} "
                  f"{mean['epe']:9.2f} {mean['epe_quarter']:9.2f}", flush=True)
            by_level[name] = error_by_level_and_region(batches, states)
        print()
        for name, line in by_level.items():
            print(f"{name}: {line}", flush=True)
    return 0


def decoder_gradients(net: Network, batch: Dict[str, torch.Tensor], weight: float = 0.05) -> int:
    """Gradient norms of each flow decoder's parameters from the flow loss term alone (weight x flow error)."""
    n = batch["one"].shape[0]
    truth = torch.cat([batch["flow_fwd"], batch["flow_bwd"]], 0)
    print("flow loss weight: term; gradient norm of the flow decoders at 1/4, 1/8, 1/16, 1/32")
    net.zero_grad()
    state = net.estimate_flow(batch["one"], batch["two"])
    pred = net.synthesize(state, batch["t"])
    term = weight * step_losses(pred, state.flow_pyramid, batch["mid"], truth, 0, n, 1.0, weight)[3]
    term.backward()
    norms = [float(torch.stack([p.grad.norm() for p in d.parameters()]).norm()) for d in net.flow.decoders]
    print(f"{weight:5.3f}: {float(term.detach()):.4f}; " + ", ".join(f"{v:.4f}" for v in norms), flush=True)
    return 0


def error_by_level_and_region(batches: Sequence[Dict[str, torch.Tensor]], states: Sequence[FlowState]) -> str:
    """One line: mean true motion, forward-flow end-point error per pyramid level (full-resolution pixels), and at
    full resolution near motion boundaries and elsewhere, of the network's flows ``states`` of ``batches``."""
    levels, near, far, motion = {}, [], [], []
    for b, state in zip(batches, states):
        n, true = b["one"].shape[0], b["flow_fwd"]
        for flow in state.flow_pyramid:
            est = flow[:n].float()
            scale = true.shape[-1] / est.shape[-1]
            levels.setdefault(est.shape[-1], []).append((est - resize_flow(true, est.shape[2:])).norm(dim=1).flatten()
                                                        * scale)
        error = (state.flow_fwd - true).norm(dim=1)
        edge = torch.zeros_like(error, dtype=torch.bool)
        edge[:, :, 1:] |= (true[..., 1:] - true[..., :-1]).norm(dim=1) > 0.5
        edge[:, 1:] |= (true[:, :, 1:] - true[:, :, :-1]).norm(dim=1) > 0.5
        edge = F.max_pool2d(edge.float().unsqueeze(1), 9, 1, 4).squeeze(1) > 0
        near.append(error[edge])
        far.append(error[~edge])
        motion.append(true.norm(dim=1).flatten())
    width = batches[0]["one"].shape[-1]
    per_level = ", ".join(f"1/{width // w} {float(torch.cat(v).mean()):.2f}" for w, v in sorted(levels.items()))
    near_all, far_all = torch.cat(near), torch.cat(far)
    share = near_all.numel() / (near_all.numel() + far_all.numel())
    return (f"true motion {float(torch.cat(motion).mean()):.2f} px; EPE by level {per_level}; full resolution: "
            f"near boundaries {float(near_all.mean()):.2f} ({share:.0%} of pixels), elsewhere "
            f"{float(far_all.mean()):.2f}")


if __name__ == "__main__":
    sys.exit(main())
