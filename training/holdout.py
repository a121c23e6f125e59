"""Validation on footage from sources the network never trained on, against a classical baseline.

A clip is held out when its source repository is: footage2's ``val`` split (chosen by repository) and, in
the first footage folder, the repositories of ``HOLDOUT_SOURCES``; no held-out repository has a clip in
training. From every held-out clip, ``PER_CLIP`` centre frames i give the triplets (i - k, i, i + k) for
each gap k of ``GAPS`` (stored frames; t = 0.5), whole frames, never across a cut or a repeated frame. Weights are
chosen on those triplets. Two confirmation sets chose no weights: ``--set fresh`` scores the centres halfway between
them instead (about 7 per clip and gap), ``--set quarter`` those a quarter of the way between them (about 14).

The baseline is classical: OpenCV DIS (medium preset) flow both ways, Super SloMo's approximation of the flows
from t back to the two frames, both frames backward-warped (edge pixels repeated outside) and blended by t.
On Middlebury it scores 34.20 dB (``python -m training.holdout --middlebury DIR``), ANCHORS.md's 34.18.

The **margin** is the network's PSNR minus the baseline's on the same triplet, averaged over triplets:
overall, for adjacent frames (k = 1) and for wider gaps (k >= 2), and per footage folder.

Each method is scored by ``evaluation.holdout.triplet_scores`` (the common call of evaluation/methods.py): ours as
run.py runs it with the same flags (an ``engine.Interpolator``: precision auto, CUDA graphs on, the flow scale the
weights file states; whole frames), on the pair alone, or with ``--motion quadratic`` along run.py --video's path
where a triplet kept its outer neighbours; the peers on the pair alone.

    python -m training.holdout --data FOOTAGE FOOTAGE2 --weights weights/network.safetensors [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from softsplat_vfi.engine.options import DefaultsFormatter, cli_message, device_for, show_notes
from evaluation.holdout import HOLDOUT, triplet_scores
from evaluation.methods import HOLD_STILL, Ours, add_engine_flags, methods_of
from evaluation.metrics import nchw, psnr, to_float, to_integer
from evaluation.peers import PEERS
from softsplat_vfi.model.network import FlowScale
from training.config import MOTIONS, VALIDATION_CROP
from training.data import Clip, clean_span, dis_flows
from training.listing import HOLDOUT_SOURCES

# Repositories of the first footage folder held out whole (about a fifth of its frames): street and car
# footage, stock clips, a tracking bag, people running, a bike and a phone-call test clip. None of them has a
# clip in footage2.
PER_CLIP = 8
GAPS = (1, 2)
# the triplets that choose weights, and the two confirmation sets (holdout_triplets)
TRIPLET_SETS = ("standard", "fresh", "quarter")


def is_holdout(entry: dict, sources: Sequence[str] = HOLDOUT_SOURCES) -> bool:
    """Whether a clips.jsonl entry is held out: footage2's ``val`` split, or a repository of ``sources``."""
    from training.data import source_repository

    return entry.get("split") == "val" or source_repository(entry) in set(sources)


@dataclass
class Triplet:
    group: str  # the footage folder's name
    clip: str
    centre: int
    gap: int
    one: torch.Tensor  # 3 x H x W uint8 RGB, CPU
    mid: torch.Tensor
    two: torch.Tensor
    before: Optional[torch.Tensor] = None  # frame centre - 3 gap (as far before one as two is after it), if kept
    after: Optional[torch.Tensor] = None  # frame centre + 3 gap, if kept

    @property
    def has_neighbours(self) -> bool:
        """Whether the triplet kept an outer neighbour on either side (``holdout_triplets(..., neighbours=True)``):
        it moves along quadratic paths, as the video tool moves it."""
        return self.before is not None or self.after is not None

    @property
    def sides(self) -> str:
        """Which outer neighbours the triplet kept: "both", "before", "after" or "none"."""
        return {(True, True): "both", (True, False): "before", (False, True): "after",
                (False, False): "none"}[(self.before is not None, self.after is not None)]


