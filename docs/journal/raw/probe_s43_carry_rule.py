"""Session 43's rules K and V, applied to probe_s43_carry.py's files (H200, bf16, --flow-scale auto): validity
against the committed holdout files, then K - P on one-sided triplets and V - P on both-sided ones, per set.

    python3 docs/journal/raw/probe_s43_carry_rule.py
"""
import collections
import json
from pathlib import Path

import numpy as np

RAW = Path(__file__).resolve().parent


def report(rows, a: str, b: str, label: str) -> None:
    if not rows:
        print(f"  {label}: no triplets")
        return
    gain = np.array([r[a] - r[b] for r in rows])
    gap1 = np.array([r["gap"] == 1 for r in rows])
    repos = sorted({r["clip"].split("__")[0] for r in rows})
    half = np.array([repos.index(r["clip"].split("__")[0]) % 2 for r in rows])
    per_clip = collections.defaultdict(list)
    for r, g in zip(rows, gain):
        per_clip[r["clip"]].append(g)
    worst = sorted((float(np.mean(v)), c) for c, v in per_clip.items())[:3]

    def mean(mask) -> str:
        return f"{gain[mask].mean():+.3f}" if mask.any() else "n/a"

    print(f"  {label} ({len(rows)}): {a} - {b} {gain.mean():+.3f}, t±1 {mean(gap1)}, t±2 {mean(~gap1)}, "
          f"halves {mean(half == 0)} / {mean(half == 1)}; clips {len(per_clip)}, worst "
          + ", ".join(f"{c} {g:+.3f}" for g, c in worst))


for name in ("standard", "quarter", "fresh"):
    rows = json.loads((RAW / f"probe_s43_carry_{name}.json").read_text())
    held = json.loads((RAW / f"holdout_s42_quadratic_{name}_auto.json").read_text())
    (entry,) = held["weights"].values()
    scores = entry["scores"]
    assert [(t["clip"], t["gap"], t["centre"]) for t in held["triplets"]] == [(r["clip"], r["gap"], r["centre"])
                                                                           for r in rows]
    diffs = np.array([(r["P"] if t["quadratic"] else r["L"]) - s for r, t, s in zip(rows, held["triplets"], scores)])
    both = [r for r in rows if r["sides"] == "both"]
    one = [r for r in rows if r["sides"] in ("before", "after")]
    base = np.array(held["baseline"])
    print(f"{name}: {len(rows)} triplets ({len(both)} both sides, {len(one)} one, "
          f"{len(rows) - len(both) - len(one)} none); validity: mean |diff| {np.abs(diffs).mean():.4f}, "
          f"largest {np.abs(diffs).max():.4f} dB")
    report(one, "K", "P", "one side, K")
    report(one, "P", "L", "one side, P (for the record)")
    report(both, "V", "P", "both sides, V")
    for method in ("P", "K"):  # the margin as the video tool would score with it, every triplet
        net = np.array([r[method] if r["sides"] != "none" and method in r else r["L"] for r in rows])
        m = net - base
        gap1 = np.array([r["gap"] == 1 for r in rows])
        print(f"  margin with {method} on every side: {m.mean():+.3f} (t±1 {m[gap1].mean():+.3f}, "
              f"t±2 {m[~gap1].mean():+.3f}); committed file (one-sided at constant velocity) "
              f"{entry['figures']['margin']:+.3f} (t±2 {entry['figures']['margin_t2']:+.3f})")
