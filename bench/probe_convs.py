"""Issue 85's second probe: which convolutions of the route cost more than their work, and whether padding their
channels to multiples of 8 (model.runtime.PaddedConv, as --compile pads them) pays in the uncompiled route.

    python3 -m bench.probe_convs OUT_DIR [--device cuda] [--size 1080x1920] [--pairs 6]

F77's profile found a cuDNN direct kernel taking 2.85 of the fast network's 15.2 ms per 1080p pair, twice a pair.
For each shipped network: every convolution the video route runs (the engine eager along quadratic paths, hooks
counting calls per pair and recording input shapes), timed alone under bf16 autocast as it is and with its channels
padded; then the route's CUDA graphs (flow state and synthesis, device tensors, as probe_engine times them) of the
network as shipped and with pad_channels applied to each part (encoder, synthesis decoder, flow decoders, all),
with only the channels inside each stack zero-extended (``pad_hidden_channels``: no copies at run time), with each
stack of convolutions run in channels_last (``ChannelsLast``), and with both, their frames' PSNR against the
shipped graphs'. Writes OUT_DIR/probe_convs.json and prints a summary.

Since F81 the metric pads its own convolutions on the GPU (``synthesis.Metric``, ``layers.run_padded``: they call
``F.conv2d`` with the modules' weights, so the census no longer sees them, and ``pad_channels`` leaves the metric
alone): the "metric" part is gone, and "shipped" includes the metric's padding. F81's figures came from the tree
before that (``git worktree add /tmp/f81 938ec51``, the probe run there).
"""

from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import functools
import json
import math
import sys
from fractions import Fraction
from pathlib import Path

import torch

from bench.bench_video import DEFAULT_WEIGHTS, FAST_WEIGHTS, route
from bench.probe_engine import texture_frames
from bench.timing import median_ms
from softsplat_vfi.engine import Interpolator, InterpolatorOptions
from softsplat_vfi.engine.options import add_flags
from softsplat_vfi.model.runtime import PaddedConv, pad_channels

PARTS = ("encoder", "decoder", "flow")


class ChannelsLast(torch.nn.Module):
    """A stack of convolutions run in channels_last, its input converted once and its output back: cuDNN's bf16
    kernels convert NCHW tensors to NHWC and back around every convolution (F30, F77: a fifth of the time)."""

    def __init__(self, stack: torch.nn.Module) -> None:
        super().__init__()
        self.stack = stack.to(memory_format=torch.channels_last)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stack(x.contiguous(memory_format=torch.channels_last)).contiguous()


def _stacks(net: torch.nn.Module):
    """(parent, name, stack) for each stack of conv blocks (a Sequential of Sequentials) in ``net``."""
    for module in list(net.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, torch.nn.Sequential) and len(child) and all(
                    isinstance(block, torch.nn.Sequential) for block in child):
                yield module, name, child


def pad_hidden_channels(net: torch.nn.Module, multiple: int = 8) -> torch.nn.Module:
    """``net``, changed in place: in each stack, a convolution's output channels between two convolutions zero-
    extended to a multiple of ``multiple`` and the next one's input alike, so that cuDNN's tensor-core kernels take
    them with no copy at run time (the same outputs: the extra channels are zero, and stay zero through the leaky
    ReLU); the stack's own input and output channels stay as they are (the fast network's metric: 4 -> 12 -> 1
    becomes 4 -> 16 -> 1)."""
    for _, _, stack in _stacks(net):
        convs = [block[0] for block in stack if isinstance(block[0], torch.nn.Conv2d)]
        for conv, after in zip(convs, convs[1:]):
            extra = -conv.out_channels % multiple
            if not extra or conv.groups != 1 or after.groups != 1:
                continue
            with torch.no_grad():
                conv.weight = torch.nn.Parameter(torch.cat([conv.weight, conv.weight.new_zeros(
                    extra, *conv.weight.shape[1:])]))
                if conv.bias is not None:
                    conv.bias = torch.nn.Parameter(torch.cat([conv.bias, conv.bias.new_zeros(extra)]))
                after.weight = torch.nn.Parameter(torch.cat([after.weight, after.weight.new_zeros(
                    after.weight.shape[0], extra, *after.weight.shape[2:])], 1))
            conv.out_channels += extra
            after.in_channels += extra
    return net


def channels_last_stacks(net: torch.nn.Module) -> torch.nn.Module:
    """``net``, changed in place: each stack (a Sequential of conv blocks) wrapped in ``ChannelsLast``."""
    for module, name, stack in _stacks(net):
        setattr(module, name, ChannelsLast(stack))
    return net


