"""Session 45: the flow distillation's weight, calibrated before any training run (CPU, the default weights).

Per batch of training footage (512-px crops, batches of 4, linear paths; training clips only, held-out sources
excluded): the gradient norm over all parameters of the PSNR reconstruction loss and of the distillation loss
(training.step.distillation_loss), the distillation loss itself and the share of pixels where the teacher's
flow matches the middle frame better. Rule (journal, session 45): weight = 0.25 x the median ratio of the two
gradient norms, so that the distillation pulls a quarter as hard as the reconstruction.

    PYTHONPATH=. python docs/journal/raw/probe_s45_distill_weight.py ../shared/data/footage ../shared/data/footage2
"""
import statistics
import sys
from pathlib import Path

import torch

from model.weights import load_weights
from training.data import FootageSampler, load_clips
from training.holdout import is_holdout
from training.losses import psnr_loss
from training.step import distillation_loss

torch.manual_seed(0)
device = torch.device("cpu")
net = load_weights("weights/network.safetensors", device)
net.train()
folders = [Path(p) for p in sys.argv[1:]]
clips = load_clips(folders, None, device, 512, keep=lambda r, e: not is_holdout(e), limit=12)
sampler = FootageSampler(clips, 512, generator=torch.Generator().manual_seed(0))
params = [p for p in net.parameters()]


def grad_norm(loss: torch.Tensor) -> float:
    grads = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    return float(torch.cat([g.flatten() for g in grads if g is not None]).norm())


ratios = []
for k in range(8):
    b = sampler.batch(4)
    state = net.estimate_flow(b["one"], b["two"])
    to_one, to_two = net.paths(state, b["t"])
    pred = net.render(state, to_one, to_two, b["t"])
    rec = psnr_loss(pred, b["mid"])
    dis = distillation_loss(net, state, b["mid"], to_one, to_two)
    g_rec, g_dis = grad_norm(rec), grad_norm(dis)
    ratios.append(g_rec / g_dis)
    print(f"batch {k}: psnr loss {float(rec.detach()):.3f}, |grad| {g_rec:.4f}; distillation {float(dis.detach()):.4f} px, "
          f"|grad| {g_dis:.4f}; ratio {g_rec / g_dis:.3f}", flush=True)
median = statistics.median(ratios)
print(f"median ratio {median:.4f}; weight by the rule (0.25 x the median): {0.25 * median:.4f}")
