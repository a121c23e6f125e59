"""Session 37: the rule for half-scale flow on large motion only. Per held-out triplet, "scale 0.5 where the own
forward-flow p95 at scale 1 exceeds T": margin gain overall, t±1, t±2, the worst clip, and T chosen on each half of
the source repositories and scored on the other. Full-scale scores and own_p95 from session 36's file, half-scale
scores from session 37's training.holdout --flow-scale 0.5 run (the same 368 triplets in the same order).

    python docs/journal/raw/probe_s37_flowscale05_rule.py
"""
import json
from collections import defaultdict
from pathlib import Path

RAW = Path(__file__).resolve().parent
rows = json.loads((RAW / "flowscale2_s36_default_cpu.json").read_text())
half = json.loads((RAW / "holdout_s37_default_flowscale05_cpu.json").read_text())
if max(abs(a - r["baseline"]) for a, r in zip(half["baseline"], rows)) > 1e-4:
    raise SystemExit("the two files list different triplets")
for r, s in zip(rows, half["weights"]["weights/network.safetensors"]["scores"]):
    r["psnr_0.5"] = s
TS = [16, 32, 48, 64, 96, 128, 0]  # 0: always


def repo(r):
    return r["clip"].split("/")[-1].split("__")[0]


def delta(r, T):
    return (r["psnr_0.5"] if r["own_p95"] > T else r["psnr_1.0"]) - r["psnr_1.0"]


def gain(rs, T, gap=None):
    rs = [r for r in rs if gap is None or r["gap"] == gap]
    return sum(delta(r, T) for r in rs) / len(rs)


repos = sorted({repo(r) for r in rows})
halves = [set(repos[0::2]), set(repos[1::2])]
print(f"{len(rows)} triplets, {len(repos)} repositories")
print("T (px; 0 = always) | triplets at 0.5 | gain | t±1 | t±2 | worst clip")
for T in TS:
    per = defaultdict(list)
    for r in rows:
        per[r["clip"]].append(delta(r, T))
    worst = min(per.items(), key=lambda kv: sum(kv[1]) / len(kv[1]))
    print(T, sum(r["own_p95"] > T for r in rows), f"{gain(rows, T):+.3f} {gain(rows, T, 1):+.3f} "
          f"{gain(rows, T, 2):+.3f}", worst[0], f"{sum(worst[1]) / len(worst[1]):+.3f}")
for i, h in enumerate(halves):
    pick = [r for r in rows if repo(r) in h]
    other = [r for r in rows if repo(r) not in h]
    best = max(TS, key=lambda T: gain(pick, T))
    print(f"half {i}: chooses T={best} (gain {gain(pick, best):+.3f}), on the other half {gain(other, best):+.3f}")
