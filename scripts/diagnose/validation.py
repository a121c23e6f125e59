"""What limits quality? Variants of the network on the validation triplets (held-out footage, CPU or GPU).

    python -m scripts.diagnose.validation --data .data/footage [--weights weights/network.safetensors]

The same three sets of 64 triplets as train.py's validation (motion-weighted, consecutive, clean). Variants: the
network; the network with its flow replaced by OpenCV DIS flow (is our flow the weak part?); DIS flow + backward
warping and blending (our version of ANCHORS.md's classical baseline: it scores 32.13 dB on Middlebury where
ANCHORS.md measured 34.18, so it understates that baseline); run.py's --ensemble 2 and 4 (the network averaged
over mirrored, and time-reversed, passes); frame blending. Scores in dB.

    python -m scripts.diagnose.validation --data .data/footage --small-motion [--compare W.safetensors ...]

instead scores a small-motion clean set (consecutive frames of the validation clips, crops shrunk up to 2x, kept
where the 95th percentile of DIS motion is under 6 px and the inputs differ): frame blend, DIS + backward warp and
the network with --weights and every --compare file. It asks whether such footage ranks weights as Middlebury does.

    python -m scripts.diagnose.validation --data .data/footage --breakdown

instead splits the pixels of the motion-weighted and consecutive sets by DIS motion and by texture (gradient of
the ground truth) and gives the PSNR of the network, of DIS + backward warp and of blending within each group:
where does the network lose?

    python -m scripts.diagnose.validation --data .data/footage --synthetic [--compare W.safetensors ...]

instead scores synthetic layered motion over the validation clips' textures (exact ground truth): small motion,
full motion, and full motion with 1-pixel layer edges, for --weights (also with the true flow in place of its own:
what a better flow alone could gain) and every --compare file.

    python -m scripts.diagnose.validation --data .data/footage --boundaries [--compare W.safetensors ...]

instead prints, for --weights and every --compare file, train.py's validation figures (the three sets, the
near-linear triplets of the two score sets, the score) and its PSNR near motion boundaries (pixels within 3 px of
an edge of OpenCV DIS flow, pooled over the two score sets), in float32: where occlusions and object edges are,
which the per-triplet means weigh little. `--flow-resize 1 2` adds a row per scale: the network with its flow
estimated on frames resized by that factor (as run.py's --flow-scale, which stops at 1; here values above 1
upsample: does finer flow help small frames?).

    python -m scripts.diagnose.validation --data .data/footage --boundaries --training-clips 16 [--compare ...]

scores the same sets drawn from 16 training clips instead (a fixed choice among the clips that are not held out):
a gain there that the held-out clips do not show is the network fitting the footage it trained on.

    python -m scripts.diagnose.validation --data .data/footage --oracle [--val-batches 16] [--compare W ...]

instead asks how much of the score is left to a better flow at all: the network against interpolation told the
true middle frame's motion: DIS flow from the middle frame to each input, backward warping and blending by t
("middle-frame flow"); the same taking each pixel from whichever warped input is closer to the truth (also told
the occlusions); and the middle-frame flow straightened to constant velocity (each pixel's path from
one input to the other, without its acceleration, which two frames cannot show), as measured and with the
acceleration averaged over 15 px (less of DIS's noise). None is a method; they bound what the flow of a two-frame
method could bring. A synthetic column (layered motion at nearly constant velocity, exact truth) checks the probe.
Then each weights file on the third of the triplets whose motion is nearest constant velocity, and on the rest.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch

from softsplat_vfi.engine.interpolator import resolve_device
from softsplat_vfi.engine.options import add_flags, device_for, show_notes, weights_for
from softsplat_vfi.model import Network, load_weights
from softsplat_vfi.model.ensemble import EnsembleNetwork
from softsplat_vfi.model.network import FlowState
from softsplat_vfi.model.warp import backwarp
from training.config import VALIDATION_CLIPS
from training.data import (BOUNDARY_SETS, Clip, FootageSampler, boundary_masks, dis_flow, forward_differences,
                           frame_blend, load_clips, synthetic_set, validation_sets)
from training.listing import clip_entries
from evaluation.metrics import psnr
from training.linearity import near_linear_subsets
from training.validation import validation_psnr


def interpolate(net: Network, one: torch.Tensor, two: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """The network's frames at times ``t`` (one per sample) between ``one`` and ``two``."""
    return net.synthesize(net.estimate_flow(one, two), t)


