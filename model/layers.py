"""Small building blocks shared by the flow and synthesis networks."""

from __future__ import annotations

import torch
from torch import nn


def conv(c_in: int, c_out: int, stride: int = 1, act: bool = True) -> nn.Sequential:
    layers = [nn.Conv2d(c_in, c_out, 3, stride, 1)]
    if act:
        layers.append(nn.LeakyReLU(0.1, inplace=False))
    return nn.Sequential(*layers)


class ConvStack(nn.Sequential):
    """``conv`` blocks run one after another (the same modules and state-dict keys as an ``nn.Sequential``).

    Tensors pass between the network's parts in NCHW, the layout of the splatting and cost-volume kernels. When the
    convolutions' weights are channels-last (``to_channels_last``), the stack takes its input into channels-last
    once and gives its output back in NCHW, instead of cuDNN transposing to and from NHWC around every convolution
    (its bf16 tensor-core kernels work in NHWC)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self[0][0].weight.is_contiguous(memory_format=torch.channels_last):
            return super().forward(x)
        return super().forward(x.contiguous(memory_format=torch.channels_last)).contiguous()


def to_channels_last(net: nn.Module) -> nn.Module:
    """``net`` with the weights of its ``ConvStack`` convolutions in channels-last (in place; returned)."""
    for module in net.modules():
        if isinstance(module, ConvStack):
            module.to(memory_format=torch.channels_last)
    return net
