"""Session 59's probe for rule Y (docs/quality.md), kept in one commit and removed in the next: on the video path,
pixels whose pair flow fails the forward-backward check move along the straight line of their flow to their
neighbour instead.

    python -m bench.probe_follow_neighbours patterns current|y [N]    # the pattern set along the video path
    python -m bench.probe_follow_neighbours run current|y MODULE ARGS  # a module's main with the candidate or not

``run y training.holdout --data F F2 --device cpu --flow-scale auto --motion quadratic --weights
weights/network.safetensors`` is rule Y's (b); ``patterns`` renders frames -1, 0, 0.5, 1, 2 (``Network.forward_four``).
"""
import dataclasses
import runpy
import sys

import numpy as np
import torch

import model.network as network
from model.warp import backwarp
from bench import patterns

_SYNTH = network.Network.synthesize


def occluded(flow: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """N x 1 x H x W bool: pixels whose flow to the other frame the other frame's flow does not bring back
    (Sundaram et al. 2010's forward-backward check)."""
    flow, other = flow.float(), other.float()
    back = backwarp(other, flow, "border")
    err = (flow + back).square().sum(1, keepdim=True)
    return err > 0.01 * (flow.square().sum(1, keepdim=True) + back.square().sum(1, keepdim=True)) + 0.5


def candidate(self, state, t, neighbour_flows=None, neighbour_times=(1.0, 1.0)):
    if neighbour_flows is not None:
        fwd, bwd = state.flow_fwd, state.flow_bwd
        (before, after), (gb, ga) = neighbour_flows, neighbour_times
        if before is not None:
            fwd = torch.where(occluded(state.flow_fwd, state.flow_bwd), -before / gb, fwd).to(fwd.dtype)
        if after is not None:
            bwd = torch.where(occluded(state.flow_bwd, state.flow_fwd), -after / ga, bwd).to(bwd.dtype)
        state = dataclasses.replace(state, flow_fwd=fwd, flow_bwd=bwd)
    return _SYNTH(self, state, t, neighbour_flows, neighbour_times)


def ten(x):
    return torch.from_numpy(np.ascontiguousarray(x)).permute(2, 0, 1)[None].float()


def pattern_video(n=None):
    from engine import Interpolator, InterpolatorOptions
    interp = Interpolator(InterpolatorOptions(weights="weights/network.safetensors", device="cpu", tile=0))
    net = interp.network
    chosen = patterns.scenes()[:n] if n else patterns.scenes()
    rows = []
    for scene in chosen:
        b, one, mid, two, a = (patterns.render(scene, t) for t in (-1.0, 0.0, 0.5, 1.0, 2.0))
        with torch.no_grad():
            out = net.forward_four(ten(b), ten(one), ten(two), ten(a), [0.5], "auto")[0]
        out = out[0].permute(1, 2, 0).clamp(0, 1).numpy()
        far = patterns.far_mask(scene)
        rows.append((scene.name, scene.shift == (0.0, 0.0), patterns.psnr(out, mid), patterns.psnr(out, mid, far)))
        print(f"{rows[-1][0]:40s} {rows[-1][2]:6.2f} far {rows[-1][3]:6.2f}", flush=True)
    for label, static in (("static", True), ("moving", False)):
        sel = [r for r in rows if r[1] == static]
        if sel:
            print(label, f"{np.mean([r[2] for r in sel]):.3f}", "far", f"{np.mean([r[3] for r in sel]):.3f}", len(sel))


if __name__ == "__main__":
    if sys.argv[2] == "y":
        network.Network.synthesize = candidate
    if sys.argv[1] == "patterns":
        pattern_video(int(sys.argv[3]) if len(sys.argv) > 3 else None)
    else:
        module = sys.argv[3]
        sys.argv = [module] + sys.argv[4:]
        runpy.run_module(module, run_name="__main__")