def interpolate_with_flow(net: Network, state: FlowState, t: torch.Tensor, f01: torch.Tensor,
                          f10: torch.Tensor) -> torch.Tensor:
    """The network's frames from its estimate ``state`` for a pair, with the flow replaced by ``f01`` / ``f10``
    (the metric recomputed from them; features reused, so callers that also score the network's own flow
    estimate once)."""
    swapped = dataclasses.replace(state, flow_fwd=f01, flow_bwd=f10,
                                  metric_one=net.metric(state.one, state.two, f01),
                                  metric_two=net.metric(state.two, state.one, f10))
    return net.synthesize(swapped, t)


def backward_warp_blend(one: torch.Tensor, two: torch.Tensor, t: torch.Tensor, f01: torch.Tensor,
                        f10: torch.Tensor) -> torch.Tensor:
    """The classical baseline: DIS flows f01/f10, Super SloMo's approximation of the flows from t back to 0 and
    1, backward warping and blending."""
    t = t.view(-1, 1, 1, 1)
    ft0 = -(1 - t) * t * f01 + t * t * f10
    ft1 = (1 - t) * (1 - t) * f01 - t * (1 - t) * f10
    return (1 - t) * backwarp(one, ft0) + t * backwarp(two, ft1)


def small_motion(clips: List[Clip], weights: List[Path], device: torch.device) -> int:
    """Score the small-motion clean set (see the module docstring), 16 triplets at a time."""
    sampler = FootageSampler(clips, 256, 4, generator=torch.Generator().manual_seed(2468), native_share=1.0,
                             downscale_share=1.0)
    kept = []
    for _ in range(60):
        b = sampler.batch(16)
        motion = dis_flow(b["one"], b["two"]).norm(dim=1).flatten(1)
        small = (motion.quantile(0.95, dim=1) < 6.0) & ((b["one"] - b["two"]).abs().flatten(1).mean(1) > 0.005)
        kept.append({k: b[k][small] for k in ("one", "two", "mid", "t")} | {"motion": motion[small].mean(1)})
    batch = {k: torch.cat([b[k] for b in kept]) for k in kept[0]}
    one, two, mid, t = batch["one"], batch["two"], batch["mid"], batch["t"]
    print(f"{one.shape[0]} triplets, mean DIS motion {float(batch['motion'].mean()):.2f} px")
    rows = {"frame blend": psnr(frame_blend(one, two, t), mid),
            "DIS + backward warp": torch.cat([psnr(backward_warp_blend(a, b, s, dis_flow(a, b), dis_flow(b, a)), m)
                                              for a, b, s, m in zip(one.split(16), two.split(16), t.split(16),
                                                                    mid.split(16))])}
    for path in weights:
        net = load_weights(path, device).eval()
        with torch.no_grad():
            rows[str(path)] = torch.cat([psnr(interpolate(net, a, b, s), m)
                                         for a, b, s, m in zip(one.split(16), two.split(16), t.split(16),
                                                               mid.split(16))])
    for name, scores in rows.items():
        print(f"{float(scores.mean()):7.2f}  {name}")
    return 0


