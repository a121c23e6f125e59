"""Interpolating numpy images or tensors with a network: the steps that ``engine.Interpolator`` runs.

``interpolate(net, one, two, times)`` takes H x W x 3 float RGB arrays in [0, 1]
(or N x 3 x H x W tensors) and returns one array (or tensor) per t. Most callers want
``engine.Interpolator``, which also owns the device, precision, tiling, CUDA graphs and ensembles.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from .interface import FlowScale, InterpolationNetwork
from .motion import straight_neighbour

if TYPE_CHECKING:
    from .network import Network
    from .network import FlowState
    from .runtime import GraphedPairs
    from .warp import InputPadder

Image = Union[np.ndarray, torch.Tensor]


@dataclass(frozen=True)
class RunSettings:
    """How the functions below run the network: decided by the caller, which checks nothing else (the engine decides
    them once per frame size: ``engine.interpolator.FramePlan``).

    ``autocast_dtype``: float16 or bfloat16 autocast, None for float32. ``flow_scale``: estimate flow at this fraction
    of the resolution, or "auto" (``model.network.AUTO``). ``tile`` > 0: frames in overlapping tiles of at most
    tile x tile pixels (bounded memory; a frame no larger runs as one tile, which gives the whole frame's output),
    their overlaps ``overlap`` pixels wide and cross-faded; 0: whole frames. ValueError where the overlap does not fit
    the tiles.
    """

    autocast_dtype: Optional[torch.dtype] = None
    flow_scale: FlowScale = 1.0
    tile: int = 0
    overlap: int = 128

    def __post_init__(self) -> None:
        if self.tile and not 0 < 2 * self.overlap < self.tile:
            raise ValueError(f"tile {self.tile} needs an overlap between 1 and {self.tile // 2 - 1} pixels, "
                             f"got {self.overlap}")

    def autocast(self, device: torch.device) -> torch.autocast:
        return torch.autocast(device.type, dtype=self.autocast_dtype or torch.float32,
                              enabled=self.autocast_dtype is not None)


WHOLE_FRAMES = RunSettings()


def _to_tensor(x: Image, name: str, device: torch.device) -> torch.Tensor:
    if isinstance(x, np.ndarray):
        if x.ndim != 3 or x.shape[2] != 3:
            raise ValueError(f"{name} must be an H x W x 3 array, got shape {x.shape}")
        x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).permute(2, 0, 1).unsqueeze(0)
    elif isinstance(x, torch.Tensor):
        if x.dim() == 3:
            x = x.unsqueeze(0)
    else:
        raise ValueError(f"{name} must be a numpy array or a torch tensor, got {type(x).__name__}")
    if x.numel() == 0:
        raise ValueError(f"{name} is empty: shape {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return x.to(device, torch.float32)


# Peak working memory of one pair per pixel, measured with NetworkConfig() (the fast weights): 4K on the CPU (fp32)
# took 8.2 GB of resident memory, on the H200 (bf16 autocast) 14.1 GiB allocated. Rounded up for safety. Wider
# networks take more: memory_factor.
BYTES_PER_PIXEL = {"cpu": 1100, "cuda": 2000}
# Peak resident memory above the loaded network, one 1080p pair on the CPU (fp32): 896 bytes per pixel with
# NetworkConfig(), 2000 with NetworkConfig().widened(2) (the default weights), 2.23x; in between and beyond, linear
# in the width factor. The GPU is assumed to scale alike (the wider network's GPU peak is not measured).
_MEMORY_PER_WIDTH = 1.23
TILE_SIZES = (4096, 3072, 2048, 1536, 1024, 768, 512)


def available_memory(device: torch.device) -> int:
    """Bytes a new job can use on ``device``: free GPU memory (plus PyTorch's unused cache), or MemAvailable."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def memory_factor(net: object) -> float:
    """How many times NetworkConfig()'s working memory ``net`` needs (1 for it, for narrower networks and for
    networks without this project's config, such as the published one)."""
    from .network import NetworkConfig

    widths = getattr(getattr(net, "config", None), "encoder_widths", None)
    if not widths:
        return 1.0
    width = widths[-1] / NetworkConfig().encoder_widths[-1]
    return max(1.0, 1.0 + _MEMORY_PER_WIDTH * (width - 1.0))


def needed_memory(height: int, width: int, device: torch.device, factor: float = 1.0) -> int:
    """Bytes one pair of this size needs on ``device``; ``factor``: the network's memory_factor."""
    return int(height * width * BYTES_PER_PIXEL.get(device.type, BYTES_PER_PIXEL["cuda"]) * factor)


def state_memory(height: int, width: int, net: object) -> int:
    """Bytes one pair's ``FlowState`` holds in fp32 at this size (padded to the network's multiple): both frames,
    flows and metrics at full resolution and the synthesis levels' features (level i at 1 / 2^(i + 1)); what
    ``PairStates`` keeps per pair. 0 for a network without this project's config."""
    config = getattr(net, "config", None)
    widths = getattr(config, "encoder_widths", None)
    if not widths:
        return 0
    multiple = 2 ** len(widths)
    pixels = -(-height // multiple) * multiple * -(-width // multiple) * multiple
    channels = 2 * (3 + 2 + 1) + 2 * sum(c / 4 ** (i + 1) for i, c in enumerate(widths[:config.synthesis_levels]))
    return int(pixels * channels * 4)


def fit_tile(height: int, width: int, device: torch.device, available: Optional[int] = None,
             headroom: float = 0.8, factor: float = 1.0, whole_extra: int = 0) -> int:
    """0 when a whole pair fits in memory on ``device``, else the largest tile size of TILE_SIZES that does
    (``factor``: the network's memory_factor; ``whole_extra``: bytes that whole frames need besides, such as the
    flow states quadratic motion caches).

    Larger tiles are preferred: motion is estimated inside each tile, so tiles must be well larger than
    the largest motion. Returns the smallest size when even that does not fit (it is tried anyway).
    """
    budget = headroom * (available_memory(device) if available is None else available)
    if needed_memory(height, width, device, factor) + whole_extra <= budget:
        return 0
    for size in TILE_SIZES:
        if size < max(height, width) and needed_memory(min(size, height), min(size, width), device, factor) <= budget:
            return size
    return TILE_SIZES[-1]


def _ramp(length: int, overlap: int, first: bool, last: bool) -> torch.Tensor:
    """1-D blending weights of one tile: linear ramps over the overlaps, flat inside."""
    w = torch.ones(length)
    ramp = torch.linspace(0.0, 1.0, overlap + 2)[1:-1]
    if not first:
        w[:overlap] = ramp
    if not last:
        w[-overlap:] = ramp.flip(0)
    return w


def tile_layout(size: int, tile: int, overlap: int) -> Tuple[int, List[int]]:
    """(length, starts) of the tiles along one axis: as few tiles of at most ``tile`` pixels as cover
    ``size`` with at least ``overlap`` pixels shared by neighbours, all of one length and evenly spread
    (so an 8K frame in 4096-pixel tiles is not computed nearly twice over)."""
    if size <= tile:
        return size, [0]
    count = -(-(size - overlap) // (tile - overlap))  # ceil
    length = -(-(size + (count - 1) * overlap) // count)
    return length, [round(i * (size - length) / (count - 1)) for i in range(count)]


def _tiled(net: InterpolationNetwork, a: torch.Tensor, b: torch.Tensor, times: List[float], flow_scale: FlowScale,
           tile: int, overlap: int) -> List[torch.Tensor]:
    """Run tile by tile with overlapping borders, cross-fading the overlaps so no seam shows.

    Motion is estimated inside each tile, so a tile must be well larger than the largest motion.
    """
    _, _, h, w = a.shape
    acc = [torch.zeros_like(a) for _ in times]
    weight = torch.zeros(1, 1, h, w, device=a.device)
    th, ys = tile_layout(h, tile, overlap)
    tw, xs = tile_layout(w, tile, overlap)
    for y in ys:
        for x in xs:
            outs = net(a[:, :, y:y + th, x:x + tw], b[:, :, y:y + th, x:x + tw], times, flow_scale)
            wy = _ramp(th, overlap, y == ys[0], y == ys[-1])
            wx = _ramp(tw, overlap, x == xs[0], x == xs[-1])
            mask = (wy[:, None] * wx[None, :]).to(a.device).view(1, 1, th, tw)
            for total, out in zip(acc, outs):
                total[:, :, y:y + th, x:x + tw] += out.float() * mask
            weight[:, :, y:y + th, x:x + tw] += mask
    return [total / weight for total in acc]


def _run(net: InterpolationNetwork, a: torch.Tensor, b: torch.Tensor, times: Sequence[float],
         settings: RunSettings) -> List[torch.Tensor]:
    """The network on two checked N x 3 x H x W float tensors on its device: frames clamped to [0, 1]."""
    with settings.autocast(a.device):
        if settings.tile:
            outs = _tiled(net, a, b, list(times), settings.flow_scale, settings.tile, settings.overlap)
        else:
            outs = net(a, b, list(times), settings.flow_scale)
    return [o.float().clamp(0.0, 1.0) for o in outs]


@torch.no_grad()
def interpolate(net: InterpolationNetwork, one: Image, two: Image, times: Sequence[float] = (0.5,),
                settings: RunSettings = WHOLE_FRAMES) -> List[Image]:
    """Frames at each t of ``times`` between ``one`` (t=0) and ``two`` (t=1), in the input's form."""
    device = next(net.parameters()).device
    a = _to_tensor(one, "one", device)
    b = _to_tensor(two, "two", device)
    if a.shape != b.shape:
        raise ValueError(f"frames differ in size: {tuple(a.shape[-2:])} and {tuple(b.shape[-2:])}")
    outs = _run(net, a, b, times, settings)
    if isinstance(one, np.ndarray):
        return [o[0].permute(1, 2, 0).cpu().numpy() for o in outs]
    if isinstance(one, torch.Tensor) and one.dim() == 3:
        return [o[0] for o in outs]
    return outs


@torch.no_grad()
def interpolate_integer(net: InterpolationNetwork, one: np.ndarray, two: np.ndarray, times: Sequence[float] = (0.5,),
                        settings: RunSettings = WHOLE_FRAMES,
                        graphed: Optional[GraphedPairs] = None) -> List[np.ndarray]:
    """``interpolate`` for H x W x 3 uint8 or uint16 frames (video), returning the same dtype.

    Frames cross to the device as integers and are scaled and rounded there: a quarter
    (uint8) of the bytes of float frames, and no full-frame float arithmetic on the CPU.
    ``graphed`` (a ``model.runtime.GraphedPairs`` for this frame size, built with the same autocast and flow
    scale) replays the network as CUDA graphs instead of running it, on whole frames (``settings.tile`` is then not
    used: the engine's plan gives graphs to whole frames only).
    """
    device, scale = _check_integer_pair(net, one, two, 3)
    # integer frames are finite by construction: straight to the network, without interpolate's checks
    # (its finiteness test reads each frame again and makes the host wait for the GPU)
    a, b = _upload_integer(one, device, scale), _upload_integer(two, device, scale)
    if graphed is not None:
        outs = graphed(a, b, times)
    else:
        outs = _run(net, a, b, times, settings)
    return [_download_integer(out, one.dtype, scale) for out in outs]


# a frame beside the pair and its distance in time from the pair's nearer frame, in units of the pair's interval
Neighbour = Tuple[np.ndarray, float]


class PairStates:
    """The flow states of a stream's last few pairs (``Network.estimate_flow`` on padded frames), so that quadratic
    motion (``interpolate_integer_quadratic``) reuses the neighbouring pairs' flows: in a video each pair's state
    is estimated once, as the look-ahead of the pair before it. Pairs are the frame arrays themselves (compared by
    identity, held while cached), with a tag where one pair has several states (an ensemble's passes). The frames'
    uploads are kept alike (``upload``): each frame of a stream crosses to the device once, not once per pair it is
    in."""

    def __init__(self, size: int = 3) -> None:
        self.size = size
        self._entries: List[Tuple[object, np.ndarray, np.ndarray, object]] = []
        self._uploads: List[Tuple[np.ndarray, torch.Tensor]] = []

    def get(self, one: np.ndarray, two: np.ndarray, estimate: Callable[[np.ndarray, np.ndarray], "FlowState"],
            tag: object = None) -> "FlowState":
        """The cached state of (one, two) under ``tag``, or ``estimate(one, two)``'s, cached (the oldest dropped)."""
        for entry in self._entries:
            if entry[0] == tag and entry[1] is one and entry[2] is two:
                return entry[3]
        state = estimate(one, two)
        self._entries = (self._entries + [(tag, one, two, state)])[-self.size:]
        return state

    def upload(self, frame: np.ndarray, device: torch.device, scale: float) -> torch.Tensor:
        """``frame`` on ``device`` as ``_upload_integer`` gives it, from the last three frames uploaded where it is
        one of them (the tensor is shared: callers do not change it)."""
        for cached, tensor in self._uploads:
            if cached is frame:
                return tensor
        tensor = _upload_integer(frame, device, scale)
        self._uploads = (self._uploads + [(frame, tensor)])[-3:]
        return tensor


def interpolate_integer_quadratic(net: Network, one: np.ndarray, two: np.ndarray, times: Sequence[float],
                                  before: Optional[Neighbour], after: Optional[Neighbour], states: PairStates,
                                  settings: RunSettings = WHOLE_FRAMES,
                                  graphed: Optional[GraphedPairs] = None, passes: int = 1) -> List[np.ndarray]:
    """``start_integer_quadratic``'s frames, waited for."""
    return [frame.result() for frame in start_integer_quadratic(net, one, two, times, before, after, states,
                                                                 settings, graphed, passes)]


@torch.no_grad()
def start_integer_quadratic(net: Network, one: np.ndarray, two: np.ndarray, times: Sequence[float],
                            before: Optional[Neighbour], after: Optional[Neighbour], states: PairStates,
                            settings: RunSettings = WHOLE_FRAMES,
                            graphed: Optional[GraphedPairs] = None, passes: int = 1) -> List[Download]:
    """``interpolate_integer`` along quadratic paths (model/motion.py) through the frame ``before`` one and the frame
    ``after`` two, each with its distance in time; a side without one moves at constant velocity. The flows one ->
    before and two -> after are the neighbouring pairs' (``states``: estimated once, shared with those pairs' own
    calls). Whole frames (``settings.tile`` is not used); ``graphed``: GraphedPairs captured with ``neighbours=True``,
    for one pass (the engine's plan decides both: ``engine.interpolator.FramePlan``).
    ``passes`` 2 or 4: the mean of an ensemble's mirrored and time-reversed passes (model/ensemble.py), each with
    its own flows, estimated once per pair as well (``states`` then needs 3 x ``passes`` entries); an ensemble runs
    eagerly (``graphed`` None). The frames come back as ``Download``s: the next pair's work can be queued before they
    are waited for."""
    from .ensemble import average_passes
    from .warp import InputPadder

    scale = _check_integer_pair(net, one, two, 3)[1]
    for name, side in (("before", before), ("after", after)):
        if side is not None:
            _check_integer_pair(net, one, side[0], 3)
            if not side[1] > 0:
                raise ValueError(f"{name}'s distance in time must be above 0, got {side[1]}")
    padder = InputPadder((1, 3, *one.shape[:2]), 2 ** len(net.config.encoder_widths))

    def one_pass(mirror: bool, reverse: bool) -> List[torch.Tensor]:
        pair, sides, ts = (((two, one), (after, before), [1.0 - float(t) for t in times]) if reverse else
                           ((one, two), (before, after), [float(t) for t in times]))
        return _quadratic_pass(net, pair, sides, ts, states, settings, graphed, padder, scale, mirror,
                               (mirror, reverse))

    return [Download(out.clamp(0, 1), one.dtype, scale) for out in average_passes(passes, one_pass)]


def _quadratic_pass(net: Network, pair: Tuple[np.ndarray, np.ndarray],
                    sides: Tuple[Optional[Neighbour], Optional[Neighbour]], times: Sequence[float],
                    states: PairStates, settings: RunSettings, graphed: Optional[GraphedPairs],
                    padder: "InputPadder", scale: float, mirror: bool, tag: object) -> List[torch.Tensor]:
    """One pass of ``interpolate_integer_quadratic``: float frames (unpadded, mirrored with ``mirror``) at each t;
    the frames' states are cached in ``states`` under ``tag``."""
    (one, two), (before, after) = pair, sides
    device = next(net.parameters()).device

    def estimate(x: np.ndarray, y: np.ndarray) -> "FlowState":
        a, b = (states.upload(z, device, scale) for z in (x, y))
        if mirror:
            a, b = a.flip(3), b.flip(3)
        if graphed is not None:
            return graphed.flow_state(a, b)
        with settings.autocast(device):
            state = net.estimate_flow(*padder.pad(a, b), settings.flow_scale)
        state.flow_pyramid = []  # (only training reads it)
        return state

    state = states.get(one, two, estimate, tag)
    # a side without a neighbour moves at constant velocity, through a tensor stand-in (the graphs take tensors)
    flow_before = (states.get(before[0], one, estimate, tag).flow_bwd if before is not None
                   else straight_neighbour(state.flow_fwd))
    flow_after = (states.get(two, after[0], estimate, tag).flow_fwd if after is not None
                  else straight_neighbour(state.flow_bwd))
    gaps = (before[1] if before is not None else 1.0, after[1] if after is not None else 1.0)
    if graphed is not None:
        return graphed.synthesize(state, times, (flow_before, flow_after), gaps)
    with settings.autocast(device):
        return [padder.unpad(net.synthesize(state, float(t), (flow_before, flow_after), gaps)).float()
                for t in times]


def _check_integer_pair(net: InterpolationNetwork, one: np.ndarray, two: np.ndarray,
                        channels: int) -> Tuple[torch.device, float]:
    """The network's device and the frames' full scale, after checking they are H x W x ``channels`` uint8/uint16
    arrays of one shape."""
    for name, x in (("one", one), ("two", two)):
        if (not isinstance(x, np.ndarray) or x.dtype not in (np.uint8, np.uint16) or x.ndim != 3
                or x.shape[2] != channels):
            raise ValueError(f"{name} must be an H x W x {channels} uint8 or uint16 array")
    if one.shape != two.shape or one.dtype != two.dtype:
        raise ValueError(f"frames differ: {one.shape} {one.dtype} and {two.shape} {two.dtype}")
    return next(net.parameters()).device, 65535.0 if one.dtype == np.uint16 else 255.0


def _upload_integer(x: np.ndarray, device: torch.device, scale: float) -> torch.Tensor:
    """An H x W x C integer frame as a 1 x C x H x W float tensor in [0, 1] on ``device`` (crossing as integers)."""
    x = np.ascontiguousarray(x.astype(np.int32) if x.dtype == np.uint16 else x)
    with warnings.catch_warnings():  # decoded frames are read-only buffers; the tensor is only read
        warnings.simplefilter("ignore", UserWarning)
        ten = torch.from_numpy(x)
    if device.type == "cuda":
        # staged through page-locked memory (PyTorch's caching host allocator reuses the buffers), so the copy is
        # queued without waiting: a copy from pageable memory would wait for the GPU's queued work, the last pair's,
        # and the video pipeline queues the next pair while that runs (docs/findings.md, F32)
        staged = torch.empty(ten.shape, dtype=ten.dtype, pin_memory=True)
        np.copyto(staged.numpy(), x)  # (one thread: torch's CPU copy would wake its thread pool beside the encoder)
        ten = staged.to(device, non_blocking=True)
    else:
        ten = ten.to(device)
    return ten.permute(2, 0, 1).unsqueeze(0).float() / scale


class Download:
    """An integer frame on its way from the device (``start_integer_quadratic``): ``result()`` waits for it.

    From a GPU the rounded frame is copied into page-locked host memory without waiting, so the caller can queue
    the next pair's work first and the GPU never idles while the host waits for a copy; ``result`` waits for that
    copy alone. On the CPU the frame is ready at once. Each result is a new array (nothing else writes to it).
    """

    def __init__(self, out: torch.Tensor, dtype: np.dtype, scale: float) -> None:
        q = (out[0] * scale).round_().permute(1, 2, 0)
        q = q.to(torch.uint8) if dtype == np.uint8 else q.to(torch.int32)
        self._dtype = dtype
        self._frame: Optional[np.ndarray] = None
        self._copied: Optional[torch.cuda.Event] = None
        if q.is_cuda:
            self._host = torch.empty(q.shape, dtype=q.dtype, pin_memory=True)
            self._host.copy_(q, non_blocking=True)
            self._copied = torch.cuda.Event()
            self._copied.record(torch.cuda.current_stream(q.device))
        else:
            self._host = q.contiguous()

    def result(self) -> np.ndarray:
        """The frame, H x W x C of the dtype asked for (waits for the copy the first time)."""
        if self._copied is not None:
            self._copied.synchronize()
            self._copied = None
        if self._frame is None:
            self._frame = self._host.numpy().astype(self._dtype, copy=False)
        return self._frame


class Ready:
    """A frame already made, behind ``Download``'s interface."""

    def __init__(self, frame: np.ndarray) -> None:
        self.frame = frame

    def result(self) -> np.ndarray:
        return self.frame


# a frame as ``start_integer_quadratic`` and ``engine.Interpolator.start_integer_with_neighbours`` return it (the
# pipeline takes any object with its result(): pipeline.video.PendingFrame)
StartedFrame = Union[Download, Ready]


def _download_integer(out: torch.Tensor, dtype: np.dtype, scale: float) -> np.ndarray:
    """A 1 x C x H x W tensor in [0, 1] as an H x W x C array of ``dtype``, rounded on the device."""
    return Download(out, dtype, scale).result()


def _splat_alpha(alpha: torch.Tensor, flow: torch.Tensor, metric: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Alpha forward-warped by ``flow`` with softmax weights ``metric``, and the coverage in [0, 1] (about 0 where
    nothing lands)."""
    from .. import softsplat

    out = softsplat.splat(torch.cat([alpha, torch.ones_like(alpha)], 1), flow.float(), metric.float(), "soft")
    return out[:, :1], out[:, 1:].clamp(0.0, 1.0)


@torch.no_grad()
def interpolate_with_alpha(net: Network, one: torch.Tensor, two: torch.Tensor, alpha_one: torch.Tensor,
                           alpha_two: torch.Tensor, times: Sequence[float] = (0.5,),
                           settings: RunSettings = WHOLE_FRAMES) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """(colour, alpha) at each t for frames with transparency: N x 3 x H x W colour and N x 1 x H x W alpha in
    [0, 1] on the network's device. The colour is the network's; the alpha moves with the network's own flows and
    metrics (softmax splatting from both frames, mixed by t and coverage), so a moving transparent object keeps one
    sharp outline instead of two faint ones. Where neither frame's alpha lands, the two are mixed linearly. Whole
    frames only (``settings.tile`` is not used)."""
    from .warp import InputPadder

    if alpha_one.shape != (one.shape[0], 1, *one.shape[2:]) or alpha_two.shape != alpha_one.shape:
        raise ValueError(f"alpha must be N x 1 x H x W beside colour {tuple(one.shape)}, got "
                         f"{tuple(alpha_one.shape)} and {tuple(alpha_two.shape)}")
    padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
    a, b, alpha_a, alpha_b = padder.pad(one, two, alpha_one, alpha_two)
    with settings.autocast(a.device):
        state = net.estimate_flow(a, b, settings.flow_scale)
        colours = [net.synthesize(state, float(t)) for t in times]
    outs = []
    for t, colour in zip(times, colours):
        t = float(t)
        warped_a, cover_a = _splat_alpha(alpha_a, state.flow_fwd * t, state.metric_one)
        warped_b, cover_b = _splat_alpha(alpha_b, state.flow_bwd * (1.0 - t), state.metric_two)
        weight_a, weight_b = (1.0 - t) * cover_a, t * cover_b
        total = weight_a + weight_b
        splatted = (weight_a * warped_a + weight_b * warped_b) / total.clamp_min(1e-6)
        linear = (1.0 - t) * alpha_a + t * alpha_b
        alpha = torch.where(total > 1e-3, splatted, linear).clamp(0.0, 1.0)
        outs.append((padder.unpad(colour.float().clamp(0.0, 1.0)), padder.unpad(alpha)))
    return outs


def interpolate_integer_alpha(net: Network, one: np.ndarray, two: np.ndarray, times: Sequence[float] = (0.5,),
                              settings: RunSettings = WHOLE_FRAMES) -> List[np.ndarray]:
    """``interpolate_with_alpha`` for H x W x 4 uint8 or uint16 frames (RGB + alpha), returning the same dtype."""
    device, scale = _check_integer_pair(net, one, two, 4)
    a, b = _upload_integer(one, device, scale), _upload_integer(two, device, scale)
    outs = interpolate_with_alpha(net, a[:, :3], b[:, :3], a[:, 3:], b[:, 3:], times, settings)
    return [_download_integer(torch.cat([colour, alpha], 1), one.dtype, scale) for colour, alpha in outs]
