"""Xiph benchmark (the SoftSplat paper's protocol).

    python benchmark_xiph.py --data xiph/ [--json out.json]

Eight Netflix 4K clips from media.xiph.org, first 100 frames; every even frame is
interpolated from its two neighbours and scored (scikit-image PSNR/SSIM on uint8).
Two variants: 'resized' (frames resized to 2048x1080 with INTER_AREA) and
'cropped' (the centre 2048x1080). ``--data`` holds ``<clip>.y4m`` files or
``<clip>/`` folders of frames (png, sorted by name). The project fetches nothing: get the clips yourself
(``SOURCE`` below names them) and point ``--data`` at them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from engine.options import DEFAULT_WEIGHTS

if TYPE_CHECKING:
    from engine.interpolator import Interpolator

CLIPS = ("BoxingPractice", "Crosswalk", "DrivingPOV", "FoodMarket", "FoodMarket2", "RitualDance",
         "SquareAndTimelapse", "Tango")
SOURCE = ("the first 100 frames of media.xiph.org/video/derf/ElFuente/Netflix_<clip>_4096x2160_60fps_10bit_420.y4m "
          f"for <clip> in {', '.join(CLIPS)}")


def frames_of(source: Path, limit: int) -> Iterator[np.ndarray]:
    from media.images import read_image
    from media.y4m import read_y4m

    if source.suffix == ".y4m":
        yield from read_y4m(source, limit)
        return
    files = sorted(p for p in source.iterdir() if p.suffix.lower() in (".png", ".tif", ".tiff", ".bmp"))
    for path in files[:limit]:
        yield read_image(path)[0]


def variant(frame: np.ndarray, kind: str, size: Tuple[int, int]) -> np.ndarray:
    import cv2

    w, h = size
    if kind == "resized":
        return cv2.resize(frame, (w, h), interpolation=cv2.INTER_AREA)
    fh, fw = frame.shape[:2]
    if fh < h or fw < w:
        raise ValueError(f"a {fw}x{fh} frame is smaller than the {w}x{h} crop")
    top, left = (fh - h) // 2, (fw - w) // 2
    return frame[top:top + h, left:left + w]


def evaluate_clip(interpolator: Union["Interpolator", Callable[[np.ndarray, np.ndarray, Sequence[float]],
                                                                List[np.ndarray]]],
                  source: Path, kinds: Sequence[str], size: Tuple[int, int], limit: int) -> Dict[str, Dict]:
    """Mean PSNR/SSIM of ``interpolator`` (an ``engine.Interpolator``, or any callable ``(one, two, times)`` on
    H x W x 3 float frames) on one clip, per variant."""
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    scores = {k: {"psnr": [], "ssim": []} for k in kinds}
    window: List[Dict[str, np.ndarray]] = []
    for index, frame in enumerate(frames_of(source, limit)):
        window.append({k: variant(frame, k, size) for k in kinds})
        window = window[-3:]
        # frame index-1 is even and has both neighbours: interpolate it from them
        if len(window) == 3 and (index - 1) % 2 == 0:
            for k in kinds:
                mid = interpolator(window[0][k], window[2][k], [0.5])[0]
                est = np.clip(np.rint(mid * 255.0), 0, 255).astype(np.uint8)
                truth = np.clip(np.rint(window[1][k] * 255.0), 0, 255).astype(np.uint8)
                scores[k]["psnr"].append(peak_signal_noise_ratio(truth, est, data_range=255))
                scores[k]["ssim"].append(structural_similarity(truth, est, data_range=255, channel_axis=2))
    if not scores[kinds[0]]["psnr"]:
        raise ValueError(f"{source}: fewer than 3 frames, nothing to interpolate")
    return {k: {"psnr": float(np.mean(v["psnr"])), "ssim": float(np.mean(v["ssim"])), "frames": len(v["psnr"])}
            for k, v in scores.items()}


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Xiph benchmark (resized and cropped 2K).",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", type=Path, default=Path("xiph"), help="folder of <clip>.y4m or <clip>/ frame folders")
    p.add_argument("--clips", nargs="+", default=None, help="clip names (default: all found in --data)")
    p.add_argument("--frames", type=int, default=100, help="frames read from each clip")
    p.add_argument("--variants", nargs="+", default=["resized", "cropped"], choices=["resized", "cropped"])
    p.add_argument("--size", default="2048x1080", help="WxH of the resized frames and of the centre crop")
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--device", default="auto")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    try:
        size = tuple(int(v) for v in args.size.lower().split("x"))
        if len(size) != 2 or min(size) < 1:
            raise ValueError
    except ValueError:
        print(f"error: --size {args.size!r}: use WxH, e.g. 2048x1080", file=sys.stderr)
        return 2
    try:
        if not args.data.is_dir():
            raise ValueError(f"{args.data} does not exist: pass --data, a folder of <clip>.y4m files or <clip>/ "
                             f"frame folders ({SOURCE}; nothing is downloaded)")
        names = args.clips or sorted({p.stem for p in args.data.iterdir() if p.suffix == ".y4m" or p.is_dir()})
        sources = []
        for name in names:
            y4m, folder = args.data / f"{name}.y4m", args.data / name
            if not (y4m.is_file() or folder.is_dir()):
                raise ValueError(f"clip {name} not found in {args.data} (as {name}.y4m or {name}/)")
            sources.append(y4m if y4m.is_file() else folder)
        if not sources:
            raise ValueError(f"no clips in {args.data}: expected <clip>.y4m files or <clip>/ folders")
        from engine import Interpolator, InterpolatorOptions  # (torch: after the data's checks, said at once)

        # whole frames, as the paper's protocol scores them
        interpolator = Interpolator(InterpolatorOptions(weights=args.weights, device=args.device, tile=0,
                                                        precision="bf16" if args.bf16 else "fp32"))
        results = {}
        for source in sources:
            results[source.stem] = evaluate_clip(interpolator, source, args.variants, size, args.frames)
            line = "  ".join(f"{k} PSNR {v['psnr']:.2f} SSIM {v['ssim']:.4f}" for k, v in results[source.stem].items())
            print(f"{source.stem:20s} {line}", flush=True)
    except ValueError as exc:  # what the user can fix (files, weights, options): ImageError, Y4MError, WeightsError too
        print(f"error: {exc}", file=sys.stderr)
        return 2
    means = {k: {m: float(np.mean([r[k][m] for r in results.values()])) for m in ("psnr", "ssim")}
             for k in args.variants}
    print("mean                 "
          + "  ".join(f"{k} PSNR {v['psnr']:.2f} SSIM {v['ssim']:.4f}" for k, v in means.items()))
    if args.json:
        args.json.write_text(json.dumps({"clips": results, "mean": means, "weights": str(args.weights)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