def conv_census(engine: Interpolator, frames: list, pairs: int) -> dict:
    """(module name, input shape) -> calls per pair along the eager route, after two pairs of warm-up."""
    counts: collections.Counter = collections.Counter()
    modules = {}
    hooks = []
    for name, module in engine.network.named_modules():
        if isinstance(module, torch.nn.Conv2d):
            modules[name] = module
            hooks.append(module.register_forward_hook(
                lambda m, i, o, name=name: counts.update([(name, tuple(i[0].shape))])))
    rate = Fraction(24)
    stamps = [Fraction(i) / rate for i in range(len(frames))]
    route(engine, frames[:3], stamps[:3], rate, 2)
    counts.clear()
    route(engine, frames[:pairs + 1], stamps[:pairs + 1], rate, 2)
    for hook in hooks:
        hook.remove()
    return {key: (modules[key[0]], count / pairs) for key, count in counts.items()}


def graphs_pair(engine: Interpolator, frames: list, height: int, width: int):
    """The route's graphs on device tensors: (the pair's callable, the middle frame it makes)."""
    graphed = engine.cuda_graphs_for(height, width, True)
    a, b, c = (torch.from_numpy(f).to(engine.device).permute(2, 0, 1)[None].float() / 255 for f in frames[:3])
    state = graphed.flow_state(b, c)

    def pair():
        graphed.flow_state(a, b)
        return graphed.synthesize(state, [0.5], (state.flow_fwd, state.flow_bwd), (1.0, 1.0))[0]

    return pair, pair().clone()


def psnr(x: torch.Tensor, y: torch.Tensor) -> float:
    mse = float(((x - y) ** 2).mean())
    return 99.0 if mse == 0 else 10 * math.log10(1 / mse)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    add_flags(parser, only=("device",), defaults={"device": "cuda"})
    parser.add_argument("--size", default="1080x1920")
    parser.add_argument("--pairs", type=int, default=6)
    args = parser.parse_args()
    height, width = (int(v) for v in args.size.split("x"))
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device)
    frames = texture_frames(args.pairs + 2, height, width)
    result = {}
    for name, weights in (("default", DEFAULT_WEIGHTS), ("fast", FAST_WEIGHTS)):
        options = InterpolatorOptions(weights=str(weights), device=args.device)
        eager = Interpolator(dataclasses.replace(options, cuda_graphs=False))
        census = conv_census(eager, frames, args.pairs)
        rows = []
        with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            for (module_name, shape), (module, per_pair) in sorted(census.items()):
                x = torch.rand(shape, device=device)
                plain_ms = median_ms(functools.partial(module, x), device, 30)
                padded_ms = median_ms(functools.partial(PaddedConv(module), x), device, 30)
                rows.append({"conv": module_name, "input": list(shape), "in": module.in_channels,
                             "out": module.out_channels, "stride": module.stride[0], "per_pair": per_pair,
                             "ms": plain_ms, "padded_ms": padded_ms})
        rows.sort(key=lambda r: -r["ms"] * r["per_pair"])
        total = sum(r["ms"] * r["per_pair"] for r in rows)
        print(f"{name}: convolutions {total:.2f} ms per pair alone; the costliest:")
        for r in rows[:12]:
            print(f"  {r['conv']:32s} {r['in']:4d}->{r['out']:<4d} s{r['stride']} {str(r['input'][2:]):14s} "
                  f"x{r['per_pair']:.1f}: {r['ms']:.3f} ms, padded {r['padded_ms']:.3f}")
        net_result = {"convs": rows, "convs_ms_per_pair": total}
        if device.type == "cuda":
            shipped = Interpolator(options, network=eager.network)
            pair, reference = graphs_pair(shipped, frames, height, width)
            variants = {"shipped": median_ms(pair, device, 40)}
            for parts in [[p] for p in PARTS] + [list(PARTS), ["hidden"], ["channels_last"],
                                                  ["hidden", "channels_last"], list(PARTS) + ["channels_last"]]:
                net = copy.deepcopy(eager.network)
                for part in parts:
                    if part == "channels_last":
                        channels_last_stacks(net)
                    elif part == "hidden":
                        pad_hidden_channels(net)
                    else:
                        pad_channels(getattr(net, part))
                padded_pair, frame = graphs_pair(Interpolator(options, network=net), frames, height, width)
                key = "+".join(parts)
                variants[key] = median_ms(padded_pair, device, 40)
                variants[key + " psnr"] = psnr(frame, reference)
                # the shipped graphs again, so that drift between variants shows
                variants[f"shipped after {key}"] = median_ms(pair, device, 40)
                del net, padded_pair
                torch.cuda.empty_cache()
            net_result["graphs_ms"] = variants
            print(f"{name}: route graphs per pair", json.dumps(variants, indent=1))
        result[name] = net_result
    (args.out / "probe_convs.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
