"""Interpolate between two images with softmax splatting (the command line: softsplat_vfi/cli.py).

    python run.py --one images/one.png --two images/two.png --out mid.png
    python run.py --video in.mp4 --out out.mp4              # twice the frame rate, same duration

A shim, so that the published calls keep working: ``run.estimate(tenOne, tenTwo, fltTimes)``, ``run.read_flo(path)``
and ``run.backwarp(tenIn=..., tenFlow=...)``, and ``python run.py`` runs the command (``softsplat-vfi`` once
installed). The code is the ``softsplat_vfi`` package's.
"""

import sys

from softsplat_vfi.cli import backwarp, build_parser, estimate, interpolator_options, main, read_flo, video_options

__all__ = ["backwarp", "build_parser", "estimate", "interpolator_options", "main", "read_flo", "video_options"]

if __name__ == "__main__":
    sys.exit(main())
