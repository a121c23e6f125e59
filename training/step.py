"""One training step's pieces: the forward pass as a module, its losses, the weights' moving average and the
optimizer state's compact form."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Sequence, Tuple

import torch

from softsplat_vfi.model.motion import straight_neighbour
from softsplat_vfi.model.warp import resize_flow
from training.losses import RECONSTRUCTION_LOSSES, census_loss, frequency_loss

if TYPE_CHECKING:
    from training.compiled import CompiledRegions


class TrainStep(torch.nn.Module):
    """One forward pass as a module, so DistributedDataParallel's hooks see it."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, one: torch.Tensor, two: torch.Tensor, t: torch.Tensor, flow_before: Optional[torch.Tensor] = None,
                flow_after: Optional[torch.Tensor] = None,
                quad: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, List[torch.Tensor]]:
        """The frames at ``t`` and the flow pyramid; with the outer flows (one -> before, two -> after:
        ``Network.outer_flows``, computed without gradients), along quadratic paths where ``quad`` (one per sample)
        is 1 and at constant velocity where it is 0."""
        state = self.net.estimate_flow(one, two)
        neighbours = None
        if flow_before is not None:
            # where a sample has no neighbours, the stand-ins of the straight paths: the linear path exactly
            keep = quad.view(-1, 1, 1, 1) > 0
            neighbours = (torch.where(keep, flow_before.to(state.flow_fwd.dtype), straight_neighbour(state.flow_fwd)),
                          torch.where(keep, flow_after.to(state.flow_bwd.dtype), straight_neighbour(state.flow_bwd)))
        return self.net.synthesize(state, t, neighbours), state.flow_pyramid


def step_losses(pred: torch.Tensor, pyramid: Sequence[torch.Tensor], mid: torch.Tensor, gt: Optional[torch.Tensor],
                n_real: int, batch: int, census_weight: float, flow_weight: float, reconstruction: str = "laplacian",
                frequency_weight: float = 0.0) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The step's loss and its parts (reconstruction, one of training.losses' RECONSTRUCTION_LOSSES; census; flow
    end-point error against the synthetic samples' ground truth ``gt``: their forward flows, then their backward
    flows; None without synthetic samples). The flow error is the mean over the pyramid's levels, each in its own
    pixels."""
    loss_rec = RECONSTRUCTION_LOSSES[reconstruction](pred, mid)
    loss_census = census_loss(pred, mid)
    loss = loss_rec + census_weight * loss_census
    if frequency_weight:
        loss = loss + frequency_weight * frequency_loss(pred, mid)
    loss_flow = torch.zeros((), device=pred.device)
    if gt is not None:
        for level_flow in pyramid:
            # the synthetic samples' rows: after the n_real footage ones, in both directions
            est = torch.cat([level_flow[n_real:batch], level_flow[batch + n_real:]], 0).float()
            loss_flow = loss_flow + (est - resize_flow(gt, est.shape[2:])).norm(dim=1).mean()
        loss_flow = loss_flow / len(pyramid)
        loss = loss + flow_weight * loss_flow
    return loss, loss_rec, loss_census, loss_flow


class StepLoss(torch.nn.Module):
    """Forward pass and losses of one step as a module: called as it is, or, with ``--cuda-graph``, through
    torch.cuda.make_graphed_callables, which records its forward and backward (the parameters' gradients
    included) once, and every step replays them."""

    def __init__(self, step: torch.nn.Module, n_real: int, batch: int, census_weight: float, flow_weight: float,
                 bf16: bool, reconstruction: str = "laplacian", synthetic: bool = False,
                 quadratic: bool = False, regions: Optional["CompiledRegions"] = None,
                 frequency_weight: float = 0.0) -> None:
        """``synthetic``: the inputs hold the synthetic samples' ground-truth flows; ``quadratic``: they hold the
        outer flows and the samples' ``quad`` flags (``TrainStep``). ``regions``: the network's regions compiled
        (``training.compiled``, ``train.py --compile``); the losses are then compiled too."""
        super().__init__()
        self.step = step
        self.regions = regions
        self.losses = step_losses if regions is None else regions.compile(step_losses)
        self.synthetic, self.quadratic = synthetic, quadratic
        self.reconstruction = reconstruction
        self.n_real, self.batch, self.bf16 = n_real, batch, bf16
        self.census_weight, self.flow_weight, self.frequency_weight = census_weight, flow_weight, frequency_weight

    def forward(self, one: torch.Tensor, two: torch.Tensor, t: torch.Tensor, mid: torch.Tensor,
                *extra: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``extra``: the ground-truth flows (with ``synthetic``), then flow_before, flow_after and quad (with
        ``quadratic``): positional tensors, as a recorded CUDA graph takes them."""
        gt = extra[0] if self.synthetic else None
        outer = extra[1 if self.synthetic else 0:] if self.quadratic else ()
        # a graph being recorded cannot hold autocast's cast cache; eager steps keep it
        cache = self.bf16 and not torch.cuda.is_current_stream_capturing()
        compiled = self.regions.active() if self.regions is not None else contextlib.nullcontext()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.bf16, cache_enabled=cache), compiled:
            pred, pyramid = self.step(one, two, t, *outer)
        return self.losses(pred.float(), pyramid, mid, gt, self.n_real, self.batch, self.census_weight,
                           self.flow_weight, self.reconstruction, self.frequency_weight)


class WeightAverage:
    """An exponential moving average of a network's parameters (float32, on its device). The decay ramps up
    from 0.9 over the first steps, (1 + k) / (10 + k), so an average started from trained weights follows
    them at once. ``swapped()`` puts the average into the network for validation and saving."""

    def __init__(self, net: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        self.names = [name for name, _ in net.named_parameters()]
        self.params = [p for _, p in net.named_parameters()]
        self.average = [p.detach().float().clone() for p in self.params]

    @torch.no_grad()
    def update(self) -> None:
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        torch._foreach_lerp_(self.average, [p.detach().float() for p in self.params], 1.0 - decay)
        self.updates += 1

    def state_dict(self) -> dict:
        """The average in float16, the precision of the weights it is saved as: half the bytes, so a resumed run's
        state makes a smaller upload beside the footage; a resume rounds it once (relative 5e-4, far below
        what one training step moves it)."""
        out = {name: a.detach().half().cpu().contiguous() for name, a in zip(self.names, self.average)}
        out["_updates"] = torch.tensor([self.updates])
        return out

    def load(self, state: dict) -> None:
        for name, a in zip(self.names, self.average):
            a.copy_(state[name])
        self.updates = int(state["_updates"][0])

    @contextlib.contextmanager
    def swapped(self) -> Iterator[None]:
        saved = [p.detach().clone() for p in self.params]
        with torch.no_grad():
            for p, a in zip(self.params, self.average):
                p.copy_(a)
        try:
            yield
        finally:
            with torch.no_grad():
                for p, s in zip(self.params, saved):
                    p.copy_(s)


def compact(optim_state: dict) -> dict:
    """AdamW's moments in bfloat16 on the CPU: half the bytes (a smaller state to upload beside
    the footage) and loadable anywhere; loading casts them back to the parameters' float32 and device. Three
    significant digits of a running average are plenty."""
    def pack(v: Any) -> Any:
        if not torch.is_tensor(v):
            return v
        return v.to("cpu", torch.bfloat16) if v.is_floating_point() and v.dim() > 0 else v.cpu()

    state = {k: {name: pack(v) for name, v in per_param.items()} for k, per_param in optim_state["state"].items()}
    return {"state": state, "param_groups": optim_state["param_groups"]}
