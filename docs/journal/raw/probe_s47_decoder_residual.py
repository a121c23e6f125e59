"""Session 47 probe: on the easy held-out triplets (classical baseline at least 36 dB), does the synthesis decoder's
residual add or cost precision? Scores the network's frame (mask blend of the splatted frames + residual) against
the same mask blend without the residual, two frames at t = 0.5, scale 1, CPU fp32.

    python docs/journal/raw/probe_s47_decoder_residual.py FOOTAGE FOOTAGE2 docs/journal/raw/probe_s47_flow_source.json
"""

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from model.synthesis import splat_pyramid
from model.motion import linear_flows
from model.warp import InputPadder
from model.weights import load_weights
from training.holdout import load_holdout
from training.losses import psnr


def decode(decoder, warped_one, warped_two, t):
    """Decoder.forward, returning (blend + residual, blend)."""
    x = None
    for i, level in enumerate(range(decoder.levels - 1, -1, -1)):
        a, b = warped_one[level + 1], warped_two[level + 1]
        if x is None:
            x = torch.cat([a, b, torch.zeros_like(a[:, :1]) + t], 1)
        else:
            x = torch.cat([a, b, F.interpolate(x, size=a.shape[2:], mode="bilinear", align_corners=False)], 1)
        x = decoder.blocks[i](x)
    img_one, img_two = warped_one[0], warped_two[0]
    x = F.interpolate(x, size=img_one.shape[2:], mode="bilinear", align_corners=False)
    out = decoder.full(torch.cat([img_one, img_two, x], 1)).float()
    mask = torch.sigmoid(out[:, 3:4])
    blend = mask * img_one[:, :3] + (1.0 - mask) * img_two[:, :3]
    return blend + out[:, :3], blend


def main() -> None:
    folders = [Path(sys.argv[1]), Path(sys.argv[2])]
    base = json.load(open(sys.argv[3]))["scores"]["baseline"]
    _, triplets = load_holdout(folders)
    assert len(triplets) == len(base)
    net = load_weights("weights/network.safetensors").eval()
    rows = []
    with torch.no_grad():
        for i, tr in enumerate(triplets):
            if base[i] < 36.0:
                continue
            one, two, mid = (x.float().div(255).unsqueeze(0) for x in (tr.one, tr.two, tr.mid))
            padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
            one_p, two_p = padder.pad(one, two)
            state = net.estimate_flow(one_p, two_p)
            to_one, to_two = linear_flows(state.flow_fwd, state.flow_bwd, 0.5)
            w1 = splat_pyramid(state.one, state.feats_one, to_one, state.metric_one)
            w2 = splat_pyramid(state.two, state.feats_two, to_two, state.metric_two)
            full, blend = decode(net.decoder, w1, w2, 0.5)
            scores = [float(psnr(padder.unpad(x).clamp(0, 1), mid)) for x in (full, blend)]
            rows.append({"index": i, "clip": tr.clip, "baseline": base[i], "network": scores[0], "blend": scores[1]})
    n = len(rows)
    mean = {k: sum(r[k] - r["baseline"] for r in rows) / n for k in ("network", "blend")}
    print(f"{n} triplets with baseline >= 36 dB: margin network {mean['network']:+.3f}, blend without residual "
          f"{mean['blend']:+.3f}; blend better on {sum(r['blend'] > r['network'] for r in rows)}")
    Path("docs/journal/raw/probe_s47_decoder_residual.json").write_text(json.dumps(rows) + "\n")


if __name__ == "__main__":
    main()
