"""Session 41, rule C of docs/journal/scaling-study.md: pairs with own p95 > 32 px take scale 0.5 where its
photometric error is lower than scale 1's; per set and motion: gain overall, t±1, t±2, worst clip. Also shown, not
deciding: the same check on every pair (no motion threshold).

    python docs/journal/raw/probe_s41_photometric_rule.py
"""
import json
from collections import defaultdict
from pathlib import Path
from statistics import mean

RAW = Path(__file__).resolve().parent


def load(name):
    rows = json.loads((RAW / f"probe_s41_flowscale_{name}.json").read_text())
    errs = {(r["clip"], r["gap"], r["centre"]): r for r in json.loads((RAW / f"probe_s41_photometric_{name}.json").read_text())}
    if len(errs) != len(rows):
        raise SystemExit(f"{name}: the two files list different triplets")
    for r in rows:
        r.update(errs[(r["clip"], r["gap"], r["centre"])])
    return rows


def score(r, motion, scale):
    return r.get(f"{motion}_{scale}", r[f"lin_{scale}"])


def figures(rows, motion, picks):
    d = [(score(r, motion, 0.5) if picks(r) else score(r, motion, 1.0)) - score(r, motion, 1.0) for r in rows]
    per = defaultdict(list)
    for r, x in zip(rows, d):
        per[r["clip"]].append(x)
    worst = min(per.items(), key=lambda kv: mean(kv[1]))
    chosen = [x for r, x in zip(rows, d) if picks(r)]
    return (mean(d), mean(x for r, x in zip(rows, d) if r["gap"] == 1),
            mean(x for r, x in zip(rows, d) if r["gap"] >= 2), worst, len(chosen), mean(chosen) if chosen else 0.0)


rule = lambda r: r["own_p95"] > 32 and r["err_0.5"] < r["err_1.0"]  # noqa: E731
everywhere = lambda r: r["err_0.5"] < r["err_1.0"]  # noqa: E731
oracle = lambda r: r["own_p95"] > 32 and r["lin_0.5"] > r["lin_1.0"]  # noqa: E731
sets = {name: load(name) for name in ("standard", "fresh")}
for motion in ("lin", "quad"):
    verdict = True
    for name, rows in sets.items():
        for label, picks in (("rule C", rule), ("(every pair, not deciding)", everywhere),
                             ("(the better scale by the ground truth above 32 px, a bound)", oracle)):
            g, t1, t2, worst, n, pg = figures(rows, motion, picks)
            print(f"{motion} {name} {label}: {n} switched (their gain {pg:+.3f}), gain {g:+.3f} (t±1 {t1:+.3f}, "
                  f"t±2 {t2:+.3f}), worst clip {worst[0]} {mean(worst[1]):+.3f}")
            if label == "rule C":
                verdict &= g >= 0.03 and t1 >= 0 and t2 >= 0 and mean(worst[1]) >= -0.05
    print(f"rule C for {motion}: {'PASSES' if verdict else 'fails'}")
