"""The engine's settings and the checks that need no network: importing this module does not import torch, so a
command that stops at a mistake in its options, times or files says so at once (run.py's pair mode).

It is also where the command line meets the library's words: the library names options by their field names
(``flow_scale``), in errors (``media.errors.FieldError``) and in notes (``logging``, under the ``engine``, ``model``
and ``media`` loggers); ``FLAGS`` says each field as a command line's flag, ``cli_message`` an error with them and
``show_notes`` (called by a command line when it runs) puts the notes on stderr, as "note: ..." lines. Every
option is declared once (``media.declare.option``), and ``add_flags`` is the one place a tool takes its flags from.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import re
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ..media.declare import add_flags as declare_flags
from ..media.declare import DefaultsFormatter, declared_flags, frames_fields, option  # noqa: F401 (the tools' help)
from ..media.errors import FieldError, Said
from ..media.progress import say_line

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_WEIGHTS = ROOT / "weights" / "network.safetensors"

# the precision names; "fp32" runs without autocast, "auto" is bf16 or fp32 by device and network
# (engine.interpolator.autocast_dtype gives the torch dtype)
PRECISION_NAMES = ("auto", "fp32", "fp16", "bf16")
ALPHA_MODES = ("flow", "linear")


def flow_scale_value(text: str) -> Union[float, str]:
    """A ``--flow-scale`` argument: auto, or a factor in (0, 1] (argparse.ArgumentTypeError otherwise): the rule
    of ``InterpolatorOptions.flow_scale``, the one check of every tool's flag."""
    try:
        value: Union[float, str] = text if text == "auto" else float(text)
    except ValueError:
        value = -1.0
    if not _valid_scale(value):
        raise argparse.ArgumentTypeError(f"{text!r}: use auto or a factor in (0, 1], such as 0.5 (half the frames' "
                                         f"size)")
    return value


