"""Saving and loading weights as safetensors, with the config beside them.

A weights file holds the tensors; its metadata holds the NetworkConfig as JSON,
so a file always rebuilds the architecture it was trained with.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional, Union

import torch

from .network import Network, NetworkConfig

if TYPE_CHECKING:
    from .published import PublishedNetwork


class WeightsError(ValueError):
    """A weights file is missing, unreadable or does not fit the network."""


def save_weights(net: Network, path: Union[str, Path], dtype: torch.dtype = torch.float16,
                 extra: Optional[Dict[str, str]] = None) -> None:
    from safetensors.torch import save_file

    path = Path(path)
    tensors = {k: v.detach().to("cpu", dtype if v.is_floating_point() else v.dtype).contiguous()
               for k, v in net.state_dict().items()}
    metadata = {"config": json.dumps(net.config.to_dict()), "format": "softsplat-vfi"}
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
