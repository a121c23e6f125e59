"""The one interface the engine and ``model.inference`` run a network through.

``model.network.Network`` (this project's), ``model.ensemble.EnsembleNetwork`` (its test-time ensembles) and
``model.published.PublishedNetwork`` (the published architecture) implement it. Callers ask its capability flags
instead of checking classes:

- ``flow_alpha``: the network exposes its flows and metrics (``estimate_flow``, ``synthesize``), so transparency can
  move with them (``model.inference.interpolate_with_alpha``); otherwise alpha is mixed linearly in time.
- ``quadratic_paths``: each pass can run along quadratic paths through the frames beside the pair
  (``model.inference.interpolate_integer_quadratic`` on ``base``, ``passes`` times).
- ``cuda_graphs``: the network can be captured and replayed as CUDA graphs (``model.runtime.GraphedPairs``) and
  compiled stack by stack (``model.runtime.compile_network``).
- ``tiles``: the network can run tile by tile (motion estimated inside each tile).
- ``bf16_autocast``: the network was trained and measured under bfloat16 autocast, so ``precision="auto"`` picks it
  on GPUs with bfloat16 tensor cores; otherwise float32 (the published weights keep the arithmetic they were
  trained in).

``base`` is the network each pass runs (itself, or an ensemble's network) and ``passes`` how many passes are
averaged (1, 2 or 4; ``model.ensemble.average_passes``).
"""

from __future__ import annotations

from typing import Iterator, List, Protocol, Sequence, Union, runtime_checkable

import torch
from torch import nn

FlowScale = Union[float, str]


@runtime_checkable
class InterpolationNetwork(Protocol):
    """A network that interpolates a pair: ``net(one, two, times, flow_scale)`` gives one N x 3 x H x W frame per t
    from N x 3 x H x W RGB frames in [0, 1] (any H and W), with the capability flags of the module docstring."""

    flow_alpha: bool
    quadratic_paths: bool
    cuda_graphs: bool
    tiles: bool
    bf16_autocast: bool
    passes: int

    @property
    def base(self) -> nn.Module: ...

    def __call__(self, one: torch.Tensor, two: torch.Tensor, times: Sequence[float] = (0.5,),
                 flow_scale: FlowScale = 1.0) -> List[torch.Tensor]: ...

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]: ...
