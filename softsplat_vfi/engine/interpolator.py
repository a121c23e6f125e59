"""The inference engine: one object that owns the network and every choice about running it.

``Interpolator(InterpolatorOptions(...))`` loads the weights onto a device and keeps the policy that
run.py, the video pipeline, the benchmarks and the Python API share: precision (autocast), flow scale,
tiling of frames too large for memory, CUDA graphs or ``torch.compile`` for videos, test-time ensembles,
and how transparency is interpolated. What depends on the frame size is decided once per size, on its first pair
(``FramePlan``, ``plan_frames``), and every pair of that size runs from it.

Conventions
-----------
- Float frames: H x W x 3 numpy arrays or 3 x H x W / N x 3 x H x W tensors, RGB, values in [0, 1]; the
  results come back in the same form. Alpha (``interpolate_with_alpha``): H x W float arrays in [0, 1].
- Integer frames (video, ``interpolate_integer``): H x W x 3 (RGB) or H x W x 4 (RGB + alpha) uint8 or
  uint16 arrays; the results have the same shape and dtype.
- t in (0, 1): the time of an output frame between ``one`` (t = 0) and ``two`` (t = 1).

    from . import Interpolator, InterpolatorOptions

    interpolator = Interpolator(InterpolatorOptions(device="cpu", ensemble=2))
    middle, = interpolator(one, two, [0.5])
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import nn

from ..softsplat import warn_without_fast_kernels

# the options and checks that need no torch live in engine/options.py
from .options import InterpolatorOptions, check_times, frames_key
from ..media.errors import FieldError, Said

if TYPE_CHECKING:
    from ..model.inference import RunSettings, StartedFrame
    from ..model.interface import InterpolationNetwork
    from ..model.runtime import GraphedPairs

Image = Union[np.ndarray, torch.Tensor]
# the engine's notes (what it decided for the caller): INFO records, whose Said messages name fields; a command
# line shows them on stderr (engine.options.show_notes)
log = logging.getLogger(__name__)


def resolve_device(name: str) -> torch.device:
    """The device named by ``name``: auto (CUDA when there is a GPU, else the CPU), cpu, cuda or cuda:N."""
    if name == "auto":
        if not torch.cuda.is_available():
            return torch.device("cpu")
        # under torchrun each process takes its own GPU
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise ValueError(f"device {name!r} is not a device: use auto, cpu, cuda or cuda:N") from exc
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {name!r} asked for, but no CUDA GPU is available: use device 'cpu' (or auto)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    elif device.type != "cpu":
        raise ValueError(f"device {name!r}: use auto, cpu, cuda or cuda:N")
    return device


def autocast_dtype(precision: str, device: torch.device,
                   network: "InterpolationNetwork") -> Optional[torch.dtype]:
    """The autocast dtype of ``InterpolatorOptions.precision`` for ``network`` on ``device`` (None: float32).

    "auto" is bfloat16 for a network trained under it (``bf16_autocast``: this project's) on a CUDA GPU of compute
    capability 8.0 or more (bfloat16 tensor cores), float32 otherwise: on the CPU, on older GPUs (which emulate
    bfloat16) and for the published architecture (which keeps the arithmetic it was trained in)."""
    if precision == "auto":
        own = network.bf16_autocast
        fast_bf16 = device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 0)
        return torch.bfloat16 if own and fast_bf16 else None
    return {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


@functools.lru_cache(maxsize=8)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    """The first 16 hex digits of the file's SHA-256 (cached per size and modification time)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def with_weights_defaults(options: InterpolatorOptions) -> InterpolatorOptions:
    """``options`` with each field left None (``flow_scale``) set to the weights file's own default
    (``model.weights.inference_defaults``); every way in resolves its defaults here, through ``Interpolator``.
    WeightsError naming the file where the default it states is no valid value."""
    from ..model.weights import FALLBACK_DEFAULTS, WeightsError, inference_defaults

    open_fields = [name for name in FALLBACK_DEFAULTS if getattr(options, name) is None]
    if not open_fields:
        return options
    defaults = inference_defaults(options.weights)
    try:
        return dataclasses.replace(options, **{name: defaults[name] for name in open_fields})
    except ValueError as exc:
        raise WeightsError(f"{options.weights}: the inference defaults in its metadata do not fit: {exc}") from None


def compile_error(exc: ValueError) -> FieldError:
    """``model.runtime.check_compilable``'s refusal as the engine says it: a FieldError naming ``compile``."""
    return FieldError(Said("{compile:=True}: {why}", why=exc))


def check_compile(device: torch.device) -> None:
    """What ``compile=True`` needs on ``device``, checked before any work (``compile_error``): for a tool that stops
    before reading its data, where the engine checks it as it compiles."""
    from ..model.runtime import check_compilable

    try:
        check_compilable(device)
    except ValueError as exc:
        raise compile_error(exc) from None


# networks loaded, by (real path, size, modification time, device), the oldest dropped past _MAX_LOADED
_LOADED: Dict[Tuple[str, int, int, str], nn.Module] = {}
_MAX_LOADED = 4


def load_network(weights: Path, device: torch.device) -> nn.Module:
    """The network for ``weights`` on ``device``, loaded once per file and device: the same file by another path
    (relative, absolute, through a link) is not loaded again, and a file rewritten since (a training run's new
    export) is."""
    from ..model.weights import load_any

    try:
        stat = weights.stat()
    except OSError:
        return load_any(weights, device)  # (the loader says what is wrong, naming the path as given)
    key = (str(weights.resolve()), stat.st_size, stat.st_mtime_ns, str(device))
    if key not in _LOADED:
        while len(_LOADED) >= _MAX_LOADED:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[key] = load_any(weights, device)
    return _LOADED[key]


# quadratic motion keeps the flow states of the pair and of its two neighbouring pairs, per ensemble pass
_STATES_PER_PASS = 3
# plans kept per interpolator (the oldest dropped): a video has one frame size, a folder of images a few
_MAX_PLANS = 16


@dataclasses.dataclass(frozen=True)
class FramePlan:
    """Every choice about running pairs of one frame size, made once by ``plan_frames`` on the first pair of that
    size and kept by the ``Interpolator``: each later pair of the size runs from it, and ``model.inference`` takes
    ``settings`` as decided.

    ``tile``: tiles of that many pixels (0: whole frames): ``InterpolatorOptions.tile``, or for "auto" what fits in
    free memory. ``settings``: what ``model.inference`` runs: the autocast, the flow scale, and ``tile`` with its
    overlap where the frames are larger than one tile (else 0: whole frames). ``moves_alpha``: frames with alpha
    move it with the flow (else it is mixed linearly in time). ``quadratic``: RGB pairs with neighbours move along
    quadratic paths (else at constant velocity, ``why_linear`` says why). ``graphs``: integer pairs run as CUDA
    graphs (``Interpolator.cuda_graphs_for`` captures them on first use, per size and route).

    The key is the size alone: the device and the options are the interpolator's own, the dtype decides nothing,
    and the channels only choose which of the decisions applies (``moves_alpha`` for frames with alpha, which then
    run their colour planes from the same plan; ``quadratic`` for RGB).
    """

    height: int
    width: int
    tile: int
    settings: "RunSettings"
    moves_alpha: bool
    quadratic: bool
    why_linear: str
    graphs: bool


def plan_frames(height: int, width: int, options: InterpolatorOptions, runner: "InterpolationNetwork",
                device: torch.device, autocast_dtype: Optional[torch.dtype]) -> FramePlan:
    """The ``FramePlan`` for pairs of ``height`` x ``width`` frames, run by ``runner`` (the network, or its
    ensemble) on ``device`` under ``options``. Where "auto" tiles are needed it says so (a note: ``logging``,
    INFO); where whole frames fit, but not beside the flow states quadratic motion keeps, the pairs move at constant
    velocity (said by the caller, with the reason, where a pair has neighbours). ValueError where the tiles'
    overlap does not fit them (``model.inference.RunSettings``)."""
    from ..model.inference import RunSettings, available_memory, fit_tile, memory_factor, needed_memory, state_memory

    net, kept = runner.base, _STATES_PER_PASS * runner.passes
    if not runner.tiles:
        tile = beside_states = 0
    elif options.tile != "auto":
        tile = beside_states = int(options.tile)
    else:
        factor = memory_factor(net)
        tile = fit_tile(height, width, device, factor=factor)
        beside_states = tile
        if runner.quadratic_paths and not tile:
            beside_states = fit_tile(height, width, device, factor=factor,
                                     whole_extra=kept * state_memory(height, width, net))
        if tile:
            log.info(Said("{width}x{height} frames need about {need:.1f} GiB on {device}, {free:.1f} GiB is free: "
                          "processing in {size}-pixel tiles ({tile:=0} forces whole frames)", width=width,
                          height=height, need=needed_memory(height, width, device, factor) / 2**30, device=device,
                          free=available_memory(device) / 2**30, size=tile))
    why_linear = ("the published network" if not runner.quadratic_paths else "tiles" if tile else
                  f"whole frames fit in free memory, but not beside the flows of {kept} pairs it keeps"
                  if beside_states else "")
    settings = RunSettings(autocast_dtype, options.flow_scale, tile if max(height, width) > tile > 0 else 0,
                           options.overlap_for(tile))
    return FramePlan(height, width, tile, settings,
                     moves_alpha=options.alpha == "flow" and runner.flow_alpha and not tile,
                     quadratic=not why_linear, why_linear=why_linear,
                     graphs=options.cuda_graphs and runner.cuda_graphs and device.type == "cuda" and not tile)


class Later:
    """A frame of ``Interpolator.lazy_frames``: ``make`` (which gives a list of one started frame) runs when
    ``result()`` is first called."""

    def __init__(self, make: Callable[[], List["StartedFrame"]]) -> None:
        self._make: Optional[Callable[[], List["StartedFrame"]]] = make
        self._frame: Optional[np.ndarray] = None

    def result(self) -> np.ndarray:
        if self._make is not None:
            self._frame = self._make()[0].result()
            self._make = None  # the pair's frames are let go
        return self._frame


class Interpolator:
    """The network with its running policy; see the module docstring for the conventions.

    ``network`` (optional) runs an already-built network (tests, benchmarks, a model being trained) instead of
    loading ``options.weights``; ``options.device`` is then ignored. ``options`` keeps what was given, with the
    defaults the weights file states in place of None (``with_weights_defaults``; also where ``network`` is given:
    the file names the weights, as in ``job_id``). ``lazy_frames``: the frames that
    ``start_integer_with_neighbours`` gives along quadratic paths are each made when its ``result()`` is first
    called, so that a caller can report or stop between them (the ComfyUI nodes); the frames are the same.
    ``plan(height, width)``: the ``FramePlan`` that pairs of that size run from (made once per size).
    """

    def __init__(self, options: Optional[InterpolatorOptions] = None,
                 network: Optional[nn.Module] = None, lazy_frames: bool = False) -> None:
        from ..model.ensemble import with_ensemble
        from ..model.runtime import compile_network

        options = options if options is not None else InterpolatorOptions()  # (None: every option's default)
        self.lazy_frames = lazy_frames
        self.network = network if network is not None else load_network(Path(options.weights),
                                                                         resolve_device(options.device))
        self.options = options = with_weights_defaults(options)  # (a missing file was said by the loader)
        self.device = next(self.network.parameters()).device
        self.autocast_dtype = autocast_dtype(options.precision, self.device, self.network)
        warn_without_fast_kernels(self.device)
        if options.compile:
            try:
                self.network = compile_network(self.network)
            except ValueError as exc:  # (model.runtime.check_compilable: what compiling needs, and the fix)
                raise compile_error(exc) from None
            log.info(Said("{compile}: the network compiles on the first pair of each frame size (about a minute at "
                          "1080p; seconds when torch's compile cache already holds it), then runs faster"))
        # what runs each pair (model.interface.InterpolationNetwork): its flags say what it can do
        self._runner: "InterpolationNetwork" = with_ensemble(self.network, options.ensemble)
        # (height, width) -> FramePlan: every choice about pairs of that size, made once (plan_frames)
        self._plans: Dict[Tuple[int, int], FramePlan] = {}
        # (frame size, neighbours) -> GraphedPairs, or None where capture failed (where the plan has graphs)
        self._graphs: Dict[Tuple[int, int, bool], Optional["GraphedPairs"]] = {}
        self._states = None  # model.inference.PairStates of the stream in progress (quadratic motion)
        self._noted_linear = False

    @property
    def job_id(self) -> str:
        """What makes this interpolator's frames what they are (``engine.options.frames_key``: every option
        declared to change them, the device and autocast it resolved, the weights file's content): a resumed video
        job never mixes two settings, nor two weights files at one path."""
        weights = Path(self.options.weights)
        content = ""
        if weights.is_file():
            stat = weights.stat()
            content = _file_digest(str(weights.resolve()), stat.st_size, stat.st_mtime_ns)
        key = frames_key(self.options, weights_sha256=content, device=self.device.type,
                         autocast=str(self.autocast_dtype))
        return " ".join(f"{name}={value}" for name, value in sorted(key.items()))

    def plan(self, height: int, width: int) -> FramePlan:
        """The ``FramePlan`` of pairs of this size: ``plan_frames``'s, made on the first pair of the size and kept."""
        key = (height, width)
        plan = self._plans.get(key)
        if plan is None:
            plan = plan_frames(height, width, self.options, self._runner, self.device, self.autocast_dtype)
            if len(self._plans) >= _MAX_PLANS:
                del self._plans[next(iter(self._plans))]
            self._plans[key] = plan
        return plan

    def tile_for(self, height: int, width: int) -> int:
        """The tile size for frames of this size (0: whole frames): the plan's."""
        return self.plan(height, width).tile

    def moves_alpha(self, height: int, width: int) -> bool:
        """Whether alpha of frames this size moves with the flow (else it is mixed linearly in time): the plan's."""
        return self.plan(height, width).moves_alpha

    def __call__(self, one: Image, two: Image, times: Sequence[float] = (0.5,)) -> List[Image]:
        """Float frames at each t of ``times`` between ``one`` and ``two``, in the input's form."""
        from ..model.inference import RunSettings, interpolate

        times = check_times(times)
        shape = getattr(one, "shape", ())
        if isinstance(one, np.ndarray) and len(shape) == 3:
            settings = self.plan(shape[0], shape[1]).settings
        elif isinstance(one, torch.Tensor) and len(shape) in (3, 4):
            settings = self.plan(shape[-2], shape[-1]).settings
        else:  # not a frame: interpolate names the problem
            settings = RunSettings(self.autocast_dtype, self.options.flow_scale)
        return interpolate(self._runner, one, two, times, settings)

    def interpolate_with_alpha(self, one: np.ndarray, two: np.ndarray, alpha_one: np.ndarray,
                               alpha_two: np.ndarray,
                               times: Sequence[float] = (0.5,)) -> Tuple[List[np.ndarray], List[np.ndarray]]:
        """(colours, alphas) at each t for H x W x 3 float frames with H x W float alpha in [0, 1]."""
        from ..model.inference import interpolate_with_alpha

        times = check_times(times)
        plan = self.plan(one.shape[0], one.shape[1])
        if not plan.moves_alpha:
            return self(one, two, times), [(1.0 - t) * alpha_one + t * alpha_two for t in times]

        def tensor(x: np.ndarray) -> torch.Tensor:
            x = x if x.ndim == 3 else x[:, :, None]
            return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).permute(2, 0, 1)[None].to(self.device)

        outs = interpolate_with_alpha(self._runner, tensor(one), tensor(two), tensor(alpha_one), tensor(alpha_two),
                                      times, plan.settings)
        return ([c[0].permute(1, 2, 0).cpu().numpy() for c, _ in outs],
                [a[0, 0].cpu().numpy() for _, a in outs])

    def interpolate_integer(self, one: np.ndarray, two: np.ndarray,
                            times: Sequence[float] = (0.5,)) -> List[np.ndarray]:
        """Integer frames (video) at each t: H x W x 3, or x 4 with alpha, uint8 or uint16, as the input."""
        from ..media.images import mix_alpha_linearly
        from ..model.inference import interpolate_integer, interpolate_integer_alpha

        times = check_times(times)
        height, width = one.shape[:2]
        plan = self.plan(height, width)
        if one.ndim == 3 and one.shape[2] == 4:
            if not plan.moves_alpha:
                return mix_alpha_linearly(self.interpolate_integer, one, two, times)
            return interpolate_integer_alpha(self._runner, one, two, times, plan.settings)
        return interpolate_integer(self._runner, one, two, times, plan.settings,
                                   graphed=self.cuda_graphs_for(height, width))

    def interpolate_integer_with_neighbours(self, one: np.ndarray, two: np.ndarray, times: Sequence[float],
                                            before: Optional[Tuple[np.ndarray, float]] = None,
                                            after: Optional[Tuple[np.ndarray, float]] = None) -> List[np.ndarray]:
        """``interpolate_integer`` along quadratic paths (model/motion.py) through the frame ``before`` one and the
        frame ``after`` two (each with its distance in time from its end of the pair, in units of the pair's
        interval; None: constant velocity on that side). Calls for consecutive pairs of a stream share their flows,
        so a video costs about what it costs with linear motion (an ensemble: its passes' worth). RGB frames on
        whole frames; frames with alpha, tiles and the published network move at constant velocity (said once, as
        a note: ``logging``, INFO)."""
        return [frame.result() for frame in self.start_integer_with_neighbours(one, two, times, before, after)]

    def start_integer_with_neighbours(self, one: np.ndarray, two: np.ndarray, times: Sequence[float],
                                      before: Optional[Tuple[np.ndarray, float]] = None,
                                      after: Optional[Tuple[np.ndarray, float]] = None
                                      ) -> List[Union["StartedFrame", "Later"]]:
        """``interpolate_integer_with_neighbours`` without waiting for the frames to reach the host: each comes
        back with ``result()``, which waits for it. On a GPU the next pair's work is then queued while this
        pair's frames are still being made or copied (the video pipeline's write-behind thread waits for them).
        With ``lazy_frames`` each frame along quadratic paths is made by its ``result()`` (``Later``: one t per
        call, the pair's flows estimated by the first and cached for the rest); call them in order, before the next
        pair is started."""
        from ..model.inference import PairStates, Ready, start_integer_quadratic

        times = check_times(times)
        height, width = one.shape[:2]
        plan = self.plan(height, width)
        if not (plan.quadratic and one.ndim == 3 and one.shape[2] == 3):
            if not self._noted_linear and (before is not None or after is not None):
                self._noted_linear = True
                reason = ("frames with alpha" if one.ndim == 3 and one.shape[2] == 4 else
                          plan.why_linear or "frames that are not H x W x 3")
                log.info("quadratic motion runs RGB frames, whole, on this project's networks; here (%s) frames "
                         "move at constant velocity", reason)
            return [Ready(frame) for frame in self.interpolate_integer(one, two, times)]
        passes = self._runner.passes
        if self._states is None:
            self._states = PairStates(_STATES_PER_PASS * passes)
        graphed = self.cuda_graphs_for(height, width, True)  # None for an ensemble: it runs eagerly
        start = functools.partial(start_integer_quadratic, self._runner.base, one, two, before=before, after=after,
                                  states=self._states, settings=plan.settings, graphed=graphed, passes=passes)
        if self.lazy_frames:
            return [Later(functools.partial(start, [t])) for t in times]
        return start(times)

    def cuda_graphs_for(self, height: int, width: int, neighbours: bool = False) -> Optional["GraphedPairs"]:
        """The CUDA graphs (``model.runtime.GraphedPairs``) that replay whole frames of this size (with
        ``neighbours``: also along quadratic paths), captured on first use; None where the plan has none (CPU,
        ``cuda_graphs`` off, an ensemble or the published network, tiles) or capture failed."""
        plan = self.plan(height, width)
        if not plan.graphs:
            return None
        key = (height, width, neighbours)
        if key not in self._graphs:
            from ..model.runtime import graphed_pairs

            self._graphs[key] = graphed_pairs(self._runner, (1, 3, height, width), plan.settings.autocast_dtype,
                                              plan.settings.flow_scale, neighbours)
        return self._graphs[key]
