"""Where each input pixel is at time t: constant velocity from two frames, or constant acceleration from four.

The quadratic model is QVI's (Xu et al., "Quadratic Video Interpolation", NeurIPS 2019): with frames at times -1,
0, 1 and 2, a pixel of frame 0 at x(s) = x0 + v s + a s^2 / 2 has f(0->1) = v + a/2 and f(0->-1) = -v + a/2, so
a = f(0->1) + f(0->-1), v = (f(0->1) - f(0->-1)) / 2 and f(0->t) = v t + a t^2 / 2; frame 1 mirrors it with 1 - t.
Under constant velocity (f(0->-1) = -f(0->1)) both give the linear flows exactly.
Where only one side of the pair has a neighbouring frame (a shot's first or last pair), that side's frame moves
along its quadratic path and the other at constant velocity.
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch

Time = Union[float, torch.Tensor]


def linear_flows(flow_fwd: torch.Tensor, flow_bwd: torch.Tensor, t: Time) -> Tuple[torch.Tensor, torch.Tensor]:
    """Flows from frame one and from frame two to time t (0 at one, 1 at two) under constant velocity."""
    return flow_fwd * t, flow_bwd * (1.0 - t)


def quadratic_flows(flow_fwd: torch.Tensor, flow_bwd: torch.Tensor, flow_before: Optional[torch.Tensor],
                    flow_after: Optional[torch.Tensor], t: Time, before: Time = 1.0,
                    after: Time = 1.0) -> Tuple[torch.Tensor, torch.Tensor]:
    """Flows from frame one and from frame two to time t under constant acceleration.

    ``flow_fwd``: one -> two; ``flow_bwd``: two -> one; ``flow_before``: one -> the frame ``before`` earlier than
    one, and ``flow_after``: two -> the frame ``after`` later than two, both in units of the time from one to two
    (1: as far apart as the pair; a video with dropped or uneven frames gives other values). A side given None
    has no neighbour: its frame moves at constant velocity (as ``linear_flows``).
    """
    for name, flow in (("flow_before", flow_before), ("flow_after", flow_after)):
        if flow is not None and flow.shape != flow_fwd.shape:
            raise ValueError(f"{name} is {tuple(flow.shape)}, the pair's flow {tuple(flow_fwd.shape)}: estimate the "
                             f"neighbours' flows at the pair's size")
    for name, gap in (("before", before), ("after", after)):
        # (a tensor gap is not read here: a CUDA graph being captured changes it between replays)
        if not isinstance(gap, torch.Tensor) and not gap > 0:
            raise ValueError(f"{name} = {gap}: give the neighbour's distance in time from its frame, above 0, in "
                             f"units of the pair's interval")
    # frame one: x(s) = v s + a s^2 / 2 through x(1) = flow_fwd and x(-before) = flow_before; frame two likewise in
    # r = s - 1 (running the other way), through y(-1) = flow_bwd and y(after) = flow_after
    return _path(flow_fwd, flow_before, before, t), _path(flow_bwd, flow_after, after, 1.0 - t)


def straight_neighbour(flow_pair: torch.Tensor, gap: Time = 1.0) -> torch.Tensor:
    """The neighbour flow under which a side's path is the straight line (``quadratic_flows`` with that side None),
    for callers that need a tensor for a side without a neighbour: a CUDA graph's fixed inputs, or a per-sample
    ``torch.where``. ``flow_pair``: the side's flow to the other frame of the pair; ``gap``: the side's gap."""
    return flow_pair * -gap


def _path(flow_pair: torch.Tensor, flow_side: Optional[torch.Tensor], gap: Time, s: Time) -> torch.Tensor:
    """Where a frame's pixels are after ``s`` of the pair's interval towards the other frame, along the parabola
    through the flow to that frame (``flow_pair``, at 1) and to its neighbour ``gap`` intervals the other way
    (``flow_side``, at -``gap``); None: the straight line."""
    if flow_side is None:
        return flow_pair * s
    accel = (flow_pair * gap + flow_side) * (2.0 / (gap * (1.0 + gap)))
    return (flow_pair - accel * 0.5) * s + accel * (s * s * 0.5)
