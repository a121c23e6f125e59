"""Fast inference on CUDA: the whole forward pass replayed as one CUDA graph.

At batch 1 the network launches several hundred small kernels per frame, and
the CPU cost of launching them exceeds the GPU work. For a fixed frame size and
set of times (every frame of a video), one captured graph replays them all.
"""

from __future__ import annotations

from typing import List, Sequence

import torch

from .network import Network


class GraphedNetwork:
    """Callable like ``net(one, two)`` for one shape, dtype and list of times."""

    def __init__(self, net: Network, shape: torch.Size, times: Sequence[float], autocast_dtype=None,
                 flow_scale: float = 1.0, warmup: int = 3) -> None:
        device = next(net.parameters()).device
        if device.type != "cuda":
            raise ValueError("GraphedNetwork needs the network on a CUDA device")
        self.net = net
        self.times = [float(t) for t in times]
        self.one = torch.zeros(shape, device=device)
        self.two = torch.zeros(shape, device=device)
        self.one.uniform_()
        self.two.uniform_()
        self.autocast_dtype = autocast_dtype
        self.flow_scale = flow_scale
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(warmup):  # compiles kernels, picks cuDNN algorithms, fills caches
                self._run()
        torch.cuda.current_stream(device).wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph), torch.no_grad():
            self.outputs = self._run()

    def _run(self) -> List[torch.Tensor]:
        with torch.autocast("cuda", dtype=self.autocast_dtype or torch.float32,
                            enabled=self.autocast_dtype is not None):
            return [o.float() for o in self.net(self.one, self.two, self.times, self.flow_scale)]

    def __call__(self, one: torch.Tensor, two: torch.Tensor) -> List[torch.Tensor]:
        if one.shape != self.one.shape or two.shape != self.two.shape:
            raise ValueError(f"this graph was captured for {tuple(self.one.shape)}, got {tuple(one.shape)}")
        self.one.copy_(one)
        self.two.copy_(two)
        self.graph.replay()
        return [o.clone() for o in self.outputs]


def compile_network(net: Network, mode: str = "reduce-overhead") -> Network:
    """``torch.compile`` of the network for many calls at one frame size (video).

    Inductor fuses the small elementwise kernels between the convolutions, and ``reduce-overhead``
    replays them as CUDA graphs. The first pair compiles (a minute or two); a new frame size or
    list of times compiles again. Measured on an H200 at 1080p in bf16: 7.4-8.4 ms across sessions against
    10.6-11.2 ms for the eager network replayed as one CUDA graph (docs/performance.md).
    """
    device = next(net.parameters()).device
    if device.type != "cuda":
        raise ValueError("--compile needs the network on a CUDA device (use --device cuda)")
    return torch.compile(net, mode=mode, dynamic=False)
