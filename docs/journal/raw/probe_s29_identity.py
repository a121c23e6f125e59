"""Session 29 check: how exactly the network reproduces a still frame (both inputs the same held-out frame, every
16th held-out triplet's middle frame, CPU fp32): PYTHONPATH=. python docs/journal/raw/probe_s29_identity.py"""
import torch, numpy as np
from pathlib import Path
from model.weights import load_weights
from training.config import VALIDATION_CROP
from training.data import load_clips
from training.holdout import is_holdout, holdout_triplets
from training.losses import psnr
clips = load_clips([Path('../shared/data/footage'), Path('../shared/data/footage2')], None, torch.device('cpu'), VALIDATION_CROP, keep=lambda r, e: is_holdout(e))
tr = holdout_triplets(clips)[::16]
for w in ['weights/network.safetensors', 'weights/fast.safetensors']:
    net = load_weights(Path(w), torch.device('cpu')).eval()
    vals = []
    with torch.no_grad():
        for t in tr:
            f = t.mid.float().div(255).unsqueeze(0)
            out = net(f, f, (0.5,))[0].clamp(0, 1)
            q = (out * 255).round() / 255
            vals.append((float(psnr(out, f)), float(psnr(q, f))))
    v = np.array(vals); print(w, len(v), 'identity PSNR mean %.2f min %.2f (8-bit rounded %.2f)' % (v[:,0].mean(), v[:,0].min(), v[:,1].mean()))