def tile_value(text: str) -> Union[int, str]:
    """A ``--tile`` argument: auto, 0 or a tile size in pixels (argparse.ArgumentTypeError otherwise)."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: use auto, 0 (whole frames) or a tile size in pixels")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _valid_scale(value: Any) -> bool:
    return value == "auto" or (isinstance(value, (int, float)) and not isinstance(value, bool)
                               and 0.0 < value <= 1.0)


@dataclass(frozen=True)
class InterpolatorOptions:
    """How to run the network. Every field is declared once below (``media.declare.option``), with its default,
    its check, its command-line flags (``add_flags``) and whether it changes the frames (``frames_key``); a bad value
    is a ValueError naming the field when the options are made.

    ``weights``: the weights file (``--model NAME`` names one in weights/, ``--weights PATH`` any).
    ``device``: auto (CUDA when there is a GPU, else the CPU), cpu, cuda or cuda:N.
    ``precision``: "auto" runs this project's networks under bfloat16 autocast on CUDA GPUs with bfloat16
    tensor cores (compute capability 8.0 and up: A100, H100, RTX 30 series and later), where the default network
    runs a video about a fifth faster at the same measured quality, and in float32 elsewhere (the CPU, older GPUs,
    the published architecture); "fp32", "fp16", "bf16" choose one.
    ``flow_scale``: estimate flow at this fraction of the resolution; "auto": at full resolution, and for a pair
    whose motion is large (over 32 px) also at half, kept where warping the frames by it matches them better
    (``model.network.AUTO``; CUDA graphs replay it too); None (the default): the weights file's own default, from
    its metadata (``model.weights.inference_defaults``: auto for the default network, 1 for the fast one), which
    the ``Interpolator`` puts in its ``options``.
    ``tile``: "auto" processes whole frames when they fit in the device's free memory, else the largest tiles
    that do; 0 always whole frames; N > 0 frames larger than N x N in overlapping N-pixel tiles.
    ``tile_overlap``: pixels shared by neighbouring tiles, cross-faded; None: 128, or a quarter of a smaller tile
    (``overlap_for``).
    ``ensemble``: average 1, 2 (the frames and their mirror image) or 4 passes (also time-reversed).
    ``alpha``: "flow" moves transparency with the network's flow (objects with their own alpha); "linear" mixes
    the two frames' alpha in time (a still matte), which is also what tiles, ensembles and the published
    network do.
    ``compile``: ``torch.compile`` the network's regions between its custom kernels first (CUDA;
    ``model.runtime.compile_network``):
    each frame size compiles on its first pair, later pairs run faster; quadratic paths and CUDA graphs stay.
    ``cuda_graphs``: replay the network as CUDA graphs for integer (video) frames on CUDA, whole frames only,
    without an ensemble; the frames differ from an eager run by float rounding only.
    """

    weights: Path = option(
        DEFAULT_WEIGHTS, "the weights file", lambda v: isinstance(v, (str, Path)) and str(v) != "",
        "give the path of a weights file",
        flags=[(("--model",), dict(default="network", help="name of a weights file in weights/ (without "
                                   ".safetensors): network (the default) or fast (about 2x the speed on a GPU: 10.6 "
                                   "against 20.9 ms per 1080p frame on an H200, bf16; lower quality); --weights "
                                   "overrides it")),
               (("--weights",), dict(type=Path, default=None, help="path of a weights file (.safetensors, or a "
                                     "published network-lf.pytorch)"))])
    # the device decides the frames through the precision and the kernels: frames_key takes the device the
    # interpolator resolved, not the name
    device: str = option(
        "auto", "where to run", lambda v: isinstance(v, str) and re.fullmatch(r"auto|cpu|cuda(:\d+)?", v) is not None,
        "use auto, cpu, cuda or cuda:N",
        frames=False, flags=[(("--device",), dict(help="auto, cpu, cuda or cuda:N"))])
    precision: str = option(
        "auto", "autocast", lambda v: v in PRECISION_NAMES, f"use one of {', '.join(PRECISION_NAMES)}",
        exclusive=True,
        flags=[(("--fp32",), dict(action="store_const", const="fp32", dest="precision", help=(
                   "float32 throughout (the default on the CPU, on GPUs older than compute capability 8.0 and for "
                   "the published weights; elsewhere the default is bfloat16 autocast)"))),
               (("--fp16",), dict(action="store_const", const="fp16", dest="precision",
                                  help="float16 autocast (CUDA)")),
               (("--bf16",), dict(action="store_const", const="bf16", dest="precision", help=(
                   "bfloat16 autocast (the default for this project's networks on GPUs of compute capability 8.0 "
                   "and up)")))])
    flow_scale: Optional[Union[float, str]] = option(
        None, "flow resolution", lambda v: v is None or _valid_scale(v),
        "use auto or a value in (0, 1] (None: the weights file's default)",
        flags=[(("--flow-scale", "--scale"), dict(
            type=flow_scale_value,
            help="estimate flow at this fraction of the resolution (e.g. 0.5 for 4K), or auto: full resolution, "
                 "and half for a pair whose motion exceeds 32 px where warping by that flow matches the frames "
                 "better. Default: the weights file's own (its metadata: auto for the default network, 1 for the "
                 "fast one and for files that state none)"))])
    tile: Union[int, str] = option(
        "auto", "tiling", lambda v: v == "auto" or (_is_int(v) and v >= 0),
        "use auto, 0 (whole frames) or a tile size in pixels",
        flags=[(("--tile",), dict(type=tile_value, help=(
            "process frames larger than TILE x TILE in overlapping tiles (bounded memory); 0 = whole frames; auto "
            "= whole frames when they fit in the device's free memory, else the largest tiles that do")))])
    tile_overlap: Optional[int] = option(
        None, "tile overlap", lambda v: v is None or (_is_int(v) and v >= 1), "use at least 1 pixel, or None",
        flags=[(("--tile-overlap",), dict(type=int, help=(
            "overlap of neighbouring tiles in pixels, cross-faded (default: 128, or a quarter of a tile under "
            "512 px)")))])
    ensemble: int = option(
        1, "passes averaged", lambda v: v in (1, 2, 4) and not isinstance(v, bool), "use 1, 2 or 4 passes",
        flags=[(("--ensemble",), dict(type=int, choices=[1, 2, 4], help=(
            "average 2 passes (the frames and their mirror image) or 4 (also time-reversed): 2x or 4x the time "
            "(Middlebury: 35.32 / 35.33 dB against 35.26 one pass; videos along quadratic paths in every pass; "
            "docs/performance.md)")))])
    alpha: str = option(
        "flow", "transparency", lambda v: v in ALPHA_MODES, "use flow or linear",
        flags=[(("--alpha",), dict(choices=list(ALPHA_MODES), help=(
            "transparency of interpolated frames: moved with the flow (objects with their own alpha), or the two "
            "frames' alpha mixed linearly in time (a still matte over moving content)")))])
    # compiled and graphed runs differ from eager ones by float rounding: part of the key, so a resumed job's
    # frames are exactly those of one run
    compile: bool = option(
        False, "torch.compile", lambda v: isinstance(v, bool), "use True or False",
        flags=[(("--compile",), dict(action="store_true", help=(
            "torch.compile the regions between the network's custom kernels (CUDA): the first pair of each frame "
            "size compiles (about a minute at 1080p, seconds once torch's cache holds it), then the default network "
            "takes about 40%% less time; a video gains only where the encoder is not the limit (docs/video.md)")))])
    cuda_graphs: bool = option(
        True, "CUDA graphs", lambda v: isinstance(v, bool), "use True or False",
        flags=[(("--eager",), dict(action="store_false", dest="cuda_graphs", help=(
            "run the network op by op on CUDA instead of replaying it as CUDA graphs (the default for whole "
            "frames without --ensemble); the frames differ by float rounding only")))])

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not f.metadata["check"](value):
                raise FieldError(Said("InterpolatorOptions {" + f.name + ":={value}}: {rule}", value=repr(value),
                                      rule=f.metadata["rule"]))

    def overlap_for(self, tile: int) -> int:
        """The overlap of tiles of ``tile`` pixels: ``tile_overlap``, or by default 128 px (a quarter of tiles under
        512 px, so that any tile size works without naming an overlap)."""
        if self.tile_overlap is not None:
            return self.tile_overlap
        return max(1, min(128, tile // 4))


def add_flags(parser: argparse.ArgumentParser, only: Sequence[str] = (), defaults: Optional[Mapping[str, Any]] = None,
              several: Sequence[str] = (), required: Sequence[str] = (), options: type = InterpolatorOptions) -> None:
    """The command-line flags of every option (or of the options named in ``only``, for a tool that sets the rest
    itself), from its declaration (``media.declare.option``): the one place a tool declares a flag of the engine's
    options, or with ``options=VideoOptions`` of the video options (``pipeline.video``), with the names, help,
    defaults and checks that run.py has; ``options_from_args`` and ``pipeline.video.video_options_from_args`` read
    them back.

    ``defaults``: a protocol's own defaults, by field (``{"precision": "fp32"}``, ``{"device": "cpu"}``), checked
    by the field's declared check and shown in ``--help``; the flags still change them. ``several``: fields that
    take one or more values, a list (``weights``: ``--weights A B``, without ``--model``, each file in turn;
    ``flow_scale``: a run per scale). ``required``: fields whose flag must be given. Declaring flags does nothing
    else: a command line shows the library's notes when it runs (``show_notes``, at the start of its ``main``)."""
    defaults = dict(defaults or {})
    if options is InterpolatorOptions and "weights" in defaults:
        value = defaults["weights"]
        defaults["weights"] = [Path(v) for v in value] if "weights" in several else Path(value)
    declare_flags(parser, options, only=only, defaults=defaults, several=several, required=required)