def synthetic_sets(clips: List[Clip], weights: List[Path], device: torch.device) -> int:
    """Score synthetic layered motion over the validation clips' textures (exact ground truth, no coding noise
    between the frames): small motion (scaled down 2-16x) and the training mix's full motion, 128 triplets each,
    and full motion with 1-pixel layer edges (train.py --synthetic-edge-px 1); then the scenes of the committed
    recipe (4 layers, shifts up to 2x, sharp edges). The first weights are also scored with the true flow in place
    of their own: what better flow alone could gain."""
    rich = {"layers": 4, "motion_scale": 2.0}
    sets = {name: synthetic_set(clips, 256, 8, small_share=small, edge_px=edge, **options)
            for name, small, edge, options in (
                ("synthetic small motion", 1.0, 0.0, {}), ("synthetic full motion", 0.0, 0.0, {}),
                ("full motion, sharp edges", 0.0, 1.0, {}), ("4 layers, 2x, sharp", 0.0, 1.0, rich))}
    rows = {}
    for name, batches in sets.items():
        rows.setdefault("frame blend", {})[name] = float(torch.cat([
            psnr(frame_blend(b["one"], b["two"], b["t"]), b["mid"]) for b in batches]).mean())
    for k, path in enumerate(weights):
        net = load_weights(path, device).eval()
        with torch.no_grad():
            for name, batches in sets.items():
                own, true = [], []
                for b in batches:
                    state = net.estimate_flow(b["one"], b["two"])
                    own.append(psnr(net.synthesize(state, b["t"]), b["mid"]))
                    if k == 0:
                        true.append(psnr(interpolate_with_flow(net, state, b["t"], b["flow_fwd"], b["flow_bwd"]),
                                         b["mid"]))
                rows.setdefault(str(path), {})[name] = float(torch.cat(own).mean())
                if k == 0:
                    rows.setdefault(f"{path} with the true flow", {})[name] = float(torch.cat(true).mean())
    print(" ".join(f"{n:>24s}" for n in sets) + "  weights")
    for label, scores in rows.items():
        print(" ".join(f"{scores[n]:24.2f}" for n in sets) + f"  {label}", flush=True)
    return 0


def training_clip_names(root: Path, count: int) -> List[str]:
    """``count`` clips of ``root``/clips.jsonl that are not held out, the same on every call (shuffled, seed 0)."""
    import random

    names = [e["file"] for e in clip_entries(root) if e["file"] not in VALIDATION_CLIPS]
    random.Random(0).shuffle(names)
    return names[:count]


class ScaledFlow:
    """The network with its flow estimated at ``scale`` times the frames' size (run.py's --flow-scale), in the
    two calls train.py's validation makes."""

    def __init__(self, net: Network, scale: float) -> None:
        self.net, self.scale = net, scale

    def estimate_flow(self, one: torch.Tensor, two: torch.Tensor) -> FlowState:
        return self.net.estimate_flow(one, two, self.scale)

    def synthesize(self, state: FlowState, t: torch.Tensor) -> torch.Tensor:
        return self.net.synthesize(state, t)


def boundary_scores(clips: List[Clip], weights: List[Path], device: torch.device, batches: int = 4, skip: int = 0,
                    flow_scales: Sequence[float] = (1.0,)) -> int:
    """train.py's validation figures, with its pooled PSNR near motion boundaries and on the near-linear triplets,
    for each weights file (``batches`` of 16 triplets per set, as train.py's --val-batches; the first 4 are
    train.py's default sets), leaving out the first ``skip`` batches of every set (``batches`` 32 and ``skip``
    16: the triplets a run validated on 16 batches never saw); a row per weights file and flow scale."""
    sets = {name: drawn[skip:] for name, drawn in validation_sets(clips, 256, 4, batches).items()}
    boundaries = boundary_masks(sets)
    near_linear = near_linear_subsets(sets, BOUNDARY_SETS)
    print(" ".join(f"{n:>16s}" for n in (*sets, "near-linear", "score", "boundaries")) + "  weights")
    for path in weights:
        net = load_weights(path, device).eval()
        for scale in flow_scales:
            with torch.no_grad():
                means, boundary = validation_psnr(ScaledFlow(net, scale), sets, boundaries, near_linear)
            score = (means["motion-weighted"] + means["consecutive"]) / 2
            label = f"{path}" if len(flow_scales) == 1 else f"{path} (flow scale {scale:g})"
            print(" ".join(f"{v:16.3f}" for v in (*means.values(), score, boundary)) + f"  {label}", flush=True)
    return 0


