"""Session 52: the networks with their convolution stacks in channels-last (``model.layers.to_channels_last``)
against NCHW, side by side on one GPU: eager forward (bf16 autocast) and the engine as videos run it (uint8 frames,
CUDA graphs, quadratic paths through a pan; precision auto and fp32).

    PYTHONPATH=. python3 docs/journal/raw/probe_s52_channels_last.py IMAGE OUT.json
"""

from __future__ import annotations

import copy
import json
import statistics
import sys
from pathlib import Path

import cv2
import numpy as np
import torch

from bench.timing import cuda_time_ms
from docs.journal.raw.probe_s52_precision import pan, run_stream
from engine import Interpolator, InterpolatorOptions
from model.layers import to_channels_last
from model.weights import load_weights


def main() -> int:
    image = cv2.cvtColor(cv2.imread(sys.argv[1]), cv2.COLOR_BGR2RGB)
    out_path = Path(sys.argv[2])
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda")
    rows = []
    for weights in ("network", "fast"):
        nchw = load_weights(f"weights/{weights}.safetensors", device).eval()
        nets = {"nchw": nchw, "cl": to_channels_last(copy.deepcopy(nchw))}
        for width, height in ((1920, 1080), (3840, 2160)):
            frames = pan(image, width, height)
            row = {"weights": weights, "size": f"{width}x{height}", "gpu": torch.cuda.get_device_name()}
            one, two = (torch.from_numpy(f).permute(2, 0, 1)[None].float().div(255).to(device)
                        for f in frames[:2])
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                for layout in ("nchw", "cl", "nchw", "cl"):
                    ms = cuda_time_ms(lambda: nets[layout](one, two, [0.5]), repeats=20)
                    row.setdefault(f"eager_bf16_{layout}_ms", []).append(ms)
            outputs = {}
            for precision in ("auto", "fp32"):
                for layout in ("nchw", "cl", "nchw", "cl"):
                    interp = Interpolator(InterpolatorOptions(device="cuda", precision=precision, flow_scale=1.0),
                                          network=nets[layout])
                    run_stream(interp, [f.copy() for f in frames[:5]])
                    ms = 1000 * statistics.median(run_stream(interp, frames))
                    row.setdefault(f"engine_{precision}_{layout}_ms_per_pair", []).append(ms)
                    outputs[(precision, layout)] = interp.interpolate_integer(frames[10], frames[11], [0.5])[0]
                diff = (outputs[(precision, "nchw")].astype(np.float64)
                        - outputs[(precision, "cl")].astype(np.float64))
                mse = float(np.mean(diff ** 2))
                row[f"{precision}_nchw_vs_cl_psnr_db"] = 10 * np.log10(255.0 ** 2 / mse) if mse else float("inf")
            rows.append(row)
            print(json.dumps(row), flush=True)
    out_path.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
