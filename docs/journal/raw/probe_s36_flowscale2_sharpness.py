"""Diagnostic (session 36, chooses nothing): does the flow-scale-2 gain on small-motion held-out triplets grow with
the frames' sharpness (mean absolute Laplacian of the middle frame's grey image, 0-255 scale)?"""
import json, statistics as st
import numpy as np, cv2
from pathlib import Path
from training.holdout import load_holdout
rows = json.load(open("docs/journal/raw/flowscale2_s36_default_cpu.json"))
_, triplets = load_holdout([Path("../shared/data/footage"), Path("../shared/data/footage2")])
assert len(triplets) == len(rows) and all(t.clip == r["clip"] for t, r in zip(triplets, rows))
for t, r in zip(triplets, rows):
    g = cv2.cvtColor(t.mid.permute(1, 2, 0).numpy(), cv2.COLOR_RGB2GRAY).astype(np.float32)
    r["sharpness"] = float(np.abs(cv2.Laplacian(g, cv2.CV_32F)).mean())
small = sorted((r for r in rows if r["own_p95"] < 8), key=lambda r: r["sharpness"])
q = len(small) // 4
for i in range(4):
    part = small[i * q:(i + 1) * q] if i < 3 else small[3 * q:]
    print(f"quarter {i + 1}: sharpness {part[0]['sharpness']:.1f}-{part[-1]['sharpness']:.1f}, {len(part)} triplets, "
          f"{len({r['clip'] for r in part})} clips, scale-2 gain {st.mean(r['psnr_2.0'] - r['psnr_1.0'] for r in part):+.3f}")
print("all 368 by sharpness quarter (gain of scale 2 everywhere):")
allr = sorted(rows, key=lambda r: r["sharpness"]); q = len(allr) // 4
for i in range(4):
    part = allr[i * q:(i + 1) * q]
    print(f"  {part[0]['sharpness']:.1f}-{part[-1]['sharpness']:.1f}: {st.mean(r['psnr_2.0'] - r['psnr_1.0'] for r in part):+.3f}, "
          f"median own p95 {st.median(r['own_p95'] for r in part):.1f}")
