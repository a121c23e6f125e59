"""Session 50 probe (rule T, docs/journal/scaling-study.md): does fine-tuning the default weights on a held-out
clip's own frames raise their PSNR on that clip's other frames? For each held-out clip, the weights are fine-tuned
on one half of its frames and score the standard set's two-frame triplets centred in the other half (t = 0.5,
scale 1); no evaluated middle frame, nor any frame within 2 of one, is seen by the fine-tuning.

    python docs/journal/raw/probe_s50_adapt.py FOOTAGE FOOTAGE2 OUT.json [--device cuda] [--steps 100] [--checkpoints 50]
        [--rates 1e-5 5e-5] [--clips A:B]
    python docs/journal/raw/probe_s50_adapt.py --join PART.json [PART.json ...]   # the gains over parts' rows
"""

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import torch

from model.weights import load_weights
from training.data import Clip, clean_span
from training.holdout import Triplet, load_holdout, network_scores
from training.losses import psnr_loss

GUARD = 3  # frames left out on either side of the clip's middle: no adapted frame lies within 2 of an evaluated one
CROP = 256
BATCH = 8


def halves(clip: Clip) -> Tuple[range, range]:
    """The frames each half's fine-tuning may use: [0, half - GUARD) and [half + GUARD, n)."""
    n = clip.frames.shape[0]
    half = n // 2
    return range(0, max(0, half - GUARD)), range(min(n, half + GUARD), n)


def samples(clip: Clip, frames: range) -> List[Tuple[int, int]]:
    """(centre, gap) of every clean triplet of gap 1 or 2 inside ``frames``."""
    return [(j, k) for k in (1, 2) for j in range(frames.start + k, frames.stop - k) if clean_span(clip, j - k, j + k)]


def batch(clip: Clip, pool: Sequence[Tuple[int, int]], rng: random.Random, device: torch.device):
    """BATCH random crops of triplets from ``pool``, flipped left-right and reversed in time at random."""
    h, w = clip.frames.shape[2:]
    ones, mids, twos = [], [], []
    for _ in range(BATCH):
        j, k = rng.choice(pool)
        y, x = rng.randrange(h - CROP + 1), rng.randrange(w - CROP + 1)
        one, mid, two = (clip.frames[i, :, y:y + CROP, x:x + CROP] for i in (j - k, j, j + k))
        if rng.random() < 0.5:
            one, mid, two = (f.flip(-1) for f in (one, mid, two))
        if rng.random() < 0.5:
            one, two = two, one
        ones.append(one), mids.append(mid), twos.append(two)
    return [torch.stack(f).to(device).float().div(255) for f in (ones, mids, twos)]