def holdout_triplets(clips: Sequence[Clip], per_clip: int = PER_CLIP, gaps: Sequence[int] = GAPS,
                     neighbours: bool = False, triplet_set: str = "standard") -> List[Triplet]:
    """``per_clip`` evenly spaced centres per clip and gap (the same on every call), whole frames; with
    ``neighbours``, each triplet also keeps its outer neighbours where they lie in the same shot with no repeated
    frame, each side on its own as the video tool keeps them (for quadratic motion; the triplets chosen do not
    change). ``triplet_set`` "fresh": instead, the centres halfway between those (the odd ones of 2 x ``per_clip``
    - 1 evenly spaced); "quarter": those a quarter of the way between them (the odd ones of 4 x ``per_clip`` - 3).
    No centre is in two sets."""
    if triplet_set not in TRIPLET_SETS:
        raise ValueError(f"triplet_set must be one of {', '.join(TRIPLET_SETS)}, got {triplet_set!r}")
    triplets = []
    for clip in clips:
        for gap in gaps:
            centres = [i for i in range(gap, clip.frames.shape[0] - gap) if clean_span(clip, i - gap, i + gap)]
            if not centres:
                continue
            picks = _spaced(centres, per_clip)
            if triplet_set == "fresh":
                picks = sorted(set(_spaced(centres, 2 * per_clip - 1)) - set(picks))
            elif triplet_set == "quarter":
                picks = sorted(set(_spaced(centres, 4 * per_clip - 3)) - set(_spaced(centres, 2 * per_clip - 1)))
            for i in picks:
                one, mid, two = (clip.frames[j].clone() for j in (i - gap, i, i + gap))
                outer = (None, None)
                if neighbours:
                    outer = tuple(clip.frames[j].clone().cpu() if clean_span(clip, min(i - gap, j), max(i + gap, j))
                                  else None for j in (i - 3 * gap, i + 3 * gap))
                triplets.append(Triplet(clip.group, clip.name, i, gap, one.cpu(), mid.cpu(), two.cpu(), *outer))
    return triplets


def _spaced(centres: List[int], count: int) -> List[int]:
    """``count`` evenly spaced entries of ``centres`` (fewer where they coincide), in order."""
    return sorted({centres[int(j)] for j in np.linspace(0, len(centres) - 1, count).round()})


def load_holdout(folders: Sequence[Path], neighbours: bool = False,
                 triplet_set: str = "standard") -> Tuple[List[Clip], List[Triplet]]:
    """The held-out clips of the footage ``folders`` that train.py validates on (those at least its validation crop
    in size), decoded on the CPU, and their triplets (with their outer neighbours; ``triplet_set``:
    ``holdout_triplets``)."""
    from training.data import load_clips

    clips = load_clips(list(folders), None, torch.device("cpu"), VALIDATION_CROP,
                       keep=lambda root, entry: is_holdout(entry))
    return clips, holdout_triplets(clips, neighbours=neighbours, triplet_set=triplet_set)


def classical_interpolation(one: torch.Tensor, two: torch.Tensor, t: float, flow_fwd: torch.Tensor,
                            flow_bwd: torch.Tensor,
                            neighbour_flows: Optional[Tuple[torch.Tensor, torch.Tensor]] = None) -> torch.Tensor:
    """The baseline frame at t from N x 3 x H x W frames and their flows one->two and two->one (pixels).

    With ``neighbour_flows`` (one -> the frame before one, two -> the frame after two), the four-frame baseline:
    Super SloMo's approximation taken of the quadratic paths (model/motion.py), the flow from t back to one
    (1 - t) x -(one -> t) + t x (two -> one - two -> t), and to two likewise; it equals the two-frame baseline
    under constant velocity."""
    from softsplat_vfi.model.motion import linear_flows, quadratic_flows
    from softsplat_vfi.model.warp import backwarp

    if neighbour_flows is None:  # constant velocity: one -> t = t x flow_fwd, two -> t = (1 - t) x flow_bwd
        one_to_t, two_to_t = linear_flows(flow_fwd, flow_bwd, t)
    else:
        one_to_t, two_to_t = quadratic_flows(flow_fwd, flow_bwd, *neighbour_flows, t)
    flow_t0 = -(1 - t) * one_to_t + t * (flow_bwd - two_to_t)
    flow_t1 = (1 - t) * (flow_fwd - one_to_t) - t * two_to_t
    return (1 - t) * backwarp(one, flow_t0, "border") + t * backwarp(two, flow_t1, "border")


