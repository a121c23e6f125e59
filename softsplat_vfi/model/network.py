"""The facade: ``Network()(one, two, times)`` returns one frame per t.

Images are N x 3 x H x W RGB in [0, 1]; any H and W (padded inside to a
multiple of 32 and cropped back). Flow is estimated once per pair and reused
for every t.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from .flow import Encoder, FlowEstimator
from .interface import FlowScale
from .motion import Time, linear_flows, quadratic_flows
from .synthesis import Decoder, Metric, splat_pyramid
from .warp import InputPadder, resize_flow, still_weight, warp_error

# ``flow_scale="auto"``: flow at full scale, and for a pair whose motion exceeds AUTO_MOTION_PX (the 95th percentile
# of its forward flow's length, sampled every 4th pixel) also at AUTO_SCALE, kept where it explains the pair better
# (``warp_error``). Chosen on held-out footage by a rule written before the measurement
# (docs/findings.md, F12).
AUTO = "auto"
AUTO_MOTION_PX = 32.0
AUTO_SCALE = 0.5


@dataclass(frozen=True)
class NetworkConfig:
    """Architecture hyper-parameters; saved next to every checkpoint as JSON."""

    encoder_widths: Tuple[int, ...] = (24, 40, 64, 96, 128)
    flow_finest_level: int = 1  # pyramid index of the finest flow estimate: 1 = 1/4 resolution
    flow_radius: int = 3
    flow_hidden: Tuple[int, ...] = (96, 64, 48)
    # passes of each level's flow decoder, coarsest level first (one value: every level); each pass refines the
    # estimate with the same weights
    flow_iterations: Tuple[int, ...] = (1,)
    synthesis_levels: int = 3  # feature levels splatted: 1/2, 1/4, 1/8
    decoder_widths: Tuple[int, ...] = (32, 48, 96)
    full_width: int = 16
    metric_hidden: int = 12

    def to_dict(self) -> Dict:
        return dataclasses.asdict(self)

    def with_overrides(self, items: Sequence[str]) -> "NetworkConfig":
        """A copy with ``KEY=VALUE`` strings applied (command lines); tuples are comma-separated integers."""
        values = self.to_dict()
        for item in items:
            key, sep, text = item.partition("=")
            if not sep or key not in values:
                raise ValueError(f"{item!r}: use KEY=VALUE with KEY one of {', '.join(sorted(values))}")
            is_tuple = isinstance(values[key], (tuple, list))
            try:
                values[key] = (tuple(int(v) for v in text.split(",") if v.strip()) if is_tuple
                               else type(values[key])(text))
            except ValueError:
                kind = "comma-separated integers" if is_tuple else type(values[key]).__name__
                raise ValueError(f"{item!r}: {key} takes {kind}") from None
        return NetworkConfig.from_dict(values)

    def widened(self, factor: float) -> "NetworkConfig":
        """A copy with every width (encoder, flow decoders, synthesis decoder, full-resolution stage, metric)
        multiplied by ``factor`` and rounded to a multiple of 4: about ``factor``**2 times the parameters."""
        if not factor > 0:
            raise ValueError(f"width factor must be positive, got {factor}")

        def scale(width: int) -> int:
            return max(4, int(round(width * factor / 4)) * 4) if width else 0

        keys = ("encoder_widths", "flow_hidden", "decoder_widths", "full_width", "metric_hidden")
        values = self.to_dict()
        for key in keys:
            value = values[key]
            values[key] = tuple(scale(v) for v in value) if isinstance(value, (tuple, list)) else scale(value)
        return NetworkConfig.from_dict(values)

    def sized(self, width: Optional[float] = None) -> "NetworkConfig":
        """A fresh network's config as train.py's --width builds it: every width times ``width`` (None: as it
        is)."""
        return self if width is None else self.widened(width)

    @classmethod
    def from_dict(cls, data: Dict) -> "NetworkConfig":
        """The config of a saved dict (weights metadata, a run's config.json). A key of REMOVED loads at the value
        every saved network held it at and is dropped; at another value it raises ValueError naming the key."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        if isinstance(values.get("flow_iterations"), int):  # one count for every level
            values["flow_iterations"] = (values["flow_iterations"],)
        unknown = set(values) - names - set(REMOVED)
        if unknown:
            raise ValueError(f"unknown network config keys: {sorted(unknown)}")
        for key in sorted(set(values) & set(REMOVED)):
            if values[key] != REMOVED[key]:
                raise ValueError(f"network config sets {key} = {data[key]!r}, a stage removed from the network "
                                 f"(docs/findings.md, F57); load it with an older commit")
        return cls(**{k: v for k, v in values.items() if k in names})


# Fields removed with the stages they added to trained networks (docs/findings.md, F57: --network
# KEY=VALUE) and the value every saved config holds them at (no stage); configs holding those values still load.
REMOVED: Dict[str, Any] = {"flow_refine_hidden": (), "refine_width": 0, "flow_upsample_hidden": 0}


@dataclass
class FlowState:
    """What one pair costs once, reused for every t: features, flows and metrics."""

    one: torch.Tensor
    two: torch.Tensor
    feats_one: List[torch.Tensor]
    feats_two: List[torch.Tensor]
    flow_fwd: torch.Tensor  # one -> two, full resolution
    flow_bwd: torch.Tensor  # two -> one
    metric_one: torch.Tensor
    metric_two: torch.Tensor
    flow_pyramid: List[torch.Tensor]


@dataclass
class PairFlows:
    """A padded pair on its way through ``Network.flow_steps``: what each step takes, and returns anew (a step leaves
    its input as it was, so that a CUDA graph can copy what changed back into the input's tensors)."""

    one: torch.Tensor
    two: torch.Tensor
    feats_one: List[torch.Tensor] = field(default_factory=list)
    feats_two: List[torch.Tensor] = field(default_factory=list)
    flow_fwd: Optional[torch.Tensor] = None  # one -> two, full resolution
    flow_bwd: Optional[torch.Tensor] = None  # two -> one
    pyramid: List[torch.Tensor] = field(default_factory=list)
    candidates: Optional[torch.Tensor] = None  # "auto": per sample, whether the half-scale flows are checked

    def with_flows(self, flow_fwd: torch.Tensor, flow_bwd: torch.Tensor) -> "PairFlows":
        """A copy with other flows, every other field shared."""
        return PairFlows(self.one, self.two, self.feats_one, self.feats_two, flow_fwd, flow_bwd, self.pyramid,
                         self.candidates)


@dataclass(frozen=True)
class FlowStep:
    """One step of ``Network.flow_steps``: ``run`` takes a pair's ``PairFlows`` so far and returns the next. A step
    with a ``flag`` (a per-sample bool tensor of its input) is conditional: it runs only where some sample's flag is
    set (``runs_on``)."""

    name: str
    run: Callable[[PairFlows], PairFlows]
    flag: Optional[Callable[[PairFlows], torch.Tensor]] = None

    def runs_on(self, flows: PairFlows) -> bool:
        """Whether the step runs on ``flows``: without a flag always; with one, eagerly (and when a CUDA graph
        replays) where some sample's flag is set, one read on the host; under ``torch.compile`` always, masked by the
        flag inside the step: the host read would split the graph, and the conditional branch would compile
        mid-video, on its first flagged pair."""
        if self.flag is None or torch.compiler.is_compiling():
            return True
        return bool(self.flag(flows).any())


class Network(nn.Module):
    """This project's network (``model.interface.InterpolationNetwork``, with every capability)."""

    flow_alpha = True
    quadratic_paths = True
    cuda_graphs = True
    tiles = True
    bf16_autocast = True
    passes = 1

    @property
    def base(self) -> "Network":
        """The network each pass runs: itself."""
        return self

    def __init__(self, config: NetworkConfig = NetworkConfig()) -> None:
        super().__init__()
        # inference: textured neighbourhoods that did not move keep zero flow (model.warp.still_weight); False
        # only to measure what that does
        self.hold_still = True
        self.config = config
        self.encoder = Encoder(config.encoder_widths)
        self.flow = FlowEstimator(config.encoder_widths, config.flow_finest_level, config.flow_radius,
                                  config.flow_hidden, config.flow_iterations)
        self.metric = Metric(config.metric_hidden)
        self.decoder = Decoder(config.encoder_widths[:config.synthesis_levels], config.decoder_widths,
                               config.full_width)

    def estimate_flow(self, one: torch.Tensor, two: torch.Tensor, flow_scale: FlowScale = 1.0) -> FlowState:
        """Features, bidirectional flow and metrics for a padded pair (H, W multiples of 32).

        ``flow_scale`` < 1 estimates flow on downscaled frames (for 4K and up) and
        upsamples it; the synthesis features stay at full resolution. ``"auto"``: full scale, and half scale for the
        pairs of large motion whose frames it explains better (``AUTO``; per sample).
        """
        return self.flow_state(self.run_flow_steps(one, two, flow_scale))

    def flow_state(self, flows: PairFlows) -> FlowState:
        """The ``FlowState`` of a padded pair's flows (``run_flow_steps``): the splatting metrics added."""
        metric_one = self.metric(flows.one, flows.two, flows.flow_fwd)
        metric_two = self.metric(flows.two, flows.one, flows.flow_bwd)
        levels = self.config.synthesis_levels
        return FlowState(flows.one, flows.two, flows.feats_one[:levels], flows.feats_two[:levels], flows.flow_fwd,
                         flows.flow_bwd, metric_one, metric_two, list(flows.pyramid))

    def outer_flows(self, one: torch.Tensor, two: torch.Tensor, before: Optional[torch.Tensor],
                    after: Optional[torch.Tensor],
                    flow_scale: FlowScale = 1.0) -> Tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
        """The flows one -> ``before`` and two -> ``after`` (``synthesize``'s ``neighbour_flows``) of padded frames,
        in one batched pass of the encoder and the flow estimator (no metrics, no synthesis); None for a side given
        None. The pairs are estimated as a video stream meets them, (before, one) and (two, after), so that
        ``"auto"`` checks the same flows the video tool checks: the backward flow of the first, the forward flow of
        the second."""
        pairs = [(x, y) for x, y in ((before, one), (two, after)) if x is not None and y is not None]
        if not pairs:
            return None, None
        n = one.shape[0]
        flows = self.run_flow_steps(torch.cat([x for x, _ in pairs]), torch.cat([y for _, y in pairs]), flow_scale)
        flow_before = flows.flow_bwd[:n] if before is not None else None
        flow_after = flows.flow_fwd[-n:] if after is not None else None
        return flow_before, flow_after

    def run_flow_steps(self, one: torch.Tensor, two: torch.Tensor, flow_scale: FlowScale) -> PairFlows:
        """A padded pair's encoder features, its flows one -> two and two -> one at full resolution and the flow
        pyramid (with ``"auto"``, the full-scale estimate's): ``flow_steps`` run in order, each conditional step
        where it ``runs_on`` the flows so far."""
        flows = PairFlows(one, two)
        for step in self.flow_steps(flow_scale):
            if step.runs_on(flows):
                flows = step.run(flows)
        return flows

    def flow_steps(self, flow_scale: FlowScale) -> List[FlowStep]:
        """How a padded pair becomes flows, declared once: the steps that ``run_flow_steps`` runs eagerly (and
        compiled), and that ``model.runtime.GraphedPairs`` captures as one CUDA graph each (``FlowChain``), so that
        every route applies every rule. Each step takes the previous step's ``PairFlows`` (the first step
        ``PairFlows(one, two)``).

        1. ``estimate``: the encoder features, and the flows at ``flow_scale`` (``"auto"``: at full scale, with
           ``auto_candidates``: which samples to check at half scale).
        2. ``auto_choice`` (``"auto"`` only; conditional on the candidates): the half-scale flows where they explain
           the pair better (``auto_choice``).
        3. ``finish`` (inference with ``hold_still``): the inference rules on the flows kept: a still, textured
           neighbourhood keeps zero motion (``still``).
        """
        check_flow_scale(flow_scale)
        steps = [FlowStep("estimate", functools.partial(self._estimate, flow_scale))]
        if flow_scale == AUTO:
            steps.append(FlowStep("auto_choice", self._choose, flag=lambda flows: flows.candidates))
        if self.hold_still and not self.training:
            steps.append(FlowStep("finish", self._finish))
        return steps

    def _estimate(self, flow_scale: FlowScale, flows: PairFlows) -> PairFlows:
        """``flow_steps``' first step."""
        feats_one, feats_two, flow_fwd, flow_bwd, pyramid = self.first_flows(flows.one, flows.two, flow_scale)
        candidates = self.auto_candidates(flow_fwd) if flow_scale == AUTO else None
        return PairFlows(flows.one, flows.two, feats_one, feats_two, flow_fwd, flow_bwd, pyramid, candidates)

    def _choose(self, flows: PairFlows) -> PairFlows:
        """``flow_steps``' ``"auto"`` step."""
        return flows.with_flows(*self.auto_choice(flows.one, flows.two, flows.feats_one, flows.feats_two,
                                                  flows.flow_fwd, flows.flow_bwd, flows.candidates))

    def _finish(self, flows: PairFlows) -> PairFlows:
        """``flow_steps``' last step."""
        moving = 1.0 - self.still(flows.one, flows.two)
        return flows.with_flows(flows.flow_fwd * moving.to(flows.flow_fwd.dtype),
                                flows.flow_bwd * moving.to(flows.flow_bwd.dtype))

    @staticmethod
    def still(one: torch.Tensor, two: torch.Tensor) -> torch.Tensor:
        """``model.warp.still_weight`` of a padded pair (a method, so that ``model.runtime.compile_network`` can
        compile it)."""
        return still_weight(one, two)

    def first_flows(self, one: torch.Tensor, two: torch.Tensor, flow_scale: FlowScale
                    ) -> Tuple[List[torch.Tensor], List[torch.Tensor], torch.Tensor, torch.Tensor, List[torch.Tensor]]:
        """Both frames' encoder features, and the flows and their pyramid at ``flow_scale`` (``"auto"``: at full
        scale, before ``auto_candidates`` and ``auto_choice``): ``flow_steps``' first step, without the rules of the
        later ones."""
        check_flow_scale(flow_scale)
        feats_one = self.encoder(one)
        feats_two = self.encoder(two)
        scale = 1.0 if flow_scale == AUTO else float(flow_scale)
        return (feats_one, feats_two, *self._flows_at(one, two, feats_one, feats_two, scale))

    @staticmethod
    def auto_candidates(flow_fwd: torch.Tensor) -> torch.Tensor:
        """``AUTO``'s first test, per sample (a bool tensor): whether the forward flow's 95th percentile length
        exceeds AUTO_MOTION_PX."""
        # (every 4th pixel each way: the full-size order statistic costs half a network pass at 1080p)
        length = flow_fwd[:, :, ::4, ::4].float().norm(dim=1).flatten(1)
        return length.kthvalue(max(1, round(0.95 * length.shape[1])), dim=1).values > AUTO_MOTION_PX

    def auto_choice(self, one: torch.Tensor, two: torch.Tensor, feats_one: List[torch.Tensor],
                    feats_two: List[torch.Tensor], flow_fwd: torch.Tensor, flow_bwd: torch.Tensor,
                    candidates: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``AUTO``'s second test: per sample, the half-scale flows where the sample is one of ``candidates`` and
        they explain the pair better (``model.warp.warp_error``), else the full-scale ones. No host synchronisation,
        so a CUDA graph can replay it (model/runtime.py)."""
        half_fwd, half_bwd, _ = self._flows_at(one, two, feats_one, feats_two, AUTO_SCALE)
        better = candidates & (warp_error(one, two, half_fwd, half_bwd) < warp_error(one, two, flow_fwd, flow_bwd))
        pick = better.view(-1, 1, 1, 1)
        return torch.where(pick, half_fwd, flow_fwd), torch.where(pick, half_bwd, flow_bwd)

    def _flows_at(self, one: torch.Tensor, two: torch.Tensor, feats_one: List[torch.Tensor],
                  feats_two: List[torch.Tensor],
                  flow_scale: float) -> Tuple[torch.Tensor, torch.Tensor, List[torch.Tensor]]:
        """The flows one -> two and two -> one at full resolution, estimated at ``flow_scale``, and their pyramid."""
        size = one.shape[2:]
        if flow_scale == 1.0:
            return self.flow(feats_one, feats_two, size)
        small = [F.interpolate(x, scale_factor=flow_scale, mode="bilinear", align_corners=False,
                               antialias=True) for x in (one, two)]
        padder = InputPadder(small[0].shape, 2 ** len(self.config.encoder_widths))
        small = padder.pad(*small)
        flow_fwd, flow_bwd, pyramid = self.flow(self.encoder(small[0]), self.encoder(small[1]), small[0].shape[2:])
        return resize_flow(padder.unpad(flow_fwd), size), resize_flow(padder.unpad(flow_bwd), size), pyramid

    def synthesize(self, state: FlowState, t: Union[float, torch.Tensor],
                   neighbour_flows: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
                   neighbour_times: Tuple[Time, Time] = (1.0, 1.0)) -> torch.Tensor:
        """The frame at time t: a float, or a tensor of N times (one per sample).

        ``neighbour_flows`` (one -> the frame before one, two -> the frame after two; ``outer_flows``): frames and
        features move along quadratic paths (model/motion.py), a side given None at constant velocity; None:
        constant velocity. ``neighbour_times``: how far the frame before is from one and the frame after from two,
        in units of the pair's interval.
        """
        if isinstance(t, torch.Tensor):
            t = t.to(state.flow_fwd.device, state.flow_fwd.dtype).view(-1, 1, 1, 1)
        if neighbour_flows is None:
            to_t_one, to_t_two = linear_flows(state.flow_fwd, state.flow_bwd, t)
        else:
            to_t_one, to_t_two = quadratic_flows(state.flow_fwd, state.flow_bwd, *neighbour_flows, t,
                                                 *neighbour_times)
        warped_one = splat_pyramid(state.one, state.feats_one, to_t_one, state.metric_one)
        warped_two = splat_pyramid(state.two, state.feats_two, to_t_two, state.metric_two)
        return self.decoder(warped_one, warped_two, t)

    def forward(self, one: torch.Tensor, two: torch.Tensor, times: Sequence[float] = (0.5,),
                flow_scale: FlowScale = 1.0) -> List[torch.Tensor]:
        """Interpolate frames at each t in ``times`` (0 < t < 1); any H and W."""
        _check_pair(one, two)
        check_times(times)
        padder = InputPadder(one.shape, 2 ** len(self.config.encoder_widths))
        one_p, two_p = padder.pad(one, two)
        state = self.estimate_flow(one_p, two_p, flow_scale)
        return [padder.unpad(self.synthesize(state, float(t))) for t in times]

    def forward_four(self, before: Optional[torch.Tensor], one: torch.Tensor, two: torch.Tensor,
                     after: Optional[torch.Tensor], times: Sequence[float] = (0.5,),
                     flow_scale: FlowScale = 1.0) -> List[torch.Tensor]:
        """Interpolate between ``one`` and ``two`` along quadratic paths (model/motion.py), given the frame
        ``before`` one and the frame ``after`` two, each as far in time from its neighbour as one is from two;
        None for a side the shot does not have (a shot's first or last pair): that frame moves at constant
        velocity, as in the video tool. Two flow estimates (the pair; one -> before and two -> after in one batch);
        a video stream reuses its neighbouring pairs' flows instead."""
        if before is None and after is None:
            raise ValueError("forward_four needs the frame before one, the frame after two or both: for two frames "
                             "call the network itself")
        _check_pair(one, two)
        for name, side in (("before", before), ("after", after)):
            if side is not None:
                _check_pair(one, side, ("one", name))
        check_times(times)
        padder = InputPadder(one.shape, 2 ** len(self.config.encoder_widths))
        one_p, two_p = padder.pad(one, two)
        before_p, after_p = (padder.pad(x)[0] if x is not None else None for x in (before, after))
        state = self.estimate_flow(one_p, two_p, flow_scale)
        neighbours = self.outer_flows(one_p, two_p, before_p, after_p, flow_scale)
        return [padder.unpad(self.synthesize(state, float(t), neighbours)) for t in times]


def check_flow_scale(flow_scale: FlowScale) -> None:
    """A positive factor, or ``"auto"`` (ValueError otherwise)."""
    if flow_scale == AUTO:
        return
    if isinstance(flow_scale, str) or not float(flow_scale) > 0.0:
        raise ValueError(f"flow scale {flow_scale!r}: use auto or a factor above 0, such as 0.5 for 4K")


def check_times(times: Sequence[float]) -> None:
    """Each t strictly between 0 and 1 (ValueError otherwise)."""
    for t in times:
        if not 0.0 < float(t) < 1.0:
            raise ValueError(f"times must lie strictly between 0 and 1, got {t}")


def _check_pair(one: torch.Tensor, two: torch.Tensor, names: Tuple[str, str] = ("one", "two")) -> None:
    for name, x in zip(names, (one, two)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[1] != 3:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{name} must be an N x 3 x H x W tensor, got {shape}")
        if x.shape[2] == 0 or x.shape[3] == 0:
            raise ValueError(f"{name} is empty: {tuple(x.shape)}")
    if one.shape != two.shape:
        raise ValueError(f"frames differ in size: {names[0]} is {tuple(one.shape)}, {names[1]} is {tuple(two.shape)}")
    if one.device != two.device:
        raise ValueError(f"{names[0]} is on {one.device}, {names[1]} on {two.device}: put both on one device")


def count_parameters(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())
