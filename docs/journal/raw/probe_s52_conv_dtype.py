"""Session 52: the engine with the convolutions stored in bf16 (what precision auto loads on a bf16 GPU) against
the float32-weight network under the same bf16 autocast, side by side on one GPU, as videos run it (uint8 frames,
CUDA graphs, quadratic paths through a pan), and whether their frames are identical.

    PYTHONPATH=. python3 docs/journal/raw/probe_s52_conv_dtype.py IMAGE OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import cv2
import numpy as np
import torch

from docs.journal.raw.probe_s52_precision import pan, run_stream
from engine import Interpolator, InterpolatorOptions
from model.weights import load_weights


def main() -> int:
    image = cv2.cvtColor(cv2.imread(sys.argv[1]), cv2.COLOR_BGR2RGB)
    out_path = Path(sys.argv[2])
    device = torch.device("cuda")
    rows = []
    for weights in ("network", "fast"):
        path = Path(f"weights/{weights}.safetensors")
        float_net = load_weights(path, device).eval()
        for width, height in ((1920, 1080), (3840, 2160)):
            frames = pan(image, width, height)
            row = {"weights": weights, "size": f"{width}x{height}", "gpu": torch.cuda.get_device_name()}
            outputs = {}
            for variant in ("float32", "bf16", "float32", "bf16"):
                if variant == "bf16":  # as run.py loads it: precision auto
                    interp = Interpolator(InterpolatorOptions(weights=path, device="cuda", flow_scale=1.0))
                else:
                    interp = Interpolator(InterpolatorOptions(device="cuda", precision="bf16", flow_scale=1.0),
                                          network=float_net)
                row[f"{variant}_conv_dtype"] = str(interp.network.decoder.full[0][0].weight.dtype)
                run_stream(interp, [f.copy() for f in frames[:5]])
                ms = 1000 * statistics.median(run_stream(interp, frames))
                row.setdefault(f"{variant}_weights_ms_per_pair", []).append(ms)
                outputs[variant] = [interp.interpolate_integer_with_neighbours(frames[i], frames[i + 1], [0.5],
                                                                               (frames[i - 1], 1.0),
                                                                               (frames[i + 2], 1.0))[0]
                                    for i in (8, 9, 10)]
            row["frames_identical"] = all(np.array_equal(a, b) for a, b in zip(outputs["float32"], outputs["bf16"]))
            row["max_abs_difference"] = max(int(np.abs(a.astype(int) - b.astype(int)).max())
                                            for a, b in zip(outputs["float32"], outputs["bf16"]))
            rows.append(row)
            print(json.dumps(row), flush=True)
    out_path.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