def grey_frame(frame: torch.Tensor) -> np.ndarray:
    """A 3 x H x W uint8 RGB frame as the H x W uint8 grey image OpenCV DIS takes."""
    import cv2

    return cv2.cvtColor(frame.permute(1, 2, 0).numpy(), cv2.COLOR_RGB2GRAY)


def pair_flows(pairs: Sequence[Tuple[torch.Tensor, torch.Tensor]],
               workers: int = 8) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """The baseline's flows of every (one, two) pair of 3 x H x W uint8 RGB frames: OpenCV DIS (medium) one -> two
    and two -> one, each 1 x 2 x H x W (CPU, on ``workers`` threads)."""
    greys = []
    for one, two in pairs:
        a, b = grey_frame(one), grey_frame(two)
        greys += [(a, b), (b, a)]
    flows = [f.unsqueeze(0) for f in dis_flows(greys, workers)]
    return list(zip(flows[0::2], flows[1::2]))


def triplet_flows(triplets: Sequence[Triplet], workers: int = 8) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """The baseline's flows of every triplet (``pair_flows`` of its outer frames)."""
    return pair_flows([(tr.one, tr.two) for tr in triplets], workers)


def baseline_scores(triplets: Sequence[Triplet], workers: int = 8,
                    flows: Optional[Sequence[Tuple[torch.Tensor, torch.Tensor]]] = None,
                    four_frames: bool = False) -> torch.Tensor:
    """The classical baseline's PSNR on every triplet, from ``flows`` (triplet_flows') or computed here; with
    ``four_frames``, the four-frame baseline where a triplet kept an outer neighbour (DIS one -> before and two ->
    after as well, where kept)."""
    if flows is None:
        flows = triplet_flows(triplets, workers)
    outer: List[Optional[Tuple[torch.Tensor, torch.Tensor]]] = [None] * len(triplets)
    if four_frames:
        sides = [(k, side, frame, neighbour) for k, tr in enumerate(triplets)
                 for side, frame, neighbour in ((0, tr.one, tr.before), (1, tr.two, tr.after)) if neighbour is not None]
        found = dis_flows([(grey_frame(frame), grey_frame(neighbour)) for _, _, frame, neighbour in sides], workers)
        for (k, side, _, _), flow in zip(sides, found):
            pair = list(outer[k] or (None, None))
            pair[side] = flow.unsqueeze(0)
            outer[k] = tuple(pair)
    scores = []
    for tr, (fwd, bwd), neighbours in zip(triplets, flows, outer):
        one, two, mid = (x.float().div(255).unsqueeze(0) for x in (tr.one, tr.two, tr.mid))
        out = classical_interpolation(one, two, 0.5, fwd, bwd, neighbours)
        scores.append(psnr(out.clamp(0, 1), mid))
    return torch.cat(scores)


def network_scores(net: torch.nn.Module, triplets: Sequence[Triplet], device: torch.device,
                   autocast_dtype: Optional[torch.dtype] = None, flow_scale: FlowScale = 1.0,
                   details: Optional[List[float]] = None, cuda_graphs: bool = False) -> torch.Tensor:
    """The network's PSNR on every triplet (``evaluation.holdout.triplet_scores``: the pair alone, or run.py --video's
    path where a triplet kept an outer neighbour), through an ``engine.Interpolator`` on ``net`` with this autocast and
    ``flow_scale`` on whole frames (callers set eval mode; ``device`` is the network's own). ``cuda_graphs`` is off
    for a network in training (the trainer): graphs would be captured anew at every validation, and give the eager
    frames up to float rounding; ``details`` collects the detail kept."""
    from softsplat_vfi.engine import Interpolator, InterpolatorOptions

    precision = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[autocast_dtype]
    options = InterpolatorOptions(precision=precision, flow_scale=flow_scale, cuda_graphs=cuda_graphs,
                                  **dict(HOLDOUT.engine))
    return triplet_scores(Ours(Interpolator(options, network=net), "network"), triplets, details)


