"""Session 30 screen: held-out margins of weights files on every fourth held-out triplet (92 of 368; CPU fp32).

    PYTHONPATH=. python docs/journal/raw/screen_s30_passes.py W1 W2 ... > OUT.txt
"""
import sys
from pathlib import Path

import torch

from model.weights import load_weights
from training.config import VALIDATION_CROP
from training.data import load_clips
from training.holdout import baseline_scores, describe, holdout_triplets, is_holdout, network_scores, summary

clips = load_clips([Path("../shared/data/footage"), Path("../shared/data/footage2")], None, torch.device("cpu"),
                   VALIDATION_CROP, keep=lambda root, entry: is_holdout(entry))
triplets = holdout_triplets(clips)[::4]
base = baseline_scores(triplets, workers=2)
for path in sys.argv[1:]:
    net = load_weights(path).eval()
    print(path, describe(summary(network_scores(net, triplets, torch.device("cpu")), base, triplets)), flush=True)
