"""Quality, size and time of the output encoders at one --crf and --preset, as the video pipeline writes them.

    python -m bench.bench_encoders --video .data/ddp/grounded-sam2__car.mp4 [--frames 24] [--crf 18]
                                   [--preset medium] [--codecs libx264 libvpx-vp9 libsvtav1 ...]

The first frames of the clip go through ``media.video.FrameWriter`` (the options run.py gives each encoder) into
an mkv, are decoded again, and compared with what went in: PSNR over all frames, file size, wall time.
"""

from __future__ import annotations

import argparse
import sys
import time
from fractions import Fraction
from pathlib import Path
from typing import List, Optional

import numpy as np

from softsplat_vfi.engine.options import add_flags
from softsplat_vfi.media.video import FrameWriter, VideoError, probe, read_frames
from softsplat_vfi.pipeline.video import VideoOptions


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--video", type=Path, required=True)
    p.add_argument("--frames", type=int, default=24)
    add_flags(p, options=VideoOptions, only=("crf", "preset"))  # run.py's, from their one declaration
    p.add_argument("--codecs", nargs="+", default=["libx264", "libx265", "libvpx-vp9", "libvpx", "libsvtav1"])
    p.add_argument("--out", type=Path, default=Path("/tmp"), help="folder for the encoded files")
    args = p.parse_args(argv)
    if args.frames < 1:
        p.error("--frames must be at least 1")
    info = probe(args.video)
    frames = []
    for frame in read_frames(info):
        frames.append(frame)
        if len(frames) == args.frames:
            break
    height, width = frames[0].shape[:2]
    print(f"{args.video.name}: {len(frames)} frames of {width}x{height}, --crf {args.crf} --preset {args.preset}")
    for codec in args.codecs:
        out = args.out / f"bench_encoders_{codec}.mkv"
        start = time.perf_counter()
        try:
            writer = FrameWriter(out, width, height, Fraction(25), codec=codec, crf=args.crf, preset=args.preset)
            for frame in frames:
                writer.write(frame)
            writer.close()
        except VideoError as exc:
            print(f"{codec:12s} failed: {exc}")
            continue
        seconds = time.perf_counter() - start
        # 10-bit output (ProRes) decodes to 16-bit values: back to the 8-bit scale of the input
        decoded = [f.astype(np.float64) / (257.0 if f.dtype == np.uint16 else 1.0) for f in read_frames(probe(out))]
        mse = np.mean([(a.astype(np.float64) - b) ** 2 for a, b in zip(frames, decoded)])
        print(f"{codec:12s} {10 * np.log10(255 ** 2 / mse):6.2f} dB {out.stat().st_size / 1e3:8.0f} kB "
              f"{seconds:6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
