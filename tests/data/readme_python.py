import numpy as np
import torch

from softsplat_vfi import Interpolator, InterpolatorOptions
from softsplat_vfi.media.images import read_image

one, _, _ = read_image("images/one.png")                  # H x W x 3 float32 RGB in [0, 1]
two, _, _ = read_image("images/two.png")
interp = Interpolator(InterpolatorOptions(device="cpu"))  # "cuda" on a GPU; loads weights/network.safetensors
frames = interp(one, two, [0.25, 0.5, 0.75])              # H x W x 3 float RGB in [0, 1] back
a8, b8 = (np.rint(f * 255).astype(np.uint8) for f in (one, two))
mids = interp.interpolate_integer(a8, b8, [0.5])          # uint8/uint16 H x W x 3, or x 4 with alpha
mids = interp.interpolate_integer_with_neighbours(a8, b8, [0.5], (a8, 1.0), (b8, 1.0))  # quadratic paths, as videos
from softsplat_vfi.engine.files import interpolate_files  # what `run.py --one --two --out` does
interpolate_files("images/one.png", "images/two.png", "mid.png", [0.5], InterpolatorOptions(device="cpu"))
import run                                                # the published API, unchanged (a shim)
ten_one, ten_two = (torch.from_numpy(f[:, :, ::-1].copy()).permute(2, 0, 1) for f in (one, two))  # 3 x H x W BGR
mid, = run.estimate(ten_one, ten_two, [0.5])
flow = torch.full((1, 2, *one.shape[:2]), 2.0)            # N x 2 x H x W, pixels, x then y (run.read_flo reads .flo)
warped = run.backwarp(tenIn=ten_one[None], tenFlow=flow)
from softsplat_vfi import softsplat  # self-contained (softsplat_vfi/softsplat.py): copy it; `import softsplat` too
metric = torch.zeros(1, 1, *one.shape[:2])
out = softsplat.splat(ten_one[None], flow, metric, mode="soft")   # or the published call style:
out = softsplat.softsplat(tenIn=ten_one[None], tenFlow=flow, tenMetric=metric, strMode="soft")
