"""The interpolation network: flow estimation, softmax splatting and synthesis.

Conventions (everywhere in this package): images are N x 3 x H x W float tensors,
RGB, values in [0, 1]; flow is N x 2 x H x W in pixels, x then y; t in (0, 1) is
the time of the synthesised frame between ``one`` (t = 0) and ``two`` (t = 1).
"""

from .network import Network, NetworkConfig
from .weights import load_weights, save_weights

__all__ = ["Network", "NetworkConfig", "load_weights", "save_weights"]
