"""Average several weights files of one architecture into one (a "model soup").

Fine-tuning runs that start from the same weights stay close enough that the uniform
average of their parameters is itself a working network, which can match or beat each one
(session 10: the average of three arms tied with the best of them; docs/findings.md, F8).

    python -m training.average --out runs/soup.safetensors A.safetensors B.safetensors ...
    python -m training.average --out runs/soup.safetensors A.safetensors B.safetensors --shares 0.625 0.375

A soup has no training step or recipe of its own, so `train.py --init-weights` would start it at step 0 with the
fast recipe. ``--recipe NAME --step N`` records the recipe and step a continuation takes, as a trained file does
(the shipped default records "quality-psnr" at step 69919: its stages continue from there).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import torch

from softsplat_vfi.model.network import Network
from softsplat_vfi.model.weights import WeightsError, config_from_metadata, load_weights, read_metadata, save_weights
from training.config import RECIPES


def _normalised(shares: Optional[Sequence[float]], count: int) -> List[float]:
    if shares is None:
        return [1.0 / count] * count
    total = sum(shares)
    if len(shares) != count or min(shares) < 0 or total <= 0:
        raise ValueError(f"--shares takes one non-negative number per weights file ({count}), not all zero; "
                         f"got {' '.join(map(str, shares))}")
    return [share / total for share in shares]


def average_state(paths: Sequence[Union[str, Path]],
                  shares: Optional[Sequence[float]] = None) -> Dict[str, torch.Tensor]:
    """The fp32 average of the files' floating-point tensors (others taken from the first file), uniform or
    weighted by ``shares`` (scaled to sum to 1)."""
    if len(paths) < 2:
        raise ValueError(f"averaging needs 2 or more weights files, got {len(paths)}")
    weights = _normalised(shares, len(paths))
    config = None
    total: Dict[str, torch.Tensor] = {}
    for path, weight in zip(paths, weights):
        net = load_weights(path)  # a WeightsError names a missing, unreadable or ill-fitting file
        if config is None:
            config = net.config
        elif net.config != config:
            raise WeightsError(f"{path} has another network config than {paths[0]}: only weights of one "
                               "architecture can be averaged")
        for name, tensor in net.state_dict().items():
            if not tensor.is_floating_point():
                total.setdefault(name, tensor.clone())
            elif name in total:
                total[name] += weight * tensor.float()
            else:
                total[name] = weight * tensor.float()
    return total


def average_weights(paths: Sequence[Union[str, Path]], out: Union[str, Path],
                    shares: Optional[Sequence[float]] = None, recipe: Optional[str] = None,
                    step: Optional[int] = None) -> None:
    """Write the average of `paths` (uniform, or weighted by `shares`) to `out` (fp16, like every committed
    weights file), naming each source, its step, its share, and the recipe and sources it records (if any) in the
    metadata.
    `recipe` and `step`, given together, are recorded as the file's own ``train_config`` and ``step``: what
    ``train.py --init-weights`` continues."""
    if (recipe is None) != (step is None):
        raise ValueError("--recipe and --step go together: the recipe a continuation takes and its step "
                         "(for example --recipe quality-psnr --step 69919)")
    if recipe is not None and recipe not in RECIPES:
        raise ValueError(f"--recipe {recipe}: not a recipe; pick one of {', '.join(RECIPES)}")
    if step is not None and step < 0:
        raise ValueError(f"--step {step}: a training step is 0 or more")
    weights = _normalised(shares, len(paths))
    state = average_state(paths, weights)  # already summing to 1: scaled again, unchanged
    metadatas = [read_metadata(path) for path in paths]
    net = Network(config_from_metadata(metadatas[0], paths[0]))
    net.load_state_dict(state, strict=True)
    sources = []
    for path, share, metadata in zip(paths, weights, metadatas):
        source = {"path": str(path), "step": metadata.get("step"), "share": round(share, 6)}
        for key in ("train_config", "averaged_from"):  # a soup of soups keeps the whole tree of sources
            if key in metadata:
                source[key] = json.loads(metadata[key])
        sources.append(source)
    extra = {"averaged_from": json.dumps(sources)}
    if recipe is not None:
        extra.update(train_config=RECIPES[recipe].to_json(), step=str(step))
    save_weights(net, out, extra=extra)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="where to write the averaged weights")
    p.add_argument("weights", type=Path, nargs="+", help="two or more weights files of one architecture")
    p.add_argument("--shares", type=float, nargs="+", metavar="W",
                   help="one weight per file, scaled to sum to 1 (default: equal)")
    p.add_argument("--recipe", choices=sorted(RECIPES), metavar="NAME",
                   help="the recipe train.py --init-weights continues with (with --step; default: none recorded)")
    p.add_argument("--step", type=int, metavar="N", help="the training step recorded with --recipe")
    args = p.parse_args(argv)
    try:
        average_weights(args.weights, args.out, args.shares, args.recipe, args.step)
    except ValueError as exc:  # WeightsError is a ValueError
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote the average of {len(args.weights)} weights files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
