"""The common call: what every scorer of evaluation/ scores, and how a benchmark states its settings.

A **method** is anything with the ``Method`` interface (a Protocol: no class is checked): ours, an
``engine.Interpolator`` wrapped by ``Ours`` (``ours`` builds one), or a peer (``evaluation.peers.Peer``).

- ``method.interpolate(one, two, t)``: the frame at ``t`` of a pair, as ``run.py --one A --two B`` makes it
  (ours: ``Interpolator.__call__``).
- ``method.interpolate_video(one, two, t, before, after)``: the frame at ``t`` of a pair in a video, as
  ``run.py --video`` makes it (ours: ``Interpolator.interpolate_integer_with_neighbours``, along quadratic paths
  through ``before`` and ``after``, replayed as CUDA graphs on a GPU); a peer runs the pair alone, as RIFE's tools do.
- ``method.label`` names it in reports; ``method.settings`` says how it ran (printed in each tool's header).

Ours runs at the user's defaults: the options ``run.py`` takes from the same flags (``engine_options``, through
``engine.options.options_from_args``: precision auto, CUDA graphs on, the flow scale the weights file states).
A benchmark that needs another setting names it once, in its ``Benchmark.engine``, and ``header`` prints it.

Conventions: float frames are H x W x 3 float32 RGB arrays in [0, 1]; the video path's frames are H x W x 3 uint8 or
uint16 RGB arrays (the result has their dtype); ``before`` lies one pair interval before ``one`` and ``after`` one
after ``two`` (None: not there; that side moves at constant velocity); t in (0, 1).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, Tuple

import numpy as np

from softsplat_vfi.engine.options import ROOT, add_flags, device_for, options_from_args

if TYPE_CHECKING:
    from torch import nn

    from softsplat_vfi.engine.interpolator import Interpolator
    from softsplat_vfi.engine.options import InterpolatorOptions


class Method(Protocol):
    """What a scorer scores (see the module docstring for the conventions)."""

    @property
    def label(self) -> str: ...

    @property
    def settings(self) -> Dict[str, object]: ...

    def interpolate(self, one: np.ndarray, two: np.ndarray, t: float) -> np.ndarray: ...

    def interpolate_video(self, one: np.ndarray, two: np.ndarray, t: float, before: Optional[np.ndarray],
                          after: Optional[np.ndarray]) -> np.ndarray: ...


@dataclass(frozen=True)
class Benchmark:
    """A scoring protocol: its ``name``, the engine options it sets against the user's defaults (``engine``, as
    (field of ``InterpolatorOptions``, value) pairs; none: the user's defaults throughout) and what else it fixes
    (``note``)."""

    name: str
    engine: Tuple[Tuple[str, object], ...] = ()
    note: str = ""

    def header(self, method: Method) -> str:
        """One line: the benchmark, its own settings, and how ``method`` runs."""
        own = ", ".join(f"{key} {value}" for key, value in self.engine)
        fixed = "; ".join(part for part in (own, self.note) if part)
        runs = ", ".join(f"{key} {value}" for key, value in method.settings.items())
        return f"{self.name}{f' ({fixed})' if fixed else ''}: {method.label}: {runs}"


# --hold-still: our networks with still, textured neighbourhoods held at zero flow (model.warp.still_weight, the
# default), without (a diagnostic), or both side by side
HOLD_STILL = {"on": (True,), "off": (False,), "both": (True, False)}


def hold_still_label(label: str, hold: bool, choice: str) -> str:
    """A method's label, told apart by the guard where ``--hold-still both`` runs it both ways."""
    return label if choice != "both" else f"{label} ({'hold-still' if hold else 'no hold-still'})"


# the engine's flags a scoring tool takes (engine.options.add_flags; --model and --weights with "weights")
ENGINE_FLAGS = ("weights", "device", "precision", "flow_scale", "ensemble", "compile", "cuda_graphs")


def add_engine_flags(parser: argparse.ArgumentParser, several: bool = False,
                     defaults: Optional[Mapping[str, object]] = None, required: bool = False) -> None:
    """run.py's flags for how ours runs, from their one declaration (``engine.options.add_flags``); ``several``:
    ``--weights`` takes one or more files, each scored in turn (``methods_of``), instead of ``--model`` or one
    ``--weights``; ``required``: at least one must be named; ``defaults``: the protocol's own defaults, by field."""
    add_flags(parser, only=ENGINE_FLAGS, defaults=defaults, several=("weights",) if several else (),
              required=("weights",) if required else ())