def per_clip(scores: torch.Tensor, triplets: Sequence[Triplet]) -> Dict[str, float]:
    """Mean PSNR per clip."""
    clips = [tr.clip for tr in triplets]
    return {c: float(scores[torch.tensor([x == c for x in clips])].mean()) for c in sorted(set(clips))}


def summary(net: torch.Tensor, base: torch.Tensor, triplets: Sequence[Triplet]) -> Dict[str, float]:
    """Mean network PSNR, baseline PSNR and margin (network minus baseline), overall, by gap (``t1``: k = 1,
    ``t2``: k >= 2) and per footage folder; NaN where a subset is empty."""
    gaps = torch.tensor([tr.gap for tr in triplets])
    groups = [tr.group for tr in triplets]
    subsets = {"": torch.ones(len(triplets), dtype=torch.bool), "_t1": gaps == 1, "_t2": gaps >= 2}
    for group in sorted(set(groups)):
        subsets[f"_{group}"] = torch.tensor([g == group for g in groups])
    out = {}
    for suffix, mask in subsets.items():
        any_ = bool(mask.any())
        out[f"holdout_psnr{suffix}"] = float(net[mask].mean()) if any_ else float("nan")
        out[f"baseline_psnr{suffix}"] = float(base[mask].mean()) if any_ else float("nan")
        out[f"margin{suffix}"] = float((net - base)[mask].mean()) if any_ else float("nan")
    out["triplets"] = len(triplets)
    return out


def describe(figures: Dict[str, float]) -> str:
    """One line: the margins that choose weights, and the PSNR behind them."""
    return (f"margin {figures['margin']:+.3f} dB (t±1 {figures['margin_t1']:+.3f}, t±2 {figures['margin_t2']:+.3f}); "
            f"network {figures['holdout_psnr']:.3f}, baseline {figures['baseline_psnr']:.3f} dB on "
            f"{figures['triplets']} held-out triplets")


class Classical:
    """The classical baseline as an ``evaluation.methods.Method`` (Middlebury's row): DIS flows of the pair rounded to
    uint8 (``pair_flows``), then ``classical_interpolation``; the video path runs the pair alone."""

    label = "classical baseline (OpenCV DIS, backward warping)"
    settings: Dict[str, object] = {"device": "cpu", "precision": "fp32", "input": "the pair alone"}

    def interpolate(self, one: np.ndarray, two: np.ndarray, t: float) -> np.ndarray:
        (flow_fwd, flow_bwd), = pair_flows([tuple(torch.from_numpy(to_integer(x)).permute(2, 0, 1)
                                                  for x in (one, two))], workers=1)
        return classical_interpolation(nchw(one), nchw(two), t, flow_fwd, flow_bwd)[0].permute(1, 2, 0).numpy()

    def interpolate_video(self, one: np.ndarray, two: np.ndarray, t: float, before: Optional[np.ndarray],
                          after: Optional[np.ndarray]) -> np.ndarray:
        return to_integer(self.interpolate(to_float(one), to_float(two), t), one.dtype)


def middlebury_baseline(data: Path) -> float:
    """The classical baseline's mean PSNR on a Middlebury folder (benchmark_middlebury.py's protocol)."""
    from evaluation.middlebury import evaluate

    return evaluate(Classical(), data, progress=False)["psnr"]


