"""Session 47 probe: on the easy held-out triplets (classical baseline at least 36 dB), does the synthesis decoder's
residual add or cost precision? Scores the network's frame (mask blend of the splatted frames + residual) against
the same mask blend without the residual, two frames at t = 0.5, scale 1, CPU fp32.

    python docs/journal/raw/probe_s47_decoder_residual.py FOOTAGE FOOTAGE2 docs/journal/raw/probe_s47_flow_source.json
"""

import json
import sys
from pathlib import Path

import torch

from model.warp import InputPadder
from model.weights import load_weights
from training.holdout import load_holdout
from training.losses import psnr


def main() -> None:
    folders = [Path(sys.argv[1]), Path(sys.argv[2])]
    base = json.load(open(sys.argv[3]))["scores"]["baseline"]
    _, triplets = load_holdout(folders)
    assert len(triplets) == len(base)
    net = load_weights("weights/network.safetensors").eval()
    last = {}  # the decoder's full-resolution output of the last call: residual RGB and the mask's logit
    net.decoder.full.register_forward_hook(lambda module, inputs, out: last.update(out=out))
    rows = []
    with torch.no_grad():
        for i, tr in enumerate(triplets):
            if base[i] < 36.0:
                continue
            one, two, mid = (x.float().div(255).unsqueeze(0) for x in (tr.one, tr.two, tr.mid))
            padder = InputPadder(one.shape, 2 ** len(net.config.encoder_widths))
            one_p, two_p = padder.pad(one, two)
            state = net.estimate_flow(one_p, two_p)
            full = net.synthesize(state, 0.5)
            blend = full - last["out"][:, :3].float()  # Decoder.forward: blend of the splatted frames + out[:, :3]
            scores = [float(psnr(padder.unpad(x).clamp(0, 1), mid)) for x in (full, blend)]
            rows.append({"index": i, "clip": tr.clip, "baseline": base[i], "network": scores[0], "blend": scores[1]})
    n = len(rows)
    mean = {k: sum(r[k] - r["baseline"] for r in rows) / n for k in ("network", "blend")}
    print(f"{n} triplets with baseline >= 36 dB: margin network {mean['network']:+.3f}, blend without residual "
          f"{mean['blend']:+.3f}; blend better on {sum(r['blend'] > r['network'] for r in rows)}")
    Path("docs/journal/raw/probe_s47_decoder_residual.json").write_text(json.dumps(rows) + "\n")


if __name__ == "__main__":
    main()
