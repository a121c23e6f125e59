"""The network's import name from before the package (``import model``, ``from model.network import Network``),
kept for code written against it: the network is ``softsplat_vfi.model``. Each submodule is the package's own
module under this name too, so that classes and their checks are the same whichever name imported them.
"""

import importlib
import sys

from softsplat_vfi.model import Network, NetworkConfig, load_weights, save_weights

__all__ = ["Network", "NetworkConfig", "load_weights", "save_weights"]

for _name in ("correlation", "ensemble", "flow", "inference", "interface", "layers", "motion", "network", "published",
              "runtime", "synthesis", "warp", "weights"):
    globals()[_name] = sys.modules[f"{__name__}.{_name}"] = importlib.import_module(f"softsplat_vfi.model.{_name}")