def _field(name: str) -> Any:
    return next(f for f in fields(InterpolatorOptions) if f.name == name)


def weights_for(args: argparse.Namespace, root: Path = ROOT) -> Path:
    """``--weights``, or the file ``--model`` names in weights/ (ValueError naming the ones there if none, or
    where the file's first bytes say it is no weights file: ``check_weights_header``)."""
    if args.weights is not None:
        weights = Path(args.weights)
        if not weights.is_file():
            raise ValueError(f"--weights {weights}: no such file -- give the path of a weights file, or --model "
                             f"NAME for one in weights/")
        check_weights_header(weights, f"--weights {weights}")
        return weights
    weights = root / "weights" / f"{args.model}.safetensors"
    if not weights.is_file():
        names = sorted(p.stem for p in (root / "weights").glob("*.safetensors"))
        raise ValueError(f"--model {args.model}: there is no weights/{args.model}.safetensors; use one of "
                         f"{', '.join(names) or '(none found)'}, or --weights PATH")
    check_weights_header(weights, f"--model {args.model}")
    return weights


# published checkpoints (torch.save) by their suffix: model.weights.PUBLISHED_SUFFIXES, which imports torch
_PUBLISHED_SUFFIXES = (".pytorch", ".pth", ".pt")
# a safetensors header larger than this is no header (the library's own limit: 100 MB)
_MOST_HEADER = 100_000_000


