"""Train the interpolation network on footage plus synthetic motion, in resumable chunks.

The shipped weights come from chains of recipes (training/config.py's RECIPES), one train.py run per stage:
thirteen stages for the default weights (weights/network.safetensors: "study" at width 2 from scratch, then the
"quality-*" stages, each from the last one's exported or averaged weights) and four for the fast ones
(weights/fast.safetensors: "fast-base", "fast", then "fast-psnr" twice). ``python -m training.reproduce
{default,fast}`` runs a whole chain (``--dry-run`` lists every stage's command):

    python train.py --recipe study --width 2 --data footage footage2 --out runs/q1   # a stage, to its end
    python train.py --resume runs/q1 --data footage footage2 --out runs/q1            # after a --minutes chunk
    python -m training.export runs/q1 --out q1.safetensors                            # its weights
    python -m training.reproduce default --data footage footage2 --out runs/default   # the default weights' chain

A call trains to the end of the recipe's schedule; on a machine with a time limit, ``--minutes M`` ends it sooner
as a chunk that ``--resume`` continues. docs/training.md has the recipes, the chains and the commands.

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
