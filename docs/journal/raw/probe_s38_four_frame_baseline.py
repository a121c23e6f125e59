"""Session 38: the four-frame classical baseline (training.holdout's, as --motion quadratic reports it) on the
held-out set, against the default's quadratic per-triplet scores of holdout_s38_default_quadratic_cpu.json (the
network is not run again: same triplets, same order).

    PYTHONPATH=. python docs/journal/raw/probe_s38_four_frame_baseline.py
"""
import json
from pathlib import Path

import torch

from training.holdout import baseline_scores, describe, load_holdout, summary, triplet_flows

raw = Path(__file__).parent
report = json.loads((raw / "holdout_s38_default_quadratic_cpu.json").read_text())
clips, triplets = load_holdout([Path("../shared/data/footage"), Path("../shared/data/footage2")], neighbours=True)
assert [(t.clip, t.centre, t.gap) for t in triplets] == [(t["clip"], t["centre"], t["gap"]) for t in report["triplets"]]
flows = triplet_flows(triplets)
base = baseline_scores(triplets, flows=flows)
base4 = baseline_scores(triplets, flows=flows, four_frames=True)
print(f"two-frame baseline {float(base.mean()):.3f} dB (report: {sum(report['baseline']) / len(report['baseline']):.3f}); "
      f"four-frame baseline {float(base4.mean()):.3f} dB")
scores = torch.tensor(report["weights"]["weights/network.safetensors"]["scores"])
print("default, quadratic, over the two-frame baseline:", describe(summary(scores, base, triplets)))
print("default, quadratic, over the four-frame baseline:", describe(summary(scores, base4, triplets)))
print("four-frame baseline over the two-frame one:", describe(summary(base4, base, triplets)))
json.dump({"baseline": base.tolist(), "baseline_four_frames": base4.tolist()},
          open(raw / "probe_s38_four_frame_baseline.json", "w"))