def _oracle_rows(net: Network, b: Dict[str, torch.Tensor]) -> dict:
    """Per-triplet PSNR of the network and of interpolation told the middle frame's motion, for batch ``b``."""
    one, two, mid, t = b["one"], b["two"], b["mid"], b["t"].view(-1, 1, 1, 1)
    # each input moved to where the middle frame shows it (edge pixels repeated where the flow points outside the
    # crop, which the network's own padding also covers)
    to_one, to_two = dis_flow(mid, one), dis_flow(mid, two)
    from_one = backwarp(one, to_one, padding="border")
    from_two = backwarp(two, to_two, padding="border")
    closer = (from_one - mid).abs().sum(1, keepdim=True) <= (from_two - mid).abs().sum(1, keepdim=True)
    # the same motion at constant velocity (each pixel's path from one to two, straightened): what a two-frame
    # method with perfect correspondences could reach, as it cannot see acceleration. Sampling one at
    # x - t * path and two at x + (1 - t) * path samples both at their true places less the acceleration offset
    # d = (1 - t) * to_one + t * to_two, whose DIS noise makes the bound pessimistic; averaging d over 15 px keeps
    # an object's acceleration and drops most of that noise
    path = to_two - to_one
    straight = ((1 - t) * backwarp(one, -t * path, padding="border")
                + t * backwarp(two, (1 - t) * path, padding="border"))
    smooth = torch.nn.functional.avg_pool2d((1 - t) * to_one + t * to_two, 15, 1, 7, count_include_pad=False)
    smoothed = ((1 - t) * backwarp(one, to_one - smooth, padding="border")
                + t * backwarp(two, to_two - smooth, padding="border"))
    return {"network": psnr(interpolate(net, one, two, b["t"]), mid),
            "middle-frame flow": psnr((1 - t) * from_one + t * from_two, mid),
            "+ best input per pixel": psnr(torch.where(closer, from_one, from_two), mid),
            "constant velocity": psnr(straight, mid),
            "+ acceleration smoothed": psnr(smoothed, mid),
            "frame blend": psnr(frame_blend(one, two, b["t"]), mid)}


def oracle_scores(clips: List[Clip], weights: List[Path], device: torch.device, batches: int = 4) -> int:
    """The first weights' validation figures against interpolation told the true middle frame's motion (see the
    module's --oracle): per set and as train.py's score, the mean of the two score sets; and, as a control of
    the method, synthetic layered motion (nearly constant velocity, exact ground truth). Then every weights file
    on the third of each set's triplets whose motion is nearest constant velocity (the smallest loss from
    straightening the middle-frame flow) and on the rest."""
    sets = validation_sets(clips, 256, 4, batches)
    columns = {"motion-weighted": sets["motion-weighted"], "consecutive": sets["consecutive"],
               "synthetic control": synthetic_set(clips, 256, batches)}
    results, straightening_loss, own_first, per_triplet = {}, {}, {}, {}
    net = load_weights(weights[0], device).eval()
    with torch.no_grad():
        for name, column in columns.items():
            rows = [_oracle_rows(net, b) for b in column]
            per_triplet[name] = {k: torch.cat([r[k] for r in rows]) for k in rows[0]}
            results[name] = {k: float(v.mean()) for k, v in per_triplet[name].items()}
            straightening_loss[name] = torch.cat([r["middle-frame flow"] - r["+ acceleration smoothed"] for r in rows])
            own_first[name] = torch.cat([r["network"] for r in rows])
    print(f"{'':24s} {'motion-weighted':>16s} {'consecutive':>16s} {'score':>16s} {'synthetic control':>18s}"
          f"  ({weights[0]})")
    for row in results["consecutive"]:
        values = [results[n][row] for n in ("motion-weighted", "consecutive")]
        print(f"{row:24s} " + " ".join(f"{v:16.3f}" for v in (*values, sum(values) / 2))
              + f" {results['synthetic control'][row]:18.3f}")
    score_sets = BOUNDARY_SETS  # the two sets of train.py's score
    # the near-linear triplets train.py's validation pools (within 1 px of constant velocity): how much of what
    # the middle frame's motion would give is left there, where a two-frame method can in principle be exact
    near = near_linear_subsets(sets, score_sets)
    chosen = torch.cat([torch.cat(near[n]) for n in score_sets])
    print(f"\non the near-linear triplets of the two score sets ({int(chosen.sum())} of {chosen.numel()}; mean "
          f"per-triplet PSNR, not the pooled figure train.py logs)")
    for row in results["consecutive"]:
        values = torch.cat([per_triplet[n][row] for n in score_sets])[chosen]
        print(f"{row:24s} {float(values.mean()):16.3f}")
    linear = {n: straightening_loss[n] <= straightening_loss[n].quantile(1 / 3) for n in score_sets}
    print(f"\nnetwork PSNR on the third of the triplets nearest constant velocity / the other two thirds "
          f"({int(linear[score_sets[0]].sum())} and {int((~linear[score_sets[0]]).sum())} per set)")
    print(" ".join(f"{n:>27s}" for n in score_sets) + f" {'score':>27s}  weights")
    for k, path in enumerate(weights):
        if k == 0:
            own = own_first
        else:
            net = load_weights(path, device).eval()
            with torch.no_grad():
                own = {n: torch.cat([psnr(interpolate(net, b["one"], b["two"], b["t"]), b["mid"]) for b in sets[n]])
                       for n in score_sets}
        pairs = [(float(own[n][linear[n]].mean()), float(own[n][~linear[n]].mean())) for n in score_sets]
        pairs.append(tuple(sum(p[i] for p in pairs) / 2 for i in range(2)))
        print(" ".join(f"{a:13.3f} / {b:11.3f}" for a, b in pairs) + f"  {path}", flush=True)
    return 0


