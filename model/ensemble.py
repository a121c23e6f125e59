"""Test-time ensembling: the network averaged over mirrored and time-reversed copies of a pair.

A quality mode for when time matters less: 2 passes (the pair and its left-right mirror image) or 4
(each also with the frames swapped and t replaced by 1 - t, which the network was trained to handle).
With the fast weights on Middlebury (CPU), 2 and 4 passes score 34.99 and 35.01 dB against 34.84 for one pass
(docs/performance.md).
"""

from __future__ import annotations

from typing import List, Sequence

import torch
from torch import nn

PASSES = (1, 2, 4)


class EnsembleNetwork(nn.Module):
    """Callable like the network it wraps: ``ens(one, two, times, flow_scale)`` returns one frame per t."""

    def __init__(self, net: nn.Module, passes: int = 2) -> None:
        super().__init__()
        if passes not in (2, 4):
            raise ValueError(f"an ensemble averages 2 or 4 passes, got {passes} (1 pass is the network itself)")
        self.net = net
        self.passes = passes
        self.config = getattr(net, "config", None)

    def forward(self, one: torch.Tensor, two: torch.Tensor, times: Sequence[float] = (0.5,),
                flow_scale: float = 1.0) -> List[torch.Tensor]:
        times = [float(t) for t in times]
        total = [o.float() for o in self.net(one, two, times, flow_scale)]
        runs = [(one.flip(3), two.flip(3), times, True)]
        if self.passes == 4:
            reverse = [1.0 - t for t in times]
            runs += [(two, one, reverse, False), (two.flip(3), one.flip(3), reverse, True)]
        for a, b, ts, mirrored in runs:
            for acc, out in zip(total, self.net(a, b, ts, flow_scale)):
                acc += (out.flip(3) if mirrored else out).float()
        return [acc / self.passes for acc in total]


def with_ensemble(net: nn.Module, passes: int) -> nn.Module:
    """``net`` itself for 1 pass, else the ensemble of ``passes`` passes."""
    if passes not in PASSES:
        raise ValueError(f"--ensemble {passes}: use 1, 2 or 4 passes")
    return net if passes == 1 else EnsembleNetwork(net, passes)
