import numpy as np
import torch

from engine import Interpolator, InterpolatorOptions
from media.images import read_image

one, _, _ = read_image("images/one.png")   # H x W x 3 float32 RGB in [0, 1] (and alpha, bit depth)
two, _, _ = read_image("images/two.png")
interp = Interpolator(InterpolatorOptions(device="cpu"))   # "cuda" on a GPU; loads weights/network.safetensors
frames = interp(one, two, [0.25, 0.5, 0.75])   # H x W x 3 float RGB arrays in [0, 1] in, the same back
mids = interp(torch.from_numpy(one).permute(2, 0, 1), torch.from_numpy(two).permute(2, 0, 1))  # or 3 x H x W
a8, b8 = (np.rint(frame * 255).astype(np.uint8) for frame in (one, two))
mids = interp.interpolate_integer(a8, b8, [0.5])   # uint8/uint16 H x W x 3, or x 4 with alpha
mids = interp.interpolate_integer_with_neighbours(a8, b8, [0.5], (a8, 1.0), (b8, 1.0))
# quadratic paths through the frames beside the pair (here the pair itself; each with its distance in time, in
# pair intervals), as run.py --video; consecutive pairs of a stream share their flows

from engine.files import interpolate_files          # what `run.py --one --two --out` does
interpolate_files("images/one.png", "images/two.png", "mid.png", [0.5], InterpolatorOptions(device="cpu"))

import run                                          # the published API, unchanged
ten_one = torch.from_numpy(one[:, :, ::-1].copy()).permute(2, 0, 1)   # 3 x H x W BGR in [0, 1]
ten_two = torch.from_numpy(two[:, :, ::-1].copy()).permute(2, 0, 1)
mid, = run.estimate(ten_one, ten_two, [0.5])        # 3 x H x W BGR, on the CPU
height, width = one.shape[:2]
flow = np.full((height, width, 2), 2.0, np.float32)   # pixels, x then y; saved as a Middlebury .flo file:
with open("flow.flo", "wb") as f:
    f.write(np.float32(202021.25).tobytes() + np.int32([width, height]).tobytes() + flow.tobytes())
flo = run.read_flo("flow.flo")                       # H x W x 2 numpy array
flow_t = torch.from_numpy(flo).permute(2, 0, 1)[None]   # 1 x 2 x H x W
x = ten_one[None]                                    # N x C x H x W
warped = run.backwarp(tenIn=x, tenFlow=flow_t)      # backward warping

import softsplat
metric = torch.zeros(1, 1, height, width)
out = softsplat.splat(x, flow_t, metric, mode="soft")   # or the published call style:
out = softsplat.softsplat(tenIn=x, tenFlow=flow_t, tenMetric=metric, strMode="soft")