def adapt(net, start: Dict[str, torch.Tensor], clip: Clip, pool, rate: float, steps: int, checkpoints: Sequence[int],
          triplets: List[Triplet], device: torch.device, seed: int) -> Tuple[Dict[int, torch.Tensor], float]:
    """Fine-tune ``net`` (reset to ``start``) on ``pool`` and score ``triplets`` at each checkpoint step."""
    net.load_state_dict(start)
    net.train()
    optim = torch.optim.Adam(net.parameters(), lr=rate)
    rng = random.Random(seed)
    scores, seconds = {}, 0.0
    for step in range(1, steps + 1):
        began = time.perf_counter()
        one, mid, two = batch(clip, pool, rng, device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            state = net.estimate_flow(one, two)
            pred = net.synthesize(state, 0.5)
        loss = psnr_loss(pred.float(), mid)
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        optim.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds += time.perf_counter() - began
        if step in checkpoints:
            net.eval()
            scores[step] = network_scores(net, triplets, device, torch.bfloat16 if device.type == "cuda" else None)
            net.train()
    net.eval()
    return scores, seconds


def summarise(rows: List[dict], key: str) -> Dict[str, float]:
    def mean(values):
        return sum(values) / len(values) if values else float("nan")
    return {"gain": mean([r[key] - r["before"] for r in rows]),
            "gain_t1": mean([r[key] - r["before"] for r in rows if r["gap"] == 1]),
            "gain_t2": mean([r[key] - r["before"] for r in rows if r["gap"] >= 2]),
            "triplets": len(rows)}


def join(paths: Sequence[Path]) -> None:
    """Print each rate's gains over the rows of several parts of one probe (split by --clips)."""
    rows = [r for path in paths for r in json.loads(Path(path).read_text())["rows"]]
    for rate in sorted({r["rate"] for r in rows}):
        mine = [r for r in rows if r["rate"] == rate]
        steps = sorted(int(k.split("_")[1]) for k in mine[0] if k.startswith("after_"))
        clips = len({(r["group"], r["clip"]) for r in mine})
        for s in steps:
            print(f"lr {rate:g}, {s} steps, {clips} clips: {summarise(mine, f'after_{s}')}")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--join":
        join([Path(a) for a in sys.argv[2:]])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("footage", type=Path)
    parser.add_argument("footage2", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--weights", default="weights/network.safetensors")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--checkpoints", type=int, nargs="*", help="steps scored besides the last (default: half)")
    parser.add_argument("--rates", type=float, nargs="+", default=[1e-5, 5e-5])
    parser.add_argument("--clips", default=":", help="a slice A:B of the held-out clips (a smoke test, or one call's "
                        "share of a probe split over calls)")
    args = parser.parse_args()
    device = torch.device(args.device)
    clips, triplets = load_holdout([args.footage, args.footage2])
    first, _, last = args.clips.partition(":")
    offset = int(first or 0)  # seeds follow the clip's place among all held-out clips, however the probe is split
    clips = clips[offset:int(last) if last else None]
    net = load_weights(args.weights, device).eval()
    start = {k: v.clone() for k, v in net.state_dict().items()}
    checkpoints = sorted({s for s in args.checkpoints if 0 < s < args.steps} | {args.steps}) if args.checkpoints \
        else sorted({max(1, args.steps // 2), args.steps})
    rows: List[dict] = []
    report = {"rates": args.rates, "steps": args.steps, "rows": rows, "summary": {}, "seconds": {}}
    for rate in args.rates:
        spent = []
        for c, clip in enumerate(clips):
            mine = [tr for tr in triplets if tr.clip == clip.name and tr.group == clip.group]
            first, second = halves(clip)
            half = clip.frames.shape[0] // 2
            for use, evaluated in ((first, [tr for tr in mine if tr.centre >= half]),
                                   (second, [tr for tr in mine if tr.centre < half])):
                pool = samples(clip, use)
                if not evaluated or not pool:
                    continue
                net.load_state_dict(start)
                before = network_scores(net, evaluated, device, torch.bfloat16 if device.type == "cuda" else None)
                scores, seconds = adapt(net, start, clip, pool, rate, args.steps, checkpoints, evaluated, device,
                                        seed=1000 * (c + offset) + use.start)
                spent.append(seconds)
                for n, tr in enumerate(evaluated):
                    rows.append({"rate": rate, "clip": tr.clip, "group": tr.group, "centre": tr.centre, "gap": tr.gap,
                                 "before": float(before[n]),
                                 **{f"after_{s}": float(scores[s][n]) for s in checkpoints}})
            done = [r for r in rows if r["rate"] == rate]
            report["summary"][str(rate)] = {str(s): summarise(done, f"after_{s}") for s in checkpoints}
            report["seconds"][str(rate)] = sum(spent) / max(1, len(spent))
            args.out.write_text(json.dumps(report) + "\n")
            print(f"lr {rate:g} clip {c + 1}/{len(clips)}: {report['summary'][str(rate)]} "
                  f"{report['seconds'][str(rate)]:.1f} s per adaptation", flush=True)


if __name__ == "__main__":
    main()
