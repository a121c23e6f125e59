"""Session 41: rules A and B of docs/journal/scaling-study.md on probe_s41_flowscale.py's per-triplet files.

A: "scale 0.5 where own p95 > T" on the standard set (T chosen per half of the source repositories and on all),
   confirmed on the fresh set. B: "scale 2 where own p95 < 8 px and input sharpness >= 4.6" on the fresh set, with
   the standard set's overall gain. Each for constant velocity (lin) and quadratic paths (quad; triplets without
   outer neighbours take their linear scores, as training.holdout does).

    python docs/journal/raw/probe_s41_flowscale_rule.py
"""
import json
from collections import defaultdict
from pathlib import Path
from statistics import mean

RAW = Path(__file__).resolve().parent
SETS = {name: json.loads((RAW / f"probe_s41_flowscale_{name}.json").read_text()) for name in ("standard", "fresh")}
TS = [16, 32, 48, 64, 96, 128, 0]  # 0: always


def score(r, motion, scale):
    return r.get(f"{motion}_{scale}", r[f"lin_{scale}"])


def repo(r):
    return r["clip"].split("/")[-1].split("__")[0]


def switch_a(T):
    return lambda r: T == 0 or r["own_p95"] > T


def switch_b(r):
    return r["own_p95"] < 8 and r["sharp_in"] >= 4.6


def deltas(rows, motion, picks, scale):
    return [(score(r, motion, scale) if picks(r) else score(r, motion, 1.0)) - score(r, motion, 1.0) for r in rows]


def report(rows, motion, picks, scale):
    d = deltas(rows, motion, picks, scale)
    per = defaultdict(list)
    for r, x in zip(rows, d):
        per[r["clip"]].append(x)
    worst = min(per.items(), key=lambda kv: mean(kv[1]))
    chosen = [x for r, x in zip(rows, d) if picks(r)]
    return {"picked": len(chosen), "clips": len({r["clip"] for r in rows if picks(r)}),
            "gain": mean(d), "t1": mean(x for r, x in zip(rows, d) if r["gap"] == 1),
            "t2": mean(x for r, x in zip(rows, d) if r["gap"] >= 2),
            "picked_gain": mean(chosen) if chosen else 0.0, "worst": (worst[0], mean(worst[1])),
            "margin": mean(score(r, motion, 1.0) - r["baseline"] for r in rows)}


def line(label, f):
    return (f"{label}: {f['picked']} picked ({f['clips']} clips), gain {f['gain']:+.3f} (t±1 {f['t1']:+.3f}, "
            f"t±2 {f['t2']:+.3f}), picked {f['picked_gain']:+.3f}, worst clip {f['worst'][0]} {f['worst'][1]:+.3f}")


for motion in ("lin", "quad"):
    std, fresh = SETS["standard"], SETS["fresh"]
    print(f"== {motion}: margin at scale 1, standard {report(std, motion, switch_b, 2.0)['margin']:+.3f}, "
          f"fresh {report(fresh, motion, switch_b, 2.0)['margin']:+.3f}")
    print("rule A (standard set): scale 0.5 where own p95 > T")
    for T in TS:
        print("  " + line(f"T={T}", report(std, motion, switch_a(T), 0.5)))
    repos = sorted({repo(r) for r in std})
    halves = [set(repos[0::2]), set(repos[1::2])]
    transfer = []
    for i, h in enumerate(halves):
        pick = [r for r in std if repo(r) in h]
        other = [r for r in std if repo(r) not in h]
        best = max(TS, key=lambda T: report(pick, motion, switch_a(T), 0.5)["gain"])
        g = report(other, motion, switch_a(best), 0.5)["gain"]
        transfer.append(g)
        print(f"  half {i}: chooses T={best}, on the other half {g:+.3f}")
    best = max(TS, key=lambda T: report(std, motion, switch_a(T), 0.5)["gain"])
    f = report(std, motion, switch_a(best), 0.5)
    conf = report(fresh, motion, switch_a(best), 0.5)
    ok = (all(g > 0 for g in transfer) and f["gain"] >= 0.03 and f["t1"] >= 0 and f["t2"] >= 0
          and f["worst"][1] >= -0.05 and conf["gain"] >= 0)
    print("  " + line(f"fresh set at T={best}", conf))
    print(f"  rule A for {motion}: {'PASSES' if ok else 'fails'}")
    print("rule B: scale 2 where own p95 < 8 and input sharpness >= 4.6")
    fb, sb = report(fresh, motion, switch_b, 2.0), report(std, motion, switch_b, 2.0)
    print("  " + line("fresh", fb))
    print("  " + line("standard", sb))
    ok = (fb["picked_gain"] >= 0.03 and fb["clips"] >= 3 and fb["gain"] >= 0 and fb["t1"] >= -0.005
          and fb["t2"] >= -0.005 and fb["worst"][1] >= -0.05 and sb["gain"] >= 0)
    print(f"  rule B for {motion}: {'PASSES' if ok else 'fails'}")