def engine_options(args: argparse.Namespace, benchmark: Benchmark,
                   weights: Optional[Path] = None) -> "InterpolatorOptions":
    """The options ``run.py`` makes of the same flags (``engine.options.options_from_args``; flags the tool lacks at
    their defaults), with ``benchmark``'s settings on top. ``weights``: the file to score, for a tool that scores
    several (``--weights``)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_flags(parser)
    values = vars(parser.parse_args([]))
    values.update((key, value) for key, value in vars(args).items() if key in values)
    if weights is not None:
        values["weights"] = Path(weights)
    return replace(options_from_args(argparse.Namespace(**values), ROOT), **dict(benchmark.engine))


class Ours:
    """An ``engine.Interpolator`` as a ``Method``: each call the engine's own (the module docstring says which)."""

    def __init__(self, interpolator: "Interpolator", label: str, hold_still: bool = True) -> None:
        self.interpolator = interpolator
        self.label = label
        self.hold_still = hold_still

    @property
    def settings(self) -> Dict[str, object]:
        options, interp = self.interpolator.options, self.interpolator
        autocast = str(interp.autocast_dtype).replace("torch.", "") if interp.autocast_dtype else "float32"
        settings: Dict[str, object] = {
            "device": str(interp.device), "precision": f"{options.precision} ({autocast})",
            "flow_scale": options.flow_scale, "cuda_graphs": options.cuda_graphs, "compile": options.compile,
            "ensemble": options.ensemble, "tile": options.tile}
        if not self.hold_still:
            settings["hold_still"] = False
        return settings

    def interpolate(self, one: np.ndarray, two: np.ndarray, t: float) -> np.ndarray:
        return self.interpolator(one, two, [t])[0]

    def interpolate_video(self, one: np.ndarray, two: np.ndarray, t: float, before: Optional[np.ndarray],
                          after: Optional[np.ndarray]) -> np.ndarray:
        sides = [None if x is None else (x, 1.0) for x in (before, after)]
        return self.interpolator.interpolate_integer_with_neighbours(one, two, [t], *sides)[0]


def ours(options: "InterpolatorOptions", label: Optional[str] = None, hold_still: bool = True,
         network: Optional["nn.Module"] = None) -> Ours:
    """Ours as a method: an ``engine.Interpolator`` with ``options`` (on ``network`` where given, e.g. a network in
    training). ``hold_still`` False (a diagnostic) switches the still guard off: on ``network``, or else on a
    network loaded for this method alone (the engine's cached one stays as it is)."""
    from softsplat_vfi.engine.interpolator import Interpolator, resolve_device

    if not hold_still:
        if network is None:
            from softsplat_vfi.model.weights import load_any

            network = load_any(Path(options.weights), resolve_device(options.device))
        if hasattr(network, "hold_still"):  # (the published network has no guard)
            network.hold_still = False
    return Ours(Interpolator(options, network=network), label or str(options.weights), hold_still)


def methods_of(args: argparse.Namespace, benchmark: Benchmark, weights: Sequence[Path], peers: Sequence[str],
               hold_still: str = "on") -> List[Tuple[str, Callable[[], Method]]]:
    """(label, build) of every method a tool's flags name: ours for each of ``weights`` (each ``HOLD_STILL``
    setting of ``hold_still``), then each peer; ``build()`` loads it (a ValueError names a missing file or wheel)."""
    found: List[Tuple[str, Callable[[], Method]]] = []
    for path in weights:
        for hold in HOLD_STILL[hold_still]:
            label = hold_still_label(str(path), hold, hold_still)
            found.append((label, lambda path=path, label=label, hold=hold:
                          ours(engine_options(args, benchmark, path), label, hold)))
    return found + [(name, lambda name=name: peer(name, device_for(args))) for name in peers]


def peer(name: str, device: str) -> Method:
    """The peer ``name`` (evaluation/peers.py) on ``device`` (auto, cpu, cuda or cuda:N)."""
    from softsplat_vfi.engine.interpolator import resolve_device
    from evaluation.peers import load_peer

    return load_peer(name, resolve_device(device))
