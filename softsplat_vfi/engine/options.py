"""The engine's settings and the checks that need no network: importing this module does not import torch, so a
command that stops at a mistake in its options, times or files says so at once (run.py's pair mode).

It is also where the command line meets the library's words: the library names options by their field names
(``flow_scale``), in errors (``media.errors.FieldError``) and in notes (``logging``, under the ``engine``, ``model``
and ``media`` loggers); ``FLAGS`` says each field as run.py's flag, ``cli_message`` an error with them and
``show_notes`` puts the notes on stderr, as "note: ..." lines.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..media.errors import FieldError, Said

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


def _option(default: Any, help: str, check: Optional[Callable[[Any], bool]] = None, rule: str = "",
            frames: bool = True, flags: Sequence[Tuple[Tuple[str, ...], Dict[str, Any]]] = (),
            exclusive: bool = False) -> Any:
    """One inference option's whole declaration.

    ``help``: what it does (also the flag's help where ``flags`` gives none); ``check`` / ``rule``: the test its
    value passes and the fix said when it does not (``InterpolatorOptions`` raises ValueError naming the field,
    the command line's flag types name the flag); ``frames``: whether the option changes the frames, so that a
    resumed job made with another value starts over (``frames_key``); ``flags``: the command-line flags, as
    (names, argparse keywords), ``exclusive`` where only one of them may be given."""
    return field(default=default, metadata={"help": help, "check": check, "rule": rule, "frames": frames,
                                            "flags": tuple(flags), "exclusive": exclusive})


@dataclass(frozen=True)
class InterpolatorOptions:
    """How to run the network. Every field is declared once below, with its check, its command-line flags
    (``add_flags``) and whether it changes the frames (``frames_key``); a bad value is a ValueError naming the
    field when the options are made.

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

    weights: Path = _option(
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
    device: str = _option(
        "auto", "where to run", lambda v: isinstance(v, str) and re.fullmatch(r"auto|cpu|cuda(:\d+)?", v) is not None,
        "use auto, cpu, cuda or cuda:N",
        frames=False, flags=[(("--device",), dict(default="auto", help="auto, cpu, cuda or cuda:N"))])
    precision: str = _option(
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
    flow_scale: Optional[Union[float, str]] = _option(
        None, "flow resolution", lambda v: v is None or _valid_scale(v),
        "use auto or a value in (0, 1] (None: the weights file's default)",
        flags=[(("--flow-scale", "--scale"), dict(
            type=flow_scale_value, default=None,
            help="estimate flow at this fraction of the resolution (e.g. 0.5 for 4K), or auto: full resolution, "
                 "and half for a pair whose motion exceeds 32 px where warping by that flow matches the frames "
                 "better. Default: the weights file's own (its metadata: auto for the default network, 1 for the "
                 "fast one and for files that state none)"))])
    tile: Union[int, str] = _option(
        "auto", "tiling", lambda v: v == "auto" or (_is_int(v) and v >= 0),
        "use auto, 0 (whole frames) or a tile size in pixels",
        flags=[(("--tile",), dict(type=tile_value, default="auto", help=(
            "process frames larger than TILE x TILE in overlapping tiles (bounded memory); 0 = whole frames; auto "
            "= whole frames when they fit in the device's free memory, else the largest tiles that do")))])
    tile_overlap: Optional[int] = _option(
        None, "tile overlap", lambda v: v is None or (_is_int(v) and v >= 1), "use at least 1 pixel, or None",
        flags=[(("--tile-overlap",), dict(type=int, default=None, help=(
            "overlap of neighbouring tiles in pixels, cross-faded (default: 128, or a quarter of a tile under "
            "512 px)")))])
    ensemble: int = _option(
        1, "passes averaged", lambda v: v in (1, 2, 4) and not isinstance(v, bool), "use 1, 2 or 4 passes",
        flags=[(("--ensemble",), dict(type=int, default=1, choices=[1, 2, 4], help=(
            "average 2 passes (the frames and their mirror image) or 4 (also time-reversed): 2x or 4x the time "
            "(Middlebury: 35.32 / 35.33 dB against 35.26 one pass; videos along quadratic paths in every pass; "
            "docs/performance.md)")))])
    alpha: str = _option(
        "flow", "transparency", lambda v: v in ALPHA_MODES, "use flow or linear",
        flags=[(("--alpha",), dict(default="flow", choices=list(ALPHA_MODES), help=(
            "transparency of interpolated frames: moved with the flow (objects with their own alpha), or the two "
            "frames' alpha mixed linearly in time (a still matte over moving content)")))])
    # compiled and graphed runs differ from eager ones by float rounding: part of the key, so a resumed job's
    # frames are exactly those of one run
    compile: bool = _option(
        False, "torch.compile", lambda v: isinstance(v, bool), "use True or False",
        flags=[(("--compile",), dict(action="store_true", help=(
            "torch.compile the regions between the network's custom kernels (CUDA): the first pair of each frame "
            "size compiles (about a minute at 1080p, seconds once torch's cache holds it), then the default network "
            "takes about 40%% less time; a video gains only where the encoder is not the limit (docs/video.md)")))])
    cuda_graphs: bool = _option(
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
              several: Sequence[str] = (), required: Sequence[str] = ()) -> None:
    """The command-line flags of every option (or of the options named in ``only``, for a tool that sets the rest
    itself), from its declaration: the one place a tool declares an engine flag (names, help and check as run.py
    has them); ``options_from_args`` reads them all back.

    ``defaults``: a protocol's own defaults, by field (``{"precision": "fp32"}``, ``{"device": "cpu"}``), checked
    by the field's declared check and shown in ``--help``; the flags still change them. ``several``: fields that
    take one or more values, a list (``weights``: ``--weights A B``, without ``--model``, each file in turn;
    ``flow_scale``: a run per scale). ``required``: fields whose flag must be given. A command that takes the
    flags is a command line: the library's notes are shown on its stderr from here on (``show_notes``)."""
    show_notes()
    defaults = dict(defaults or {})
    names = {f.name for f in fields(InterpolatorOptions)}
    for name in (*defaults, *several, *required):
        if name not in names:
            raise ValueError(f"add_flags: {name!r} is no field of InterpolatorOptions")
    for name, value in defaults.items():
        check = _field(name).metadata
        values = list(value) if name in several else [value]
        if name == "weights":
            values = [Path(v) for v in values]
            defaults[name] = values if name in several else values[0]
        if not all(check["check"](v) for v in values):
            raise ValueError(f"add_flags: the default {name}={value!r}: {check['rule']}")
    for f in fields(InterpolatorOptions):
        if only and f.name not in only:
            continue
        group: Any = parser.add_mutually_exclusive_group() if f.metadata["exclusive"] else parser
        for flag_names, kwargs in f.metadata["flags"]:
            kwargs = dict(kwargs)
            dest = kwargs.get("dest", flag_names[0][2:].replace("-", "_"))
            if f.name in several and dest != f.name:
                continue  # (--model names one file: several are --weights)
            if "type" in kwargs and kwargs["type"] in (int, float):
                kwargs["type"] = _checked(f.name, flag_names[0], kwargs["type"])
            if dest == f.name and "default" in kwargs:
                kwargs["default"] = defaults.get(f.name, kwargs["default"])
            if f.name in several:
                kwargs["nargs"] = "+"
                kwargs["help"] += "; one or more, each in turn"
                if f.name not in defaults:
                    kwargs["default"] = [] if f.name == "weights" else [f.default]
            if f.name in required:
                kwargs["required"] = True
            group.add_argument(*flag_names, **kwargs)
    for f in fields(InterpolatorOptions):  # the fields whose flags store a constant (--fp32, --eager)
        if (not only or f.name in only) and not any("default" in kw for _, kw in f.metadata["flags"]):
            parser.set_defaults(**{f.name: defaults.get(f.name, f.default)})


def _checked(name: str, flag: str, parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` then the declared check of option ``name``: a bad value is argparse's one line naming ``flag``."""
    check = _field(name).metadata

    def value(text: str) -> Any:
        try:
            parsed = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not check["check"](parsed):
            raise argparse.ArgumentTypeError(f"{text}: {check['rule']}")
        return parsed
    value.__name__ = parse.__name__
    return value


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
    key = {f.name: str(getattr(options, f.name)) for f in fields(options) if f.metadata["frames"]}
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


def _declared_flag(option: Any) -> str:
    """The flag an option's declaration gives it: the one argparse stores in the field (``--weights``, not
    ``--model``), else all of them (``--fp32, --fp16 or --bf16``)."""
    names = [names[0] for names, _ in option.metadata["flags"]]
    own = [name for name in names if name[2:].replace("-", "_") == option.name]
    if own or len(names) == 1:
        return (own or names)[0]
    return ", ".join(names[:-1]) + f" or {names[-1]}"


# field -> how run.py's command line says it: the engine's options from their declarations; every other field
# by the rule run.py declares its own flags with (audio_codec: --audio-codec), except where it differs here
FLAGS: Dict[str, str] = {**{f.name: _declared_flag(f) for f in fields(InterpolatorOptions)},
                         "times": "--time", "overwrite": "--overwrite (-y)"}


def flag_for(name: str) -> str:
    """The command-line flag that sets the field ``name`` (``FLAGS``)."""
    return FLAGS.get(name, "--" + name.replace("_", "-"))


def cli_message(exc: BaseException) -> str:
    """An error's one line as the command line says it: the fields it names (``media.errors.FieldError``) as
    flags; any other error as it is."""
    said_as = getattr(exc, "said_as", None)
    return said_as(flag_for) if callable(said_as) else str(exc)


class _Notes(logging.Handler):
    """The library's notes as the command line shows them: "note: ..." on stderr (the stream of the moment, so
    that a redirected stderr gets them), fields said as flags."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            said_as = getattr(record.msg, "said_as", None)
            said = said_as(flag_for) if callable(said_as) else record.getMessage()
            print(f"note: {said}", file=sys.stderr, flush=True)
        except Exception:  # (logging's rule: a failing handler never stops the program)
            self.handleError(record)


# the package's logger, above every module's (``softsplat_vfi``, or ``<folder>.softsplat_vfi`` in a ComfyUI clone);
# its notes are INFO (what was decided) or WARNING (what went wrong)
NOTE_LOGGER = __name__.rsplit(".", 2)[0]


def show_notes() -> None:
    """Show the library's notes (``NOTE_LOGGER`` from INFO up) on stderr, once however often it is called: what
    a command line does at its start. A library user chooses for themselves (``logging.basicConfig``)."""
    logger = logging.getLogger(NOTE_LOGGER)
    logger.setLevel(logging.INFO)
    if not any(isinstance(handler, _Notes) for handler in logger.handlers):
        logger.addHandler(_Notes())
