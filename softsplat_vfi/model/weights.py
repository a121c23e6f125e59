"""Saving and loading weights as safetensors, with the config beside them.

A weights file holds the tensors; its metadata holds the NetworkConfig as JSON,
so a file always rebuilds the architecture it was trained with, and its inference defaults (key ``inference``,
JSON such as ``{"flow_scale": "auto"}``), so that every way in (the library, run.py, ComfyUI, the benchmarks) runs a
file at the same settings: ``inference_defaults`` reads them, the one place that decides a default the weights
own.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Optional, Union

import torch

from .network import AUTO, Network, NetworkConfig

if TYPE_CHECKING:
    from .published import PublishedNetwork


class WeightsError(ValueError):
    """A weights file is missing, unreadable or does not fit the network."""


# the metadata key of a file's inference defaults, and what a file without it runs at (files written before the
# key, published checkpoints): the engine's settings as they were before weights stated their own
INFERENCE_KEY = "inference"
FALLBACK_DEFAULTS: Dict[str, Any] = {"flow_scale": 1.0}
# the architecture that --flow-scale auto was chosen for, on held-out footage (docs/findings.md, F12): the default
# network's, weights/network.safetensors
AUTO_SCALE_CONFIG = dataclasses.replace(NetworkConfig().widened(2), flow_iterations=(1, 2, 2, 2))


def defaults_for(config: NetworkConfig) -> Dict[str, Any]:
    """The inference defaults a new weights file of ``config`` states (``save_weights`` writes them unless told
    others): flow scale auto for the default network's architecture (``AUTO_SCALE_CONFIG``), where it gained on
    held-out footage; 1 for any other, as the fast network keeps (auto cost it 0.3 dB on one held-out clip) until a
    held-out run of its own says otherwise (``python -m training.export --flow-scale``)."""
    return {"flow_scale": AUTO if config == AUTO_SCALE_CONFIG else 1.0}


def save_weights(net: Network, path: Union[str, Path], dtype: torch.dtype = torch.float16,
                 extra: Optional[Dict[str, str]] = None, inference: Optional[Dict[str, Any]] = None) -> None:
    """Write ``net`` as ``dtype`` (floating-point tensors) with its config, its inference defaults (``inference``;
    None: ``defaults_for`` its config) and ``extra`` in the metadata."""
    from safetensors.torch import save_file

    path = Path(path)
    tensors = {k: v.detach().to("cpu", dtype if v.is_floating_point() else v.dtype).contiguous()
               for k, v in net.state_dict().items()}
    metadata = {"config": json.dumps(net.config.to_dict()), "format": "softsplat-vfi",
                INFERENCE_KEY: json.dumps(defaults_for(net.config) if inference is None else inference)}
    metadata.update(extra or {})
    tmp = path.with_name(path.name + ".tmp")
    save_file(tensors, str(tmp), metadata=metadata)
    tmp.replace(path)


def _require_file(path: Path) -> None:
    if not path.is_file():
        raise WeightsError(f"weights file not found: {path} (train some with train.py, or give the path of a "
                           f"weights file)")


def _unreadable(path: Path, exc: Exception) -> WeightsError:
    return WeightsError(f"cannot read weights from {path}: not a safetensors weights file ({exc}); pass a file "
                        f"written by train.py (weights/network.safetensors, weights/fast.safetensors) or a "
                        f"published checkpoint ending in {', '.join(PUBLISHED_SUFFIXES)}")


def read_metadata(path: Union[str, Path]) -> Dict[str, str]:
    """The file's metadata (network config, step, training recipe, ...), without reading its tensors. Raises
    WeightsError where the file is missing or is not a safetensors file."""
    from safetensors import safe_open

    path = Path(path)
    _require_file(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            return f.metadata() or {}
    except Exception as exc:  # corrupt or not a safetensors file
        raise _unreadable(path, exc) from exc


def read_config(path: Union[str, Path]) -> NetworkConfig:
    return config_from_metadata(read_metadata(path), path)


def config_from_metadata(meta: Dict[str, str], path: Union[str, Path]) -> NetworkConfig:
    """The network config in metadata already read from ``path`` (``read_metadata``; named in errors)."""
    if "config" not in meta:
        raise WeightsError(f"{path} has no network config in its metadata: was it saved by save_weights()?")
    config = json.loads(meta["config"])
    try:
        return NetworkConfig.from_dict(config)
    except ValueError as exc:  # an unknown key, or a removed stage switched on: the file needs older code
        raise WeightsError(f"{path}: {exc}") from None


def inference_defaults(path: Union[str, Path]) -> Dict[str, Any]:
    """The settings the weights at ``path`` run at unless told others (``{"flow_scale": "auto"}`` for the default
    network): their metadata's ``inference`` over ``FALLBACK_DEFAULTS``, which is all that a file without the key, a
    published checkpoint or a path that is no file gets. WeightsError where the key holds no JSON object of known
    names (the engine checks the values as it checks its options)."""
    path = Path(path)
    if path.suffix in PUBLISHED_SUFFIXES or not path.is_file():
        return dict(FALLBACK_DEFAULTS)
    text = read_metadata(path).get(INFERENCE_KEY)
    if text is None:
        return dict(FALLBACK_DEFAULTS)
    try:
        stated = json.loads(text)
    except ValueError:
        stated = None
    if not isinstance(stated, dict):
        raise WeightsError(f"{path}: its metadata's {INFERENCE_KEY!r} is {text!r}, not a JSON object such as "
                           f'{{"flow_scale": "auto"}}')
    unknown = sorted(set(stated) - set(FALLBACK_DEFAULTS))
    if unknown:
        raise WeightsError(f"{path}: its metadata's {INFERENCE_KEY!r} names {', '.join(unknown)}, which this code "
                           f"does not know (known: {', '.join(FALLBACK_DEFAULTS)}): was it written by newer code?")
    return {**FALLBACK_DEFAULTS, **stated}


def load_weights(path: Union[str, Path], device: Union[str, torch.device] = "cpu",
                 config: Optional[NetworkConfig] = None) -> Network:
    """Build the network described by the file, or ``config`` (one its tensors fit, e.g. with other flow passes),
    and load its weights (strict)."""
    from safetensors.torch import load_file

    path = Path(path)
    _require_file(path)
    config = config or read_config(path)
    try:
        state = load_file(str(path))
    except Exception as exc:  # corrupt or not a safetensors file
        raise _unreadable(path, exc) from exc
    net = Network(config)
    try:
        net.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    except RuntimeError as exc:
        raise WeightsError(f"{path} does not fit the network: {str(exc).splitlines()[0]}") from exc
    return net.to(device).eval()


PUBLISHED_SUFFIXES = (".pytorch", ".pth", ".pt")


def load_published(path: Union[str, Path], device: Union[str, torch.device] = "cpu") -> PublishedNetwork:
    """Load a published checkpoint (``network-lf.pytorch`` / ``network-l1.pytorch``), strictly."""
    from .published import PublishedNetwork

    path = Path(path)
    if not path.is_file():
        raise WeightsError(f"weights file not found: {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise WeightsError(f"cannot read {path} as a PyTorch checkpoint: {exc}") from exc
    if not isinstance(state, dict):
        raise WeightsError(f"{path} does not hold a state dict")
    # the released checkpoints name their submodules 'module...'; this class names them 'net...'
    state = {key.replace("module", "net"): value for key, value in state.items()}
    net = PublishedNetwork()
    try:
        net.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise WeightsError(f"{path} does not fit the published architecture: {str(exc).splitlines()[0]}") from exc
    return net.to(device).eval()


def load_any(path: Union[str, Path], device: Union[str, torch.device] = "cpu") -> Union[Network, "PublishedNetwork"]:
    """This project's safetensors weights, or a published checkpoint (by its suffix)."""
    if Path(path).suffix in PUBLISHED_SUFFIXES:
        return load_published(path, device)
    return load_weights(path, device)
