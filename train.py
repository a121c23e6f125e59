"""Train the interpolation network on footage plus synthetic motion, in resumable chunks.

The default weights (weights/network.safetensors) come from six recipes: "study" at width 2 from scratch (a
40000-step cosine, several chunks), then five 5000-step stages, each from the last one's weights: "quality-384"
(larger crops and motion), "quality-512" (larger crops again), "quality-no-census" (no census term),
"quality-no-flow" (no flow end-point error either) and "quality" (the same again):

    python train.py --recipe study --width 2 --data footage footage2 --frame-cache DIR --out runs/q1
    python train.py --resume runs/q1 --out runs/q1 ...        # more chunks, until step 40000
    python -m training.export runs/q1 --out q1.safetensors
    python train.py --recipe quality-384 --init-weights q1.safetensors --rewarm 500 --data footage footage2 \
        --frame-cache DIR --out runs/q2
    python -m training.export runs/q2 --out q2.safetensors
    ... quality-512 from q2.safetensors to q3.safetensors, and so on to quality, whose weights are the file

The fast weights (weights/fast.safetensors, run.py --model fast) are "fast-base" from scratch to step 25000, then
"fast" (the default recipe) from those weights. Each call trains one chunk (--minutes, default 8) and stops at the
end of the recipe's schedule; docs/training.md has the chunked commands.

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
