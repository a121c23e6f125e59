"""Pair mode: two image files in, one image file per t out (``run.py --one A --two B --out C``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence, Union

import numpy as np

from ..media.errors import FieldError, Said
from ..media.files import check_not_input, check_replaceable, mark_made
from ..media.progress import Spinner

from .options import InterpolatorOptions, check_times, loading_line

if TYPE_CHECKING:
    from .interpolator import Interpolator


def output_paths(out: Path, times: Sequence[float]) -> List[Path]:
    """One path per t: ``out`` itself for one time, else ``out`` with {i} (index) or {t} (time) filled in, or with
    -{i} added before the suffix when it names neither."""
    name = str(out)
    if len(times) == 1 and "{" not in name:
        return [Path(out)]
    if "{i}" not in name and "{t}" not in name:
        name = str(Path(out).with_name(f"{Path(out).stem}-{{i}}{Path(out).suffix}"))
    try:
        paths = [Path(name.format(i=i, t=f"{t:.3f}")) for i, t in enumerate(times)]
    except (KeyError, IndexError, ValueError):  # other fields ({x}, {0}, {}) or a lone brace
        raise ValueError(f"out {out}: braces in the name may hold only {{i}} (the index) or {{t}} (the time)") \
            from None
    if len(set(paths)) != len(paths):
        raise ValueError(f"out {out} gives the same file name for several times: use {{i}} or {{t}}")
    return paths


# what a pair holds in memory besides torch, the network and its tiles, per pixel in float32 planes (3 for RGB, 4
# with alpha): the two inputs, each output, and while one is written its rounding (two RGB temporaries). Measured
# on the CPU: a 2400 x 2400 pair in 512-pixel tiles took 61 bytes a pixel more than a 1200 x 1200 one (60 here)
_WRITE_PLANES = 6
# torch, the network and its smallest tiles: about 0.6 GiB beside a 1200 x 1200 pair on the CPU (at least this)
_NETWORK_BYTES = 2**29


def pair_memory(width: int, height: int, outputs: int = 1, alpha: bool = False) -> int:
    """Bytes of memory that interpolating a pair of ``width`` x ``height`` frames into ``outputs`` frames takes at
    least. The engine holds whole frames (inputs, outputs, the tiles' sums): tiles bound the network's share only,
    so a frame too large for memory cannot run in tiles."""
    planes = 4 if alpha else 3
    return width * height * 4 * (planes * (2 + outputs) + _WRITE_PLANES) + _NETWORK_BYTES


def memory_available() -> Optional[int]:
    """Bytes of memory a new job can take (Linux's MemAvailable); None where that cannot be read."""
    try:
        fields = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError, IndexError):
        return None


def check_memory(path: Path, width: int, height: int, outputs: int, alpha: bool = False, held: int = 0) -> None:
    """ValueError naming the size and the fix where a pair of frames the size of ``path`` needs more memory than
    this machine has free (``pair_memory``, ``memory_available``); ``held``: bytes of it already taken (the
    decoded inputs)."""
    need, free = pair_memory(width, height, outputs, alpha), memory_available()
    if free is not None and need > free + held:
        raise FieldError(Said("{path} is {width}x{height}: interpolating a pair that size takes at least {need:.1f} "
                              "GiB of memory, {free:.1f} GiB is free (whole frames are held; {tile} bounds only the "
                              "network's share) -- scale the frames down first (e.g. ffmpeg -i {path} -vf "
                              "scale=iw/2:-1 half{suffix}), or free some memory", path=path, width=width,
                              height=height, need=need / 2**30, free=(free + held) / 2**30, suffix=Path(path).suffix))


# what marks an image this function wrote (media.files.mark_made): a rerun may replace it, a user's file it keeps
_MADE_BY = "run.py --one --two"


def interpolate_files(one: Path, two: Path, out: Path, times: Sequence[float] = (0.5,),
                      interpolator: Optional[Union[Interpolator, InterpolatorOptions]] = None,
                      space_check: bool = True, progress: bool = False, overwrite: bool = False) -> List[Path]:
    """Read two images, interpolate, write one image per t (8 or 16 bits, with alpha where either input has it,
    grey where both are). Returns the written paths.

    ``interpolator`` is an ``Interpolator``, or the options to build one with (default ``InterpolatorOptions()``)
    once the times, the outputs and the inputs have been checked: a mistake costs no loading of weights, nor of
    torch. ``space_check``: before that, the outputs' folder must have room for them, measured on the inputs
    (``media.images.check_image_outputs``). ``progress``: say on stderr when the network loads and, while the
    pair is interpolated, that it is (a spinner on a terminal; on the CPU a 720p pair takes most of a minute).
    An existing file at an output's name is replaced where this function wrote it and nobody changed it since;
    any other is kept and the call refused before any work (OutputError), unless ``overwrite``.
    """
    from ..media.images import check_image_outputs, check_writable, image_size, read_image_channels, write_image

    times = check_times(times)
    paths = output_paths(Path(out), times)
    for path in paths:
        check_writable(path)
    check_not_input(paths, [one, two])  # (said as such, before an input at --out is taken for a user's file)
    for path in paths:
        check_replaceable(path, overwrite, _MADE_BY)
    for path in (one, two):  # a frame too large is said from its header, before it is decoded (PNG, JPEG, BMP)
        size = image_size(path)
        if size is not None:
            check_memory(path, *size, len(times))
    rgb_one, alpha_one, depth_one, channels_one = read_image_channels(one)
    rgb_two, alpha_two, depth_two, channels_two = read_image_channels(two)
    if rgb_one.shape != rgb_two.shape:
        raise ValueError(f"frames differ in size: {one} is {rgb_one.shape[1]}x{rgb_one.shape[0]}, "
                         f"{two} is {rgb_two.shape[1]}x{rgb_two.shape[0]}")
    held = sum(a.nbytes for a in (rgb_one, rgb_two, alpha_one, alpha_two) if a is not None)
    check_memory(one, rgb_one.shape[1], rgb_one.shape[0], len(times), alpha_one is not None or alpha_two is not None,
                 held)
    depth = max(depth_one, depth_two)
    check_image_outputs(paths, [one, two], rgb_one.shape[1], rgb_one.shape[0], depth, space_check)
    if interpolator is None or isinstance(interpolator, InterpolatorOptions):
        options = interpolator or InterpolatorOptions()
        if progress:
            print(loading_line(options), file=sys.stderr, flush=True)
        from .interpolator import Interpolator

        interpolator = Interpolator(options)
    height, width = rgb_one.shape[:2]
    with Spinner(f"interpolating the {width}x{height} pair ({len(times)} time{'s' * (len(times) > 1)})",
                 disable=not progress):
        if alpha_one is None and alpha_two is None:
            frames, alphas = interpolator(rgb_one, rgb_two, times), [None] * len(times)
        else:
            opaque = np.ones(rgb_one.shape[:2], np.float32)
            frames, alphas = interpolator.interpolate_with_alpha(
                rgb_one, rgb_two, alpha_one if alpha_one is not None else opaque,
                alpha_two if alpha_two is not None else opaque, times)
    grey = channels_one == channels_two == 1  # written grey as they came (the network's channels differ a little)
    for path, frame, alpha in zip(paths, frames, alphas):
        write_image(path, frame.mean(axis=2) if grey else frame, alpha, depth)
        mark_made(path, _MADE_BY)
    return paths
