"""The reading of session 38's quadratic probe (scaling-study.md), from probe_s38_quadratic.json.

    python docs/journal/raw/probe_s38_quadratic_rule.py
"""
import json
from collections import defaultdict
from pathlib import Path

raw = Path(__file__).parent
rows = json.load(open(raw / "probe_s38_quadratic.json"))
repo = {}
for folder in ("footage", "footage2"):
    for line in open(Path("../shared/data") / folder / "clips.jsonl"):
        entry = json.loads(line)
        repo[Path(entry["file"]).name] = str(entry.get("source", "")).split("@")[0].strip()
repos = sorted({repo[Path(r["clip"]).name] for r in rows})
halves = [set(repos[0::2]), set(repos[1::2])]


def gain(rs, name):
    return sum(r[name] - r["linear"] for r in rs) / len(rs) if rs else float("nan")


for name in ("quadratic", "quadratic_smooth"):
    print(f"{name}: {len(rows)} triplets, {len(repos)} repositories")
    print(f"  all {gain(rows, name):+.3f}, t±1 {gain([r for r in rows if r['gap'] == 1], name):+.3f}, "
          f"t±2 {gain([r for r in rows if r['gap'] >= 2], name):+.3f}")
    for h, half in enumerate(halves):
        print(f"  half {h} ({len(half)} repositories): {gain([r for r in rows if repo[Path(r['clip']).name] in half], name):+.3f}")
    per_clip = defaultdict(list)
    for r in rows:
        per_clip[r["clip"]].append(r[name] - r["linear"])
    clip_sum = {c: sum(v) for c, v in per_clip.items()}
    best = max(clip_sum, key=clip_sum.get)
    print(f"  best clip {best} ({len(per_clip[best])} triplets, mean {clip_sum[best] / len(per_clip[best]):+.3f}); "
          f"without it {gain([r for r in rows if r['clip'] != best], name):+.3f}")
    worst = sorted(clip_sum, key=lambda c: clip_sum[c] / len(per_clip[c]))[:3]
    print("  worst clips: " + ", ".join(f"{c} {clip_sum[c] / len(per_clip[c]):+.3f}" for c in worst))
    gains = sorted(r[name] - r["linear"] for r in rows)
    print(f"  median {gains[len(gains) // 2]:+.3f}; triplets gaining {sum(g > 0 for g in gains)} of {len(gains)}")
