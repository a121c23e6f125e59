"""Xiph benchmark (the SoftSplat paper's protocol: evaluation/xiph.py).

    python benchmark_xiph.py --data xiph/ [--json out.json]

Eight Netflix 4K clips from media.xiph.org, first 100 frames; every even frame is interpolated from its two
neighbours and scored (PSNR, scikit-image SSIM and the detail kept, on uint8), on 'resized' (2048x1080, INTER_AREA)
and 'cropped' (the centre 2048x1080) frames. ``--data`` holds ``<clip>.y4m`` files or ``<clip>/`` folders of frames
(png, sorted by name). The project fetches nothing: get the clips yourself (``evaluation.xiph.SOURCE`` names them) and
point ``--data`` at them. Ours runs as run.py runs it with the same flags, on whole frames; the first line printed
says how.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional

import numpy as np

from softsplat_vfi.engine.options import DefaultsFormatter, cli_message, show_notes
from evaluation.methods import add_engine_flags, engine_options, ours
from evaluation.xiph import VARIANTS, XIPH, evaluate_clip, find_clips


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Xiph benchmark (resized and cropped 2K).",
                                formatter_class=DefaultsFormatter)
    p.add_argument("--data", type=Path, default=Path("xiph"), help="folder of <clip>.y4m or <clip>/ frame folders")
    p.add_argument("--clips", nargs="+", default=None, help="clip names (default: all found in --data)")
    p.add_argument("--frames", type=int, default=100, help="frames read from each clip")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--size", default="2048x1080", help="WxH of the resized frames and of the centre crop")
    add_engine_flags(p)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    show_notes()  # the library's notes on stderr while this tool runs
    try:
        size = tuple(int(v) for v in args.size.lower().split("x"))
        if len(size) != 2 or min(size) < 1:
            raise ValueError
    except ValueError:
        print(f"error: --size {args.size!r}: use WxH, e.g. 2048x1080", file=sys.stderr)
        return 2
    try:
        sources = find_clips(args.data, args.clips)  # (torch loads after the data's checks: said at once)
        method = ours(engine_options(args, XIPH))
        print(XIPH.header(method), flush=True)
        results = {}
        for source in sources:
            results[source.stem] = evaluate_clip(method, source, args.variants, size, args.frames)
            line = "  ".join(f"{k} PSNR {v['psnr']:.2f} SSIM {v['ssim']:.4f}" for k, v in results[source.stem].items())
            print(f"{source.stem:20s} {line}", flush=True)
    except ValueError as exc:  # what the user can fix (files, weights, options): ImageError, Y4MError, WeightsError too
        print(f"error: {cli_message(exc)}", file=sys.stderr)
        return 2
    means = {k: {m: float(np.mean([r[k][m] for r in results.values()])) for m in ("psnr", "ssim", "detail")}
             for k in args.variants}
    print("mean                 "
          + "  ".join(f"{k} PSNR {v['psnr']:.2f} SSIM {v['ssim']:.4f}" for k, v in means.items()))
    if args.json:
        args.json.write_text(json.dumps({"clips": results, "mean": means, "weights": method.label,
                                         "settings": method.settings}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
