"""Where each input pixel is at time t: constant velocity from two frames, or constant acceleration from four.

The quadratic model is QVI's (Xu et al., "Quadratic Video Interpolation", NeurIPS 2019): with frames at times -1,
0, 1 and 2, a pixel of frame 0 at x(s) = x0 + v s + a s^2 / 2 has f(0->1) = v + a/2 and f(0->-1) = -v + a/2, so
a = f(0->1) + f(0->-1), v = (f(0->1) - f(0->-1)) / 2 and f(0->t) = v t + a t^2 / 2; frame 1 mirrors it with 1 - t.
Under constant velocity (f(0->-1) = -f(0->1)) both give the linear flows exactly.

A pixel keeps its acceleration along its path, so where only one side of the pair has a neighbouring frame (a shot's
first or last pair), the other frame's acceleration is the known one carried across the pair: frame 1's pixel y
came from frame 0's pixel y + f(1->0)(y) (``fill_neighbour_flows``).
"""

from __future__ import annotations

from typing import Optional, Tuple, Union

import torch

from .warp import backwarp

Time = Union[float, torch.Tensor]


def linear_flows(flow_fwd: torch.Tensor, flow_bwd: torch.Tensor, t: Time) -> Tuple[torch.Tensor, torch.Tensor]:
    """Flows from frame one and from frame two to time t (0 at one, 1 at two) under constant velocity."""
    return flow_fwd * t, flow_bwd * (1.0 - t)


def quadratic_flows(flow_fwd: torch.Tensor, flow_bwd: torch.Tensor, flow_before: torch.Tensor,
                    flow_after: torch.Tensor, t: Time, before: Time = 1.0,
                    after: Time = 1.0) -> Tuple[torch.Tensor, torch.Tensor]:
    """Flows from frame one and from frame two to time t under constant acceleration.

    ``flow_fwd``: one -> two; ``flow_bwd``: two -> one; ``flow_before``: one -> the frame ``before`` earlier than
    one, and ``flow_after``: two -> the frame ``after`` later than two, both in units of the time from one to two
    (1: as far apart as the pair; a video with dropped or uneven frames gives other values).
    """
    for name, flow in (("flow_before", flow_before), ("flow_after", flow_after)):
        if flow.shape != flow_fwd.shape:
            raise ValueError(f"{name} is {tuple(flow.shape)}, the pair's flow {tuple(flow_fwd.shape)}: estimate the "
                             f"neighbours' flows at the pair's size")
    for name, gap in (("before", before), ("after", after)):
        # (a tensor gap is not read here: a CUDA graph being captured changes it between replays)
        if not isinstance(gap, torch.Tensor) and not gap > 0:
            raise ValueError(f"{name} = {gap}: give the neighbour's distance in time from its frame, above 0, in "
                             f"units of the pair's interval")
    # frame one: x(s) = v s + a s^2 / 2 through x(1) = flow_fwd and x(-before) = flow_before
    accel_one = acceleration(flow_fwd, flow_before, before)
    to_t_one = (flow_fwd - accel_one * 0.5) * t + accel_one * (t * t * 0.5)
    # frame two: y(r) = w r + b r^2 / 2, r = s - 1, through y(-1) = flow_bwd and y(after) = flow_after
    accel_two = acceleration(flow_bwd, flow_after, after)
    s = 1.0 - t
    to_t_two = (flow_bwd - accel_two * 0.5) * s + accel_two * (s * s * 0.5)
    return to_t_one, to_t_two


def acceleration(flow_pair: torch.Tensor, flow_side: torch.Tensor, gap: Time = 1.0) -> torch.Tensor:
    """A frame's acceleration per pixel, in pixels per pair interval squared, from its flow to the pair's other
    frame (``flow_pair``) and to its neighbour ``gap`` intervals away on the other side (``flow_side``)."""
    return (flow_pair * gap + flow_side) * (2.0 / (gap * (1.0 + gap)))


def fill_neighbour_flows(flow_fwd: torch.Tensor, flow_bwd: torch.Tensor, flow_before: Optional[torch.Tensor],
                         flow_after: Optional[torch.Tensor], before: Time = 1.0,
                         after: Time = 1.0) -> Tuple[torch.Tensor, torch.Tensor, Time, Time]:
    """``quadratic_flows``' neighbour flows and gaps where one side of the pair has no neighbour (None): that side
    takes the other frame's acceleration carried across the pair (backward-warped by the pair's flow, edge values
    repeated), as the flow to a neighbour one interval away. Both given: returned as they are."""
    if flow_before is None and flow_after is None:
        raise ValueError("no neighbour on either side: move the pair at constant velocity (linear_flows)")
    if flow_after is None:  # frame two's pixel y came from frame one's y + flow_bwd(y)
        carried = backwarp(acceleration(flow_fwd, flow_before, before).float(), flow_bwd.float(), "border")
        flow_after, after = (carried - flow_bwd.float()).to(flow_bwd.dtype), 1.0
    elif flow_before is None:
        carried = backwarp(acceleration(flow_bwd, flow_after, after).float(), flow_fwd.float(), "border")
        flow_before, before = (carried - flow_fwd.float()).to(flow_fwd.dtype), 1.0
    return flow_before, flow_after, before, after
