"""A training run's state folder (``train.py --out``): the names of its files and its progress record.

``train.py`` writes the folder at every chunk's end and ``--resume`` reads it back; ``training.export`` turns it
into a weights file, ``training.unpack`` rebuilds it from a remote chunk's output folder and
``training.reproduce`` reads its step to know which stages are done. They all name the files from here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional

MODEL = "state_model.safetensors"  # the network's parameters, full precision
OPTIMIZER = "state_optim.pt"  # AdamW's moments (absent where the optimizer state was not kept)
AVERAGE = "state_ema.safetensors"  # the weights' moving average (only with --ema-decay above 0)
PROGRESS = "progress.json"  # the step reached, the best validation score and how the run was launched
NETWORK_CONFIG = "config.json"  # model.NetworkConfig
RECIPE = "train_config.json"  # training.config.TrainConfig
LOG = "log.jsonl"  # one line per logged step and validation
NONLINEARITY = "nonlinearity.pt"  # the motion tables of --max-nonlinearity (only with that filter)
KEPT_WEIGHTS = "weights.safetensors"  # the best-validated step's weights, fp16 (not needed to resume)

# what --resume reads (the optional ones only where the run wrote them)
RESUME_FILES = (MODEL, OPTIMIZER, AVERAGE, PROGRESS, NETWORK_CONFIG, RECIPE, LOG, NONLINEARITY)
REQUIRED = (MODEL, PROGRESS, NETWORK_CONFIG, RECIPE)


def read_progress(folder: Path) -> Optional[Dict[str, Any]]:
    """The progress record of ``folder`` (None where no chunk has finished there: no model or no record)."""
    folder = Path(folder)
    if not ((folder / PROGRESS).is_file() and (folder / MODEL).is_file()):
        return None
    return json.loads((folder / PROGRESS).read_text())


def progress_step(folder: Path) -> Optional[int]:
    """The step ``folder``'s progress record holds (None: no chunk finished there yet)."""
    progress = read_progress(folder)
    return None if progress is None else int(progress["step"])


def write_progress(folder: Path, progress: Dict[str, Any]) -> None:
    """Write ``folder``'s progress record (``progress`` must hold ``step``)."""
    if "step" not in progress:
        raise ValueError("a progress record needs its step: pass {'step': N, ...}")
    (Path(folder) / PROGRESS).write_text(json.dumps(progress) + "\n")
