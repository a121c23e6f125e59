"""Train the interpolation network on footage plus synthetic motion, in resumable chunks.

The shipped weights (weights/network.safetensors) are recipe "shipped" (the default): a 7000-step anneal of the
step-25000 weights of a run from scratch (recipe "shipped-base"), committed at bb95a9c:

    git show bb95a9c:weights/network.safetensors > step25000.safetensors
    python train.py --data footage --out runs/shipped --init-weights step25000.safetensors --recipe shipped
    python -m training.export runs/shipped --out shipped.safetensors   # the last moving average, as shipped

Each call trains one chunk (--minutes, default 8) and stops at the end of the recipe's schedule; continue with
``--resume runs/shipped --out runs/next``. The scaling study (docs/journal/scaling-study.md):

    python train.py --recipe study --data footage footage2 --width 2 --frame-cache DIR --out runs/x2-all

Several GPUs: ``torchrun --nproc_per_node 2 train.py ...`` (DistributedDataParallel). The output folder gets the
state to resume from (``state_model.safetensors``, ``state_optim.pt``, ``state_ema.safetensors``), the kept weights
(``weights.safetensors``: the best validation score so far, training.validation.replaces_kept), ``config.json``,
``train_config.json`` (the recipe), ``progress.json`` and ``log.jsonl``. ``--help`` lists every option.
"""

from __future__ import annotations

import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    # imports here keep `import train` free of side effects and cheap
    from training.config import TrainingError
    from training.options import parse
    from training.trainer import train

    try:
        options, overrides = parse(argv, __doc__.split("\n")[0])
        train(options, overrides)
    except (TrainingError, ValueError) as exc:  # what the user can fix (data, options), said once in one line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
