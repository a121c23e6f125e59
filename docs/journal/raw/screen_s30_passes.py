"""Session 30 screen: held-out margins of weights files on every fourth held-out triplet (92 of 368; CPU fp32).

    PYTHONPATH=. python docs/journal/raw/screen_s30_passes.py W1 W2 ... > OUT.txt
"""
import sys
from pathlib import Path

import torch

from model.weights import load_weights
from training.holdout import baseline_scores, describe, load_holdout, network_scores, summary

triplets = load_holdout([Path("../shared/data/footage"), Path("../shared/data/footage2")])[1][::4]
base = baseline_scores(triplets, workers=2)
for path in sys.argv[1:]:
    net = load_weights(path).eval()
    print(path, describe(summary(network_scores(net, triplets, torch.device("cpu")), base, triplets)), flush=True)
