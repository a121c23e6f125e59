"""Session 37: the default's held-out margin per motion quartile beside session 30's two-frame bounds.

Reads two raw files already committed (no new inference): the default's CPU per-triplet scores from session 36's
flow-scale probe (`psnr_1.0`) and session 30's ceiling probe; both list the same 368 triplets in the same order
(their baselines agree to the last digit). Run from the repository root: python docs/journal/raw/probe_s37_default_vs_ceiling.py
"""

import json
import statistics
from pathlib import Path

RAW = Path(__file__).resolve().parent
default = json.loads((RAW / "flowscale2_s36_default_cpu.json").read_text())
ceiling = json.loads((RAW / "probe_s30_ceiling.json").read_text())
if [r["baseline"] for r in default] != ceiling["baseline"]:
    raise SystemExit("the two files do not list the same triplets")
edges = ceiling["quartile_edges_px"]
quartile = [sum(r["dis_p95"] >= e for e in edges) for r in default]
rows = {name: scores for name, scores in ceiling["scores"].items() if not name.startswith("network")}
rows["default (session 36, CPU)"] = [r["psnr_1.0"] for r in default]
print(f"{'interpolation':36s} {'all':>7s} {'t±1':>7s} {'t±2':>7s}  quartiles of DIS p95 (px: {', '.join(f'{e:.1f}' for e in edges)})")
for name, scores in rows.items():
    margin = [s - b for s, b in zip(scores, ceiling["baseline"])]
    gap = [r["gap"] for r in default]
    parts = [statistics.mean(m for m, g in zip(margin, gap) if g == k) for k in (1, 2)]
    quarts = [statistics.mean(m for m, q in zip(margin, quartile) if q == k) for k in range(4)]
    print(f"{name:36s} {statistics.mean(margin):+7.3f} {parts[0]:+7.3f} {parts[1]:+7.3f}  "
          + " ".join(f"{v:+.3f}" for v in quarts))
