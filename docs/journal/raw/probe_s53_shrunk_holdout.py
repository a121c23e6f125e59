"""Diagnostic (session 53, chooses nothing): the standard held-out triplets with every frame shrunk by 2 (OpenCV
INTER_AREA): sharpness quartiles, the classical baseline, and two-frame margins of the weights named, on the CPU.

    PYTHONPATH=. python docs/journal/raw/probe_s53_shrunk_holdout.py OUT.json W1 W2 ...
"""
import dataclasses
import json
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch

from model.weights import load_weights
from training.holdout import baseline_scores, load_holdout, network_scores, summary


def shrink(frame: torch.Tensor) -> torch.Tensor:
    """3 x H x W uint8 -> 3 x H/2 x W/2 uint8 (INTER_AREA)."""
    h, w = frame.shape[1:]
    image = cv2.resize(frame.permute(1, 2, 0).numpy(), (w // 2, h // 2), interpolation=cv2.INTER_AREA)
    return torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).contiguous()


def sharpness(frame: torch.Tensor) -> float:
    grey = cv2.cvtColor(frame.permute(1, 2, 0).numpy(), cv2.COLOR_RGB2GRAY).astype(np.float32)
    return float(np.abs(cv2.Laplacian(grey, cv2.CV_32F)).mean())


out_path, weights = Path(sys.argv[1]), sys.argv[2:]
_, full = load_holdout([Path("../shared/data/footage"), Path("../shared/data/footage2")])
small = [dataclasses.replace(t, one=shrink(t.one), mid=shrink(t.mid), two=shrink(t.two)) for t in full]
report = {"triplets": len(small), "sharpness": {}}
for name, triplets in (("full", full), ("shrunk", small)):
    values = np.array([sharpness(t.mid) for t in triplets])
    report["sharpness"][name] = [round(float(q), 2) for q in np.quantile(values, [0, 0.25, 0.5, 0.75, 1])]
    print(f"{name}: sharpness min/q1/median/q3/max {report['sharpness'][name]}", flush=True)
base = baseline_scores(small)
report["baseline"] = base.tolist()
print(f"shrunk set: {len(small)} triplets, baseline {float(base.mean()):.3f} dB", flush=True)
report["weights"] = {}
for path in weights:
    start = time.time()
    net = load_weights(Path(path), torch.device("cpu")).eval()
    scores = network_scores(net, small, torch.device("cpu"))
    figures = summary(scores, base, small)
    report["weights"][path] = {"figures": figures, "scores": scores.tolist(), "seconds": round(time.time() - start)}
    print(f"{path}: margin {figures['margin']:+.3f} (t±1 {figures['margin_t1']:+.3f}, t±2 {figures['margin_t2']:+.3f}); "
          f"network {figures['holdout_psnr']:.3f} dB; {time.time() - start:.0f} s", flush=True)
    out_path.write_text(json.dumps(report) + "\n")