def _record(section: Dict, label: str, scores: torch.Tensor, details: List[float], base: torch.Tensor,
            triplets: Sequence[Triplet], note: str = "") -> Dict[str, float]:
    """One method's figures (with the detail kept), per-triplet and per-clip scores into the report, and its line."""
    figures = summary(scores, base, triplets)
    figures["detail"] = float(np.mean(details))
    section[label] = {"figures": figures, "scores": scores.tolist(), "details": details,
                      "clips": per_clip(scores, triplets)}
    print(f"{label}{note}: {describe(figures)}; detail kept {figures['detail']:.3f}")
    return figures


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Margin over the classical baseline on held-out footage.",
                                formatter_class=DefaultsFormatter)
    p.add_argument("--data", type=Path, nargs="+", help="footage folders (footage, footage2)")
    add_engine_flags(p, several=True)
    p.add_argument("--motion", choices=MOTIONS, default="linear",
                   help="quadratic: move pixels along paths through the frames 3 gaps from the centre "
                        "(model/motion.py) where the shot has them, each side on its own as run.py --video does, "
                        "constant velocity elsewhere")
    p.add_argument("--set", choices=TRIPLET_SETS, default="standard",
                   help="the triplets that choose weights, or a confirmation set: the centres halfway (fresh) or a "
                        "quarter of the way (quarter) between them")
    p.add_argument("--peer", nargs="*", default=[], choices=list(PEERS),
                   help="also score these RIFE releases (evaluation/peers.py; their wheels installed), on the pair "
                        "alone")
    p.add_argument("--hold-still", choices=list(HOLD_STILL), default="on",
                   help="our networks with still, textured neighbourhoods held at zero flow (model.warp.still_weight, "
                        "the default), without (a diagnostic), or both side by side")
    p.add_argument("--json", type=Path, default=None, help="write the figures (and per-triplet scores) here")
    p.add_argument("--middlebury", type=Path, default=None, help="instead: the baseline's Middlebury PSNR")
    args = p.parse_args(argv)
    show_notes()  # the library's notes on stderr while this tool runs
    if args.middlebury is not None:
        print(f"classical baseline on Middlebury: {middlebury_baseline(args.middlebury):.2f} dB")
        return 0
    if not args.data:
        p.error("--data is required (the footage folders)")
    if args.compile:  # said before any footage is read
        from softsplat_vfi.engine.interpolator import check_compile, resolve_device

        try:
            check_compile(resolve_device(device_for(args)))
        except ValueError as exc:
            print(f"error: {cli_message(exc)}", file=sys.stderr)
            return 2
    clips, triplets = load_holdout(args.data, neighbours=args.motion == "quadratic", triplet_set=args.set)
    flows = triplet_flows(triplets)
    base = baseline_scores(triplets, flows=flows)
    report = {"clips": sorted({c.name for c in clips}), "baseline": base.tolist(), "weights": {},
              "flow_scale": args.flow_scale, "ensemble": args.ensemble, "motion": args.motion, "set": args.set,
              "compile": args.compile}
    moved, base4 = "", None
    if args.motion == "quadratic":  # and a baseline that sees the same four frames, reported beside the two-frame one
        both = sum(tr.sides == "both" for tr in triplets)
        moved = (f" ({sum(tr.has_neighbours for tr in triplets)} with outer neighbours, {both} of them on both "
                 f"sides: quadratic paths)")
        base4 = baseline_scores(triplets, flows=flows, four_frames=True)
        report["baseline_four_frames"] = base4.tolist()
    print(f"{len(clips)} held-out clips, {len(triplets)} {args.set} triplets{moved}; "
          f"baseline {float(base.mean()):.3f} dB")
    if base4 is not None:
        print(f"four-frame classical baseline {float(base4.mean()):.3f} dB")
    for label, build in methods_of(args, HOLDOUT, args.weights, args.peer, args.hold_still):
        try:
            method = build()
        except ValueError as exc:  # a missing file or wheel names its fix
            print(f"error: {cli_message(exc)}", file=sys.stderr)
            return 2
        print(HOLDOUT.header(method), flush=True)
        details: List[float] = []
        scores = triplet_scores(method, triplets, details)
        if label in args.peer:
            _record(report.setdefault("peers", {}), label, scores, details, base, triplets, " (pair alone)")
            continue
        figures = _record(report["weights"], label, scores, details, base, triplets)
        report["weights"][label]["settings"] = method.settings
        print("  " + ", ".join(f"{k} {v:+.3f}" for k, v in figures.items() if k.startswith("margin_")))
        if base4 is not None:
            report["weights"][label]["figures_four_frames"] = figures4 = summary(scores, base4, triplets)
            print(f"  over the four-frame baseline: {describe(figures4)}")
    if args.json:
        report["triplets"] = [{"group": t.group, "clip": t.clip, "centre": t.centre, "gap": t.gap,
                               "quadratic": t.has_neighbours, "sides": t.sides} for t in triplets]
        args.json.write_text(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
