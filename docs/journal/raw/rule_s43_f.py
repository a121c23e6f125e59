"""Session 43's rule F on the H200 files (bf16, quadratic paths): the fast weights with --flow-scale auto against
scale 1 per set (gain overall, t±1, t±2, worst clips), and the video tool's 1080p x2 frame rate with each.

    python3 docs/journal/raw/rule_s43_f.py
"""
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

RAW = Path(__file__).resolve().parent
load = lambda name: json.loads((RAW / name).read_text())  # noqa: E731

for name in ("standard", "fresh", "quarter"):
    runs = {scale: load(f"holdout_s43_quadratic_{name}_fast{suffix}.json") for scale, suffix in (("1", ""), ("auto", "_auto"))}
    keys = {scale: [(t["clip"], t["gap"], t["centre"]) for t in r["triplets"]] for scale, r in runs.items()}
    assert keys["1"] == keys["auto"]
    (one,), (auto,) = (list(runs[s]["weights"].values()) for s in ("1", "auto"))
    gain = np.array(auto["scores"]) - np.array(one["scores"])
    gap1 = np.array([k[1] == 1 for k in keys["1"]])
    clips = defaultdict(list)
    for k, g in zip(keys["1"], gain):
        clips[k[0]].append(g)
    worst = sorted((float(np.mean(v)), c) for c, v in clips.items())[:3]
    f1, fa = one["figures"], auto["figures"]
    print(f"{name:8s} {gain.size} triplets: margin {f1['margin']:+.3f} -> {fa['margin']:+.3f} (t±2 {f1['margin_t2']:+.3f}"
          f" -> {fa['margin_t2']:+.3f}); gain {gain.mean():+.3f}, t±1 {gain[gap1].mean():+.3f}, t±2 "
          f"{gain[~gap1].mean():+.3f}; {int((abs(gain) > 1e-3).sum())} changed; worst clips "
          + ", ".join(f"{c} {g:+.3f}" for g, c in worst))

fps = defaultdict(list)
for row in load("s43_video_fast_flowscale_h200.json"):
    fps[str(row["flow_scale"])].append(row["pipeline_fps"])
print("video tool, fast, 1080p x2, bf16, output frames/s:", dict(fps),
      f"auto / scale 1 = {np.mean(fps['auto']) / np.mean(fps['1.0']):.3f}")
