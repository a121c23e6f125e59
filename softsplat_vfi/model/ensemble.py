"""Test-time ensembling: the network averaged over mirrored and time-reversed copies of a pair.

A quality mode for when time matters less: 2 passes (the pair and its left-right mirror image) or 4
(each also with the frames swapped and t replaced by 1 - t, which the network was trained to handle). Along
quadratic paths (four frames) the passes mirror all four frames and reverse the pair with its neighbours.
With the fast weights on Middlebury (CPU), 2 and 4 passes score 34.99 and 35.01 dB against 34.84 for one pass
(docs/performance.md).
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import torch
from torch import nn

from .interface import FlowScale

PASSES = (1, 2, 4)


def pass_variants(passes: int) -> List[Tuple[bool, bool]]:
    """(mirrored left-right, reversed in time) of each of an ensemble's passes, the plain pass first."""
    if passes not in PASSES:
        raise ValueError(f"ensemble {passes}: use 1, 2 or 4 passes")
    return [(False, False), (True, False), (False, True), (True, True)][:passes]


def average_passes(passes: int, run: Callable[[bool, bool], List[torch.Tensor]]) -> List[torch.Tensor]:
    """The ensemble loop, the one place it is written: the mean over the passes of ``run(mirror, reverse)``, which
    gives one frame per t for that pass with its inputs mirrored left-right and/or reversed in time (and t replaced
    by 1 - t); the mirrored passes' frames are mirrored back here. Float32 sums, in pass order."""
    total: List[torch.Tensor] = []
    for mirror, reverse in pass_variants(passes):
        outs = [(o.flip(3) if mirror else o).float() for o in run(mirror, reverse)]
        total = outs if not total else [acc + o for acc, o in zip(total, outs)]
    return [acc / passes for acc in total]


class EnsembleNetwork(nn.Module):
    """Callable like the network it wraps: ``ens(one, two, times, flow_scale)`` returns one frame per t, and
    ``ens.forward_four(before, one, two, after, times, flow_scale)`` along quadratic paths as
    ``Network.forward_four`` (the reversed passes swap the pair and its neighbours).

    An ``model.interface.InterpolationNetwork``: whole frames and tiles, along quadratic paths (its network's, pass
    by pass), with its network's precision; transparency is mixed linearly and it runs eagerly (no CUDA graphs)."""

    flow_alpha = False
    cuda_graphs = False
    tiles = True

    def __init__(self, net: nn.Module, passes: int = 2) -> None:
        super().__init__()
        if passes not in (2, 4):
            raise ValueError(f"an ensemble averages 2 or 4 passes, got {passes} (1 pass is the network itself)")
        self.net = net
        self.passes = passes
        self.config = getattr(net, "config", None)
        self.quadratic_paths = bool(getattr(net, "quadratic_paths", False))
        self.bf16_autocast = bool(getattr(net, "bf16_autocast", False))

    @property
    def base(self) -> nn.Module:
        """The network each pass runs."""
        return self.net

    def _average(self, run: Callable[[Sequence[Optional[torch.Tensor]], List[float]], List[torch.Tensor]],
                 frames: Sequence[Optional[torch.Tensor]], times: Sequence[float]) -> List[torch.Tensor]:
        """``average_passes`` of ``run(frames, times)``: ``frames`` in time order (None: a missing neighbour),
        reversed in the time-reversed passes, mirrored in the mirrored ones."""
        times = [float(t) for t in times]

        def one_pass(mirror: bool, reverse: bool) -> List[torch.Tensor]:
            inputs = list(frames[::-1]) if reverse else list(frames)
            inputs = [x.flip(3) if x is not None else None for x in inputs] if mirror else inputs
            return run(inputs, [1.0 - t for t in times] if reverse else times)

        return average_passes(self.passes, one_pass)

    def forward(self, one: torch.Tensor, two: torch.Tensor, times: Sequence[float] = (0.5,),
                flow_scale: FlowScale = 1.0) -> List[torch.Tensor]:
        return self._average(lambda f, ts: self.net(*f, ts, flow_scale), (one, two), times)

    def forward_four(self, before: Optional[torch.Tensor], one: torch.Tensor, two: torch.Tensor,
                     after: Optional[torch.Tensor], times: Sequence[float] = (0.5,),
                     flow_scale: FlowScale = 1.0) -> List[torch.Tensor]:
        return self._average(lambda f, ts: self.net.forward_four(*f, ts, flow_scale), (before, one, two, after),
                             times)


def with_ensemble(net: nn.Module, passes: int) -> nn.Module:
    """``net`` itself for 1 pass, else the ensemble of ``passes`` passes."""
    pass_variants(passes)  # (the check of ``passes``)
    return net if passes == 1 else EnsembleNetwork(net, passes)