def check_weights_header(path: Path, flag: str) -> None:
    """ValueError naming ``flag`` and the fix where ``path``'s first bytes say it is no weights file, before torch
    loads (seconds): a published checkpoint is a zip or a pickle (torch.save); any other file a safetensors file,
    an 8-byte length then a JSON header holding this project's network config. The tensors are checked when
    the network loads."""
    fix = (f"pass a file written by train.py (weights/network.safetensors, weights/fast.safetensors) or a "
           f"published checkpoint ending in {', '.join(_PUBLISHED_SUFFIXES)}")
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if path.suffix in _PUBLISHED_SUFFIXES:
                if not (head.startswith(b"PK\x03\x04") or head.startswith(b"\x80")):
                    raise ValueError(f"{flag}: not a PyTorch checkpoint (neither a zip nor a pickle) -- {fix}")
                return
            size = int.from_bytes(head, "little") if len(head) == 8 else -1
            if not 2 <= size <= min(_MOST_HEADER, os.fstat(f.fileno()).st_size - 8):
                raise ValueError(f"{flag}: not a safetensors weights file (no header) -- {fix}")
            try:
                header = json.loads(f.read(size))
            except ValueError:
                header = None
    except OSError as exc:
        raise ValueError(f"{flag}: cannot read it ({exc.strerror or exc}) -- {fix}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{flag}: not a safetensors weights file (its header is no JSON object) -- {fix}")
    if "config" not in (header.get("__metadata__") or {}):
        raise ValueError(f"{flag}: a safetensors file without this project's network config in its metadata (not "
                         f"saved by train.py) -- {fix}")


# where Linux shows a GPU that CUDA (or ROCm, or WSL's CUDA) could use: the drivers' device files
GPU_DEVICE_FILES = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia0", "/dev/kfd", "/dev/dxg")


def check_cuda_present(device: str) -> None:
    """--device cuda or cuda:N on a Linux machine without any GPU driver is refused now (ValueError), not once
    torch has loaded (seconds) to find no GPU; elsewhere, and wherever a driver is present, torch decides."""
    if device.startswith("cuda") and sys.platform.startswith("linux") and \
            not any(os.path.exists(path) for path in GPU_DEVICE_FILES):
        raise ValueError(f"--device {device}: this machine has no CUDA GPU (no NVIDIA, ROCm or WSL GPU driver "
                         f"found) -- use --device cpu, or auto")


def device_for(args: argparse.Namespace) -> str:
    """``--device``, checked (the field's one check, and ``check_cuda_present``): ValueError naming the flag."""
    if not _field("device").metadata["check"](args.device):
        raise ValueError(f"--device {args.device!r} is not a device: use auto, cpu, cuda or cuda:N")
    check_cuda_present(args.device)
    return args.device


def options_from_args(args: argparse.Namespace, root: Path = ROOT) -> InterpolatorOptions:
    """The options the flags of ``add_flags`` give (checked by their types already; files and the device here)."""
    # (no --flow-scale: None, the weights' own default, which the engine reads from the file)
    return InterpolatorOptions(weights=weights_for(args, root), device=device_for(args), precision=args.precision,
                               flow_scale=args.flow_scale,
                               tile=args.tile, tile_overlap=args.tile_overlap, ensemble=args.ensemble,
                               alpha=args.alpha, compile=args.compile, cuda_graphs=args.cuda_graphs)


