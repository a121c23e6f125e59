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

from .network import FlowScale

PASSES = (1, 2, 4)


def pass_variants(passes: int) -> List[Tuple[bool, bool]]:
    """(mirrored left-right, reversed in time) of each of an ensemble's passes, the plain pass first."""
    if passes not in PASSES:
        raise ValueError(f"ensemble {passes}: use 1, 2 or 4 passes")
    return [(False, False), (True, False), (False, True), (True, True)][:passes]


class EnsembleNetwork(nn.Module):
    """Callable like the network it wraps: ``ens(one, two, times, flow_scale)`` returns one frame per t, and
    ``ens.forward_four(before, one, two, after, times, flow_scale)`` along quadratic paths as
    ``Network.forward_four`` (the reversed passes swap the pair and its neighbours)."""

    def __init__(self, net: nn.Module, passes: int = 2) -> None:
        super().__init__()
        if passes not in (2, 4):
            raise ValueError(f"an ensemble averages 2 or 4 passes, got {passes} (1 pass is the network itself)")
        self.net = net
        self.passes = passes
        self.config = getattr(net, "config", None)

    def _average(self, run: Callable[[Sequence[Optional[torch.Tensor]], List[float]], List[torch.Tensor]],
                 frames: Sequence[Optional[torch.Tensor]], times: Sequence[float]) -> List[torch.Tensor]:
        """The mean of ``run(frames, times)`` over the passes: ``frames`` in time order (None: a missing
        neighbour), reversed (and t replaced by 1 - t) in the time-reversed passes, mirrored (and the outputs
        mirrored back) in the mirrored ones."""
        times = [float(t) for t in times]
        total: List[torch.Tensor] = []
        for mirror, reverse in pass_variants(self.passes):
            inputs = list(frames[::-1]) if reverse else list(frames)
            inputs = [x.flip(3) if x is not None else None for x in inputs] if mirror else inputs
            outs = run(inputs, [1.0 - t for t in times] if reverse else times)
            outs = [(o.flip(3) if mirror else o).float() for o in outs]
            total = outs if not total else [acc + o for acc, o in zip(total, outs)]
        return [acc / self.passes for acc in total]

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
