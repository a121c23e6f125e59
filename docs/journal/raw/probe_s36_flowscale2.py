"""Probe (session 36): flow estimated on 2x upsampled frames (flow_scale 2) against scale 1, per held-out triplet,
with the 95th percentile of the network's own forward flow at scale 1. CPU, fp32, default weights.

    PYTHONPATH=. python docs/journal/raw/probe_s36_flowscale2.py [LIMIT] [OUT.json]   # 368 triplets: about 55 min
"""
import json, sys, time, torch
from pathlib import Path
from model.warp import InputPadder
from model.weights import load_weights
from training.holdout import load_holdout, baseline_scores, triplet_flows
from training.losses import psnr
torch.set_grad_enabled(False)
limit = int(sys.argv[1]) if len(sys.argv) > 1 else None
out = sys.argv[2] if len(sys.argv) > 2 else "/tmp/fs2/flowscale2.json"
clips, triplets = load_holdout([Path("../shared/data/footage"), Path("../shared/data/footage2")])
triplets = triplets[:limit] if limit else triplets
flows = triplet_flows(triplets)
base = baseline_scores(triplets, flows=flows)
net = load_weights(Path("weights/network.safetensors"), torch.device("cpu")).eval()
rows = []
t0 = time.time()
for k, (tr, (fwd, bwd)) in enumerate(zip(triplets, flows)):
    one, two, mid = (x.float().div(255).unsqueeze(0) for x in (tr.one, tr.two, tr.mid))
    padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
    a, b = padder.pad(one, two)
    row = {"clip": tr.clip, "group": tr.group, "gap": tr.gap, "baseline": float(base[k]), "size": list(one.shape[2:]),
           "dis_p95": float(fwd.norm(dim=1).flatten().quantile(0.95))}
    for s in (1.0, 2.0):
        st = net.estimate_flow(a, b, s)
        res = padder.unpad(net.synthesize(st, 0.5))
        row[f"psnr_{s}"] = float(psnr(res.clamp(0, 1), mid))
        if s == 1.0:
            row["own_p95"] = float(st.flow_fwd.norm(dim=1).flatten().quantile(0.95))
    rows.append(row)
    if k % 20 == 0:
        print(k, f"{time.time() - t0:.0f}s", row, flush=True)
json.dump(rows, open(out, "w"))
print("done", f"{time.time() - t0:.0f}s")