def frames_key(options: InterpolatorOptions, **resolved: str) -> Dict[str, str]:
    """Every option that changes the frames, by its declaration, as text: a resumed job whose key differs starts
    over. ``resolved``: what the interpolator decided that the options leave open (device, autocast, the weights
    file's content)."""
    key = {name: str(getattr(options, name)) for name in frames_fields(options)}
    key.update(resolved)
    return key


def loading_line(options: InterpolatorOptions) -> str:
    """What a command says while torch and the network load (seconds; up to a minute on a busy machine)."""
    weights = Path(options.weights)
    try:
        name = str(weights.relative_to(ROOT))
    except ValueError:
        name = str(weights)
    where = "" if options.device == "auto" else f" on {options.device}"
    return f"loading torch and the network ({name}){where} ..."


# the most times one pair is interpolated at (an image file each; as many as a video's --factor makes per pair)
MAX_TIMES = 1000


def check_times(times: Sequence[float]) -> List[float]:
    """``times`` as floats, each strictly between 0 and 1, at most ``MAX_TIMES`` of them (ValueError otherwise)."""
    times = [float(t) for t in times]
    if not times:
        raise FieldError(Said("{times}: give at least one time"))
    if len(times) > MAX_TIMES:
        raise FieldError(Said("{times}: {count} times, more than the {most} one pair is interpolated at (an image "
                              "each) -- give at most {most}", count=len(times), most=MAX_TIMES))
    for t in times:
        if not 0.0 < t < 1.0:
            raise ValueError(f"time {t}: times must lie strictly between 0 and 1")
    return times


# field -> how a command line says it: the engine's options from their declarations, and the pair's times and
# overwrite; every other field by the rule the declarations follow (audio_codec: --audio-codec). What a tool that
# takes the engine's flags says; run.py's table adds its video options' declared flags (cli.FLAGS)
FLAGS: Dict[str, str] = {**declared_flags(InterpolatorOptions),
                         "times": "--time", "overwrite": "--overwrite (-y)"}


def flag_for(name: str, flags: Mapping[str, str] = FLAGS) -> str:
    """The command-line flag that sets the field ``name``, in the table ``flags`` (``FLAGS`` by default)."""
    return flags.get(name, "--" + name.replace("_", "-"))


def cli_message(exc: BaseException, flags: Mapping[str, str] = FLAGS) -> str:
    """An error's one line as the command line says it: the fields it names (``media.errors.FieldError``) as
    the flags of the table ``flags``; any other error as it is."""
    said_as = getattr(exc, "said_as", None)
    return said_as(functools.partial(flag_for, flags=flags)) if callable(said_as) else str(exc)


class _Notes(logging.Handler):
    """The library's notes as the command line shows them: "note: ..." on stderr (the stream of the moment, so
    that a redirected stderr gets them), fields said as the flags of its table."""

    def __init__(self, flags: Mapping[str, str]) -> None:
        super().__init__()
        self.flags = flags

    def emit(self, record: logging.LogRecord) -> None:
        try:
            said_as = getattr(record.msg, "said_as", None)
            said = said_as(functools.partial(flag_for, flags=self.flags)) if callable(said_as) else \
                record.getMessage()
            say_line(f"note: {said}")  # (above a progress bar, which is drawn again below it)
        except Exception:  # (logging's rule: a failing handler never stops the program)
            self.handleError(record)


# the package's logger, above every module's (``softsplat_vfi``, or ``<folder>.softsplat_vfi`` in a ComfyUI clone);
# its notes are INFO (what was decided) or WARNING (what went wrong)
NOTE_LOGGER = __name__.rsplit(".", 2)[0]


def show_notes(flags: Mapping[str, str] = FLAGS) -> None:
    """Show the library's notes (``NOTE_LOGGER`` from INFO up) on stderr, fields said as the flags of ``flags``,
    once however often it is called: what a command line does when it runs, at the start of its ``main`` (never
    on import, nor when its flags are declared). A library user chooses for themselves (``logging.basicConfig``)."""
    logger = logging.getLogger(NOTE_LOGGER)
    logger.setLevel(logging.INFO)
    shown = [handler for handler in logger.handlers if isinstance(handler, _Notes)]
    if shown:
        shown[0].flags = flags
    else:
        logger.addHandler(_Notes(flags))
