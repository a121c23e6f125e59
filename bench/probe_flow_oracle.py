"""Session 58's oracle probe (F39), kept in one commit and removed in the next: the repeated-pattern set's static
scenes synthesized by the shipped weights from their own flows, from those flows with the background's set to zero
(the occluder's kept), and from the exact flows. CPU: ``python -m bench.probe_flow_oracle``."""

import numpy as np
import torch

from bench import patterns
from model import load_weights
from model.warp import InputPadder


def _tensor(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x)).permute(2, 0, 1)[None]


def main() -> None:
    net = load_weights("weights/network.safetensors", torch.device("cpu")).eval()
    scores: dict = {"ours": [], "ours, background zero": [], "exact": []}
    for scene in (s for s in patterns.scenes() if s.shift == (0.0, 0.0)):
        one, truth, two = (patterns.render(scene, t) for t in (0.0, 0.5, 1.0))
        h, w = scene.size
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        on_one, on_two = (torch.from_numpy(patterns.occluder_mask(scene, xx, yy, t) > 0)[None, None].float()
                          for t in (0.0, 1.0))
        motion = torch.tensor(scene.occluder, dtype=torch.float32).view(1, 2, 1, 1)
        padder = InputPadder(_tensor(one).shape, 2 ** len(net.config.encoder_widths))
        a, b = padder.pad(_tensor(one), _tensor(two))
        pad = lambda x: padder.pad(x)[0]  # noqa: E731
        with torch.no_grad():
            state = net.estimate_flow(a, b, "auto")
            flows = {"ours": (state.flow_fwd, state.flow_bwd),
                     "ours, background zero": (state.flow_fwd * pad(on_one), state.flow_bwd * pad(on_two)),
                     "exact": (pad(on_one * motion), pad(-on_two * motion))}
            for name, (fwd, bwd) in flows.items():
                chosen = net.flow_state(a, b, state.feats_one, state.feats_two, fwd, bwd)
                out = padder.unpad(net.synthesize(chosen, 0.5))[0].permute(1, 2, 0).numpy()
                scores[name].append(patterns.psnr(out, truth))
    for name, values in scores.items():
        print(f"{name:24s} static scenes mean PSNR {np.mean(values):.2f}")


if __name__ == "__main__":
    main()
