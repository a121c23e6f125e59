"""The flow-scale-2 probe's rule (session 36): margin gain of "scale 2 where the own p95 < T" overall, on t±1 and
t±2, the worst clip, and T chosen on each half of the source repositories and scored on the other.

    python docs/journal/raw/probe_s36_flowscale2_rule.py docs/journal/raw/flowscale2_s36_default_cpu.json
"""
import json, sys
from collections import defaultdict
rows = json.load(open(sys.argv[1]))
TS = [2, 4, 8, 16, 32, float("inf")]
repo = lambda r: r["clip"].split("/")[-1].split("__")[0]
repos = sorted({repo(r) for r in rows})
halves = [set(repos[0::2]), set(repos[1::2])]
def gain(rs, T, key=None):
    rs = [r for r in rs if key is None or r["gap"] == key]
    if not rs: return float("nan")
    return sum((r["psnr_2.0"] if r["own_p95"] < T else r["psnr_1.0"]) - r["psnr_1.0"] for r in rs) / len(rs)
print(f"{len(rows)} triplets, {len(repos)} repositories")
print("T | triplets at 2 | gain | t±1 | t±2 | worst clip")
for T in TS:
    per = defaultdict(list)
    for r in rows: per[r["clip"]].append((r["psnr_2.0"] if r["own_p95"] < T else r["psnr_1.0"]) - r["psnr_1.0"])
    worst = min(per.items(), key=lambda kv: sum(kv[1]) / len(kv[1]))
    print(T, sum(r["own_p95"] < T for r in rows), f"{gain(rows, T):+.3f} {gain(rows, T, 1):+.3f} {gain(rows, T, 2):+.3f}",
          worst[0], f"{sum(worst[1]) / len(worst[1]):+.3f}")
for i, h in enumerate(halves):
    pick = [r for r in rows if repo(r) in h]; other = [r for r in rows if repo(r) not in h]
    best = max(TS, key=lambda T: gain(pick, T))
    print(f"half {i}: chooses T={best} (gain {gain(pick, best):+.3f}), on the other half {gain(other, best):+.3f}")
