"""Session 43's rule F, applied to the held-out files scored on the H200 (bf16, along quadratic paths): the fast
weights with ``--flow-scale auto`` against scale 1, per set; gain overall, t±1, t±2, worst clips; and the video
tool's 1080p x2 frame rate with each.

    python3 docs/journal/raw/rule_s43_f.py
"""
import collections
import json
from pathlib import Path

import numpy as np

RAW = Path(__file__).resolve().parent


def scores(name: str):
    report = json.loads((RAW / name).read_text())
    (entry,) = report["weights"].values()
    return np.array(entry["scores"]), report["triplets"], entry["figures"]


for name in ("standard", "fresh", "quarter"):
    auto, triplets, fig_auto = scores(f"holdout_s43_quadratic_{name}_fast_auto.json")
    one, same, fig_one = scores(f"holdout_s43_quadratic_{name}_fast.json")
    assert [(t["clip"], t["gap"], t["centre"]) for t in triplets] == [(t["clip"], t["gap"], t["centre"]) for t in same]
    gain = auto - one
    adjacent = np.array([t["gap"] == 1 for t in triplets])
    per_clip = collections.defaultdict(list)
    for t, g in zip(triplets, gain):
        per_clip[t["clip"]].append(g)
    worst = sorted((float(np.mean(v)), clip) for clip, v in per_clip.items())[:3]
    print(f"{name:8s} {len(gain)} triplets: margin {fig_one['margin']:+.3f} -> {fig_auto['margin']:+.3f} "
          f"(t±2 {fig_one['margin_t2']:+.3f} -> {fig_auto['margin_t2']:+.3f}); gain {gain.mean():+.3f}, "
          f"t±1 {gain[adjacent].mean():+.3f}, t±2 {gain[~adjacent].mean():+.3f}; "
          f"{int((np.abs(gain) > 1e-3).sum())} changed; worst clips " + ", ".join(f"{c} {g:+.3f}" for g, c in worst))

rows = json.loads((RAW / "s43_video_fast_flowscale_h200.json").read_text())
fps = collections.defaultdict(list)
for row in rows:
    fps[str(row["flow_scale"])].append(row["pipeline_fps"])
print("video tool, fast, 1080p x2, bf16, output frames/s:", dict(fps),
      f"auto / scale 1 = {np.mean(fps['auto']) / np.mean(fps['1.0']):.3f}")
