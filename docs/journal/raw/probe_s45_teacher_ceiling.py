"""Session 45: the distillation teacher's flows at the output (CPU, the default weights, standard held-out set).

Per triplet (two frames, t = 0.5, constant velocity, flow at scale 1): PSNR of the student's output, of the output
rendered with the teacher's flows to t everywhere, and with the distillation's target (the teacher's flow where it
warps the middle frame closer to the frame, the student's elsewhere). The reading is in the journal (session 45).

    PYTHONPATH=. python docs/journal/raw/probe_s45_teacher_ceiling.py ../shared/data/footage ../shared/data/footage2
"""
import json
import sys
from pathlib import Path

import torch

from model.warp import InputPadder, backwarp
from model.weights import load_weights
from training.holdout import load_holdout
from training.losses import psnr

torch.set_grad_enabled(False)
net = load_weights("weights/network.safetensors", torch.device("cpu")).eval()
_, triplets = load_holdout([Path(p) for p in sys.argv[1:]])
level = net.config.flow_finest_level
rows = []
for k, tr in enumerate(triplets):
    one, mid, two = (x.float().div(255).unsqueeze(0) for x in (tr.one, tr.mid, tr.two))
    padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
    one_p, two_p, mid_p = padder.pad(one, two, mid)
    state = net.estimate_flow(one_p, two_p)
    to_one, to_two = net.paths(state, 0.5)
    student = torch.cat([to_one, to_two])
    target_feats = net.encoder(mid_p)[level]
    teacher = net.flow.refine(torch.cat([state.feats_one[level], state.feats_two[level]]),
                              torch.cat([target_feats, target_feats]), student)
    frames, mids = torch.cat([one_p, two_p]), torch.cat([mid_p, mid_p])
    better = ((frames - backwarp(mids, teacher, "border")).abs().mean(1, keepdim=True)
              < (frames - backwarp(mids, student, "border")).abs().mean(1, keepdim=True))
    masked = torch.where(better, teacher, student)
    scores = []
    for flows in (student, teacher, masked):
        out = padder.unpad(net.render(state, flows[:1], flows[1:], 0.5))
        scores.append(float(psnr(out.clamp(0, 1), mid)))
    rows.append({"clip": tr.clip, "gap": tr.gap, "centre": tr.centre, "student": scores[0], "teacher": scores[1],
                 "target": scores[2], "better_share": float(better.float().mean())})
    if k % 20 == 0:
        print(k, rows[-1], flush=True)


def mean(key, keep=lambda r: True):
    vals = [r[key] for r in rows if keep(r)]
    return sum(vals) / len(vals)


for name, keep in (("all", lambda r: True), ("t±1", lambda r: r["gap"] == 1), ("t±2", lambda r: r["gap"] >= 2)):
    print(f"{name}: student {mean('student', keep):.3f} dB; teacher everywhere {mean('teacher', keep) - mean('student', keep):+.3f}; "
          f"target {mean('target', keep) - mean('student', keep):+.3f}; teacher better on {mean('better_share', keep):.1%} of pixels")
Path("docs/journal/raw/probe_s45_teacher_ceiling.json").write_text(json.dumps(rows) + "\n")
