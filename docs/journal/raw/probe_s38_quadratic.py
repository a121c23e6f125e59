"""Probe (session 38): quadratic motion from four frames (QVI's formula: Xu et al., NeurIPS 2019) with the default
weights and no training, against the network's own constant-velocity synthesis, per held-out triplet.

For a triplet (i - k, i, i + k) whose outer neighbours i - 3k and i + 3k exist (no cut, no repeated frame between),
the network estimates flow for the pair (I0, I1) and for (I0, I-1) and (I1, I2); the flows to t = 0.5 become
f_0t = (f01 + f0-1) / 2 t^2 + (f01 - f0-1) / 2 t and f_1t = (f10 + f12) / 2 (1-t)^2 + (f10 - f12) / 2 (1-t), and the
frames and features are splatted along them with the pair's own metrics and decoded as the network does at t. Three
syntheses per triplet: linear (the network as shipped), quadratic, and quadratic with the acceleration term
(f01 + f0-1, f10 + f12) averaged over 15 x 15 px. CPU, fp32.

    PYTHONPATH=. python docs/journal/raw/probe_s38_quadratic.py [LIMIT] [OUT.json]
"""
import json, sys, time
from pathlib import Path

import torch
import torch.nn.functional as F

from model.synthesis import splat_pyramid
from model.warp import InputPadder
from model.weights import load_weights
from training.data import clean_span
from training.holdout import load_holdout
from training.losses import psnr

torch.set_grad_enabled(False)
limit = int(sys.argv[1]) if len(sys.argv) > 1 and int(sys.argv[1]) > 0 else None
out = sys.argv[2] if len(sys.argv) > 2 else "/tmp/quadratic.json"
clips, triplets = load_holdout([Path("../shared/data/footage"), Path("../shared/data/footage2")])
by_name = {(c.group, c.name): c for c in clips}
chosen = [tr for tr in triplets if clean_span(by_name[(tr.group, tr.clip)], tr.centre - 3 * tr.gap, tr.centre + 3 * tr.gap)]
print(f"{len(chosen)} of {len(triplets)} triplets have both outer neighbours", flush=True)
chosen = chosen[:limit] if limit else chosen
net = load_weights(Path("weights/network.safetensors"), torch.device("cpu")).eval()


def smooth(x: torch.Tensor) -> torch.Tensor:
    return F.avg_pool2d(x, 15, stride=1, padding=7, count_include_pad=False)


def decode(st, f0t, f1t, t=0.5):
    w1 = splat_pyramid(st.one, st.feats_one, f0t, st.metric_one)
    w2 = splat_pyramid(st.two, st.feats_two, f1t, st.metric_two)
    return net.decoder(w1, w2, t)


rows = []
t0 = time.time()
t = 0.5
for n, tr in enumerate(chosen):
    clip = by_name[(tr.group, tr.clip)]
    i, k = tr.centre, tr.gap
    prev, one, mid, two, nxt = (clip.frames[j].float().div(255).unsqueeze(0) for j in (i - 3 * k, i - k, i, i + k, i + 3 * k))
    padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
    prev_p, one_p, two_p, nxt_p = padder.pad(prev, one, two, nxt)
    st = net.estimate_flow(one_p, two_p)
    f0m1 = net.estimate_flow(one_p, prev_p).flow_fwd
    f12 = net.estimate_flow(two_p, nxt_p).flow_fwd
    f01, f10 = st.flow_fwd, st.flow_bwd
    acc0, acc1 = f01 + f0m1, f10 + f12
    row = {"clip": tr.clip, "group": tr.group, "centre": i, "gap": k,
           "acc_p95": float(acc0.norm(dim=1).flatten().quantile(0.95)),
           "flow_p95": float(f01.norm(dim=1).flatten().quantile(0.95))}
    for name, a0, a1 in (("linear", None, None), ("quadratic", acc0, acc1), ("quadratic_smooth", smooth(acc0), smooth(acc1))):
        if a0 is None:
            f0t, f1t = f01 * t, f10 * (1 - t)
        else:
            f0t = a0 / 2 * t * t + (2 * f01 - a0) / 2 * t          # (f01 - f0-1) = 2 f01 - acc0
            f1t = a1 / 2 * (1 - t) ** 2 + (2 * f10 - a1) / 2 * (1 - t)
        res = padder.unpad(decode(st, f0t, f1t, t))
        row[name] = float(psnr(res.clamp(0, 1), mid))
    rows.append(row)
    if n % 20 == 0:
        print(n, f"{time.time() - t0:.0f}s", row, flush=True)
json.dump(rows, open(out, "w"))
for name in ("quadratic", "quadratic_smooth"):
    for label, keep in (("all", lambda r: True), ("t±1", lambda r: r["gap"] == 1), ("t±2", lambda r: r["gap"] >= 2)):
        rs = [r for r in rows if keep(r)]
        if not rs:
            continue
        print(f"{name} - linear, {label} ({len(rs)}): {sum(r[name] - r['linear'] for r in rs) / len(rs):+.3f} dB")
print("done", f"{time.time() - t0:.0f}s")