def breakdown(clips: List[Clip], net: Network, device: torch.device) -> int:
    """PSNR by pixel group (DIS motion x texture) for the network, DIS + backward warp and blending."""
    motion_edges = (0.0, 1.0, 4.0, 16.0, float("inf"))
    sets = validation_sets(clips, 256, 4)
    methods = ("network", "DIS + warp", "blend")
    with torch.no_grad():
        for set_name in ("motion-weighted", "consecutive"):
            errors = {m: [] for m in methods}
            motions, textures = [], []
            for b in sets[set_name]:
                one, two, mid, t = b["one"], b["two"], b["mid"], b["t"]
                f01, f10 = dis_flow(one, two), dis_flow(two, one)
                outs = {"network": interpolate(net, one, two, t),
                        "DIS + warp": backward_warp_blend(one, two, t, f01, f10),
                        "blend": frame_blend(one, two, t)}
                for m in methods:
                    errors[m].append((outs[m].clamp(0, 1) - mid).pow(2).mean(1).flatten())
                # motion at the middle frame's pixels, approximated by the larger of the two input flows' magnitudes
                motions.append(torch.maximum(f01.norm(dim=1), f10.norm(dim=1)).flatten())
                gx, gy = forward_differences(mid.mean(1, keepdim=True))
                textures.append((gx.abs() + gy.abs()).flatten())
            err = {m: torch.cat(v) for m, v in errors.items()}
            motion, texture = torch.cat(motions), torch.cat(textures)
            detailed = texture > texture.median()
            print(f"\n{set_name}: PSNR (dB) by pixel group; share = fraction of pixels, loss share = fraction of the "
                  f"network's squared error")
            print(f"{'DIS motion px':>14s} {'texture':>8s} {'share':>6s} {'loss share':>10s} "
                  + " ".join(f"{m:>11s}" for m in methods))
            total = err["network"].sum()
            for lo, hi in zip(motion_edges[:-1], motion_edges[1:]):
                for label, mask in (("flat", ~detailed), ("detailed", detailed)):
                    sel = (motion >= lo) & (motion < hi) & mask
                    if not sel.any():
                        continue
                    row = " ".join(f"{float(-10 * torch.log10(err[m][sel].mean())):11.2f}" for m in methods)
                    print(f"{f'{lo:g}-{hi:g}':>14s} {label:>8s} {float(sel.float().mean()):6.3f} "
                          f"{float(err['network'][sel].sum() / total):10.3f} {row}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, required=True)
    add_flags(p, only=("weights", "device"), defaults={"device": "cpu"})  # run.py's flags; here on the CPU by default
    p.add_argument("--small-motion", action="store_true", help="score the small-motion clean set instead")
    p.add_argument("--compare", type=Path, nargs="+", default=[],
                   help="more weights for --small-motion, --synthetic, --boundaries and --oracle")
    p.add_argument("--breakdown", action="store_true", help="PSNR by DIS motion and texture instead")
    p.add_argument("--boundaries", action="store_true",
                   help="train.py's validation figures and PSNR near motion boundaries, for --weights and every "
                        "--compare")
    p.add_argument("--val-batches", type=int, default=4,
                   help="batches of 16 triplets per set for --boundaries and --oracle (train.py's --val-batches; "
                        "default 4)")
    p.add_argument("--skip-batches", type=int, default=0, metavar="K",
                   help="with --boundaries: score batches K+1 to --val-batches only (e.g. --val-batches 32 "
                        "--skip-batches 16: the fresh triplets of runs validated on 16 batches)")
    p.add_argument("--flow-resize", type=float, nargs="+", default=[1.0], metavar="S",
                   help="with --boundaries: score each weights file with its flow estimated on the frames resized by "
                        "S (run.py's --flow-scale, which stops at 1; here S may exceed 1), a row per S")
    p.add_argument("--synthetic", action="store_true",
                   help="score synthetic motion over validation textures instead, for --weights and every --compare")
    p.add_argument("--oracle", action="store_true",
                   help="the network against interpolation told the true middle frame's motion instead")
    p.add_argument("--training-clips", type=int, default=0, metavar="N",
                   help="with --boundaries or --oracle: draw the sets from N training clips instead of the held-out "
                        "ones")
    args = p.parse_args(argv)
    show_notes()  # the library's notes on stderr while this tool runs
    if args.val_batches < 1:
        p.error(f"--val-batches {args.val_batches}: use 1 or more")
    if not 0 <= args.skip_batches < args.val_batches:
        p.error(f"--skip-batches {args.skip_batches}: use 0 to {args.val_batches - 1} (fewer than --val-batches)")
    if args.skip_batches and not args.boundaries:
        p.error("--skip-batches goes with --boundaries")
    if args.flow_resize != [1.0] and not args.boundaries:
        p.error("--flow-resize goes with --boundaries")
    if any(not 0 < s <= 4 for s in args.flow_resize):
        p.error(f"--flow-resize {' '.join(f'{s:g}' for s in args.flow_resize)}: use values in (0, 4]")
    if args.training_clips and not (args.boundaries or args.oracle):
        p.error("--training-clips goes with --boundaries or --oracle")
    try:
        device, args.weights = resolve_device(device_for(args)), weights_for(args)
    except ValueError as exc:
        p.error(str(exc))
    names = training_clip_names(args.data, args.training_clips) if args.training_clips else VALIDATION_CLIPS
    clips = load_clips(args.data, names, device, 256)
    if args.small_motion:
        return small_motion(clips, [args.weights, *args.compare], device)
    if args.synthetic:
        return synthetic_sets(clips, [args.weights, *args.compare], device)
    if args.boundaries:
        return boundary_scores(clips, [args.weights, *args.compare], device, args.val_batches, args.skip_batches,
                               args.flow_resize)
    if args.oracle:
        return oracle_scores(clips, [args.weights, *args.compare], device, args.val_batches)
    net = load_weights(args.weights, device).eval()
    if args.breakdown:
        return breakdown(clips, net, device)
    sets = validation_sets(clips, 256, 4)  # train.py's validation sets, at its default crop and gap
    names = ("network", "network + DIS flow", "DIS + backward warp", "--ensemble 2", "--ensemble 4", "frame blend")
    ensembles = {2: EnsembleNetwork(net, 2), 4: EnsembleNetwork(net, 4)}
    results = {}
    with torch.no_grad():
        for set_name, batches in sets.items():
            scores = {k: [] for k in names}
            motion = []
            for b in batches:
                one, two, mid = b["one"], b["two"], b["mid"]
                state = net.estimate_flow(one, two)
                scores["network"].append(psnr(net.synthesize(state, b["t"]), mid))
                f01, f10 = dis_flow(one, two), dis_flow(two, one)
                motion.append(f01.norm(dim=1).flatten(1).mean(1))
                scores["network + DIS flow"].append(psnr(interpolate_with_flow(net, state, b["t"], f01, f10), mid))
                scores["DIS + backward warp"].append(psnr(backward_warp_blend(one, two, b["t"], f01, f10), mid))
                for passes, ens in ensembles.items():  # per sample: each triplet has its own t
                    outs = [ens(one[i:i + 1], two[i:i + 1], [float(b["t"][i])])[0] for i in range(one.shape[0])]
                    scores[f"--ensemble {passes}"].append(psnr(torch.cat(outs), mid))
                scores["frame blend"].append(psnr(frame_blend(one, two, b["t"]), mid))
            results[set_name] = {k: float(torch.cat(v).mean()) for k, v in scores.items()}
            results[set_name]["mean DIS motion px"] = float(torch.cat(motion).mean())
    print(f"{'':24s} " + " ".join(f"{n:>16s}" for n in sets))
    for row in (*names, "mean DIS motion px"):
        print(f"{row:24s} " + " ".join(f"{results[n][row]:16.2f}" for n in sets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
