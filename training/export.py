"""Write the weights of a training state folder as a weights file (fp16, like every committed one).

A state folder (``train.py --out``, ``OUTPUT/train`` of ``scripts/remote/chunk.sh``, or one unpacked for
``--resume``) holds the network
(``state_model.safetensors``) and, with ``--ema-decay`` above 0, its moving average (``state_ema.safetensors``), but
``weights.safetensors`` only where a step replaced the kept weights. This writes the state's last step
for scoring or comparison, by default the moving average (what validation scored), with ``--raw`` the
network's own parameters. The step, the recipe and the held-out figures train.py logged at that step for the
weights written (``val_*``: it validates the average where there is one) go into the file's metadata:

    python -m training.export runs/state --out runs/last.safetensors

``--flow-iterations N [N ...]`` writes the network with each pyramid level's flow decoder applied N times
(``NetworkConfig.flow_iterations``, coarsest level first): the same weights under another config. The source may
also be a weights file, which is then copied with that config and its metadata:

    python -m training.export weights/network.safetensors --flow-iterations 1 2 2 2 --out passes.safetensors

The file states the settings it runs at unless told others (metadata key ``inference``, read by every way in):
``--flow-scale auto|F`` states that flow scale; without it a copy under the same config keeps its source's, and any
other export gets the rule of ``model.weights.defaults_for`` (auto for the default network's architecture, 1
otherwise).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from softsplat_vfi.engine.options import add_flags, InterpolatorOptions, show_notes
from softsplat_vfi.model.interface import FlowScale
from softsplat_vfi.model.network import Network, NetworkConfig
from softsplat_vfi.model.weights import INFERENCE_KEY, config_from_metadata, load_weights, read_metadata, save_weights
from training.state import AVERAGE, LOG, MODEL, NETWORK_CONFIG, RECIPE, progress_step

_FIGURES = ("val_", "holdout_")  # metadata keys of figures that scored one network config


def _inference(flow_scale: Optional[FlowScale]) -> Optional[Dict[str, Any]]:
    """The inference defaults ``--flow-scale`` states (None: not given), checked as the engine checks them
    (ValueError)."""
    if flow_scale is None:
        return None
    return {"flow_scale": InterpolatorOptions(flow_scale=flow_scale).flow_scale}


def export_state(state: Union[str, Path], out: Union[str, Path], raw: bool = False,
                 flow_iterations: Optional[Sequence[int]] = None, flow_scale: Optional[FlowScale] = None) -> str:
    """Write the state's moving average (or, with ``raw`` or without an average, its network) to ``out``, with
    ``flow_iterations`` (if given) in its config and ``flow_scale`` (if given) as its default, else
    ``model.weights.defaults_for`` its config; returns which one was written ("moving average" or "network")."""
    from safetensors.torch import load_file

    state = Path(state)
    needed = [MODEL, NETWORK_CONFIG]
    missing = [name for name in needed if not (state / name).is_file()]
    if missing:
        raise ValueError(f"{state} is not a training state folder: {', '.join(missing)} missing (train.py writes "
                         "them to its --out folder; a remote chunk's state is OUTPUT/train plus small.tar's t/)")
    trained = NetworkConfig.from_dict(json.loads((state / NETWORK_CONFIG).read_text()))
    net = Network(_with_passes(trained, flow_iterations))
    tensors = load_file(str(state / MODEL))
    which = "network"
    average_path = state / AVERAGE
    if not raw and average_path.is_file():
        average = load_file(str(average_path))
        average.pop("_updates", None)
        unknown = set(average) - set(tensors)
        if unknown:
            raise ValueError(f"{average_path} does not fit {state / MODEL}: "
                             f"{len(unknown)} unknown tensors, e.g. {sorted(unknown)[0]}")
        tensors.update(average)  # parameters from the average, buffers (if any) from the network
        which = "moving average"
    net.load_state_dict(tensors, strict=True)
    extra = {"exported_from": f"{state} ({which})"}
    step = progress_step(state)
    if step is not None:
        extra["step"] = str(step)
        # train.py validated the moving average where there is one, else the network: its figures at this step
        # describe the exported weights unless --raw passed the average over
        # (and only under the config it ran: other flow passes make another network)
        if (which == "moving average" or not average_path.is_file()) and net.config == trained:
            extra.update(_validation_at(state / LOG, step))
    train_config = state / RECIPE
    if train_config.is_file():
        extra["train_config"] = json.dumps(json.loads(train_config.read_text()))
    save_weights(net, out, extra=extra, inference=_inference(flow_scale))
    return which


def export_weights(weights: Union[str, Path], out: Union[str, Path], flow_iterations: Sequence[int],
                   flow_scale: Optional[FlowScale] = None) -> None:
    """Copy a weights file to ``out`` with ``flow_iterations`` in its network config (the same tensors; the
    metadata kept, ``exported_from`` naming the source). The source's validation figures (``val_*``,
    ``holdout_*``) and inference defaults go only where the passes are unchanged: they belong to the source's
    network, not this one (which gets ``flow_scale`` if given, else ``model.weights.defaults_for`` its config)."""
    metadata = read_metadata(weights)
    source = config_from_metadata(metadata, weights)
    net = load_weights(weights, config=_with_passes(source, flow_iterations))
    same = net.config == source
    extra = {k: v for k, v in metadata.items()
             if k not in ("config", "format") and (same or not (k.startswith(_FIGURES) or k == INFERENCE_KEY))}
    extra["exported_from"] = f"{weights} (flow passes {', '.join(map(str, flow_iterations))})"
    inference = _inference(flow_scale)
    if inference is not None:
        extra.pop(INFERENCE_KEY, None)
    save_weights(net, out, extra=extra, inference=inference)


def _with_passes(config: NetworkConfig, flow_iterations: Optional[Sequence[int]]) -> NetworkConfig:
    """``config`` with ``flow_iterations`` (None: as it is); Network() checks the counts."""
    if flow_iterations is None:
        return config
    return dataclasses.replace(config, flow_iterations=tuple(flow_iterations))


def _validation_at(log: Path, step: int) -> Dict[str, str]:
    """The held-out figures train.py logged at ``step`` (its ``val_*`` PSNRs, as weights metadata), or none."""
    if not log.is_file():
        return {}
    figures: Dict[str, str] = {}
    for line in log.read_text().splitlines():
        record = json.loads(line) if line.strip() else {}
        if record.get("step") == step and "val_psnr" in record:
            figures = {k: f"{v:.3f}" for k, v in record.items() if k.startswith("val_") and isinstance(v, float)}
    return figures


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("state", type=Path, help="a training state folder (state_model.safetensors, config.json, ...), "
                                            "or a weights file (with --flow-iterations)")
    p.add_argument("--out", type=Path, required=True, help="where to write the weights")
    p.add_argument("--raw", action="store_true", help="the network's own parameters, not the moving average")
    p.add_argument("--flow-iterations", type=int, nargs="+", metavar="N",
                   help="passes of each level's flow decoder, coarsest level first (one N: every level)")
    # run.py's --flow-scale, as the file's default: without it, the source's for a copy under the same config, else
    # auto for the default network's architecture and 1 for any other (model.weights.defaults_for)
    add_flags(p, only=("flow_scale",))
    args = p.parse_args(argv)
    show_notes()  # the library's notes on stderr while this tool runs
    try:
        if args.state.is_file():
            if args.flow_iterations is None or args.raw:
                raise ValueError(f"{args.state} is a weights file: it is copied only to change its flow passes "
                                 f"(pass --flow-iterations, without --raw)")
            export_weights(args.state, args.out, args.flow_iterations, args.flow_scale)
            which = "weights"
        else:
            which = export_state(args.state, args.out, raw=args.raw, flow_iterations=args.flow_iterations,
                                 flow_scale=args.flow_scale)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({which} of {args.state})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
