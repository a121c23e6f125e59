"""Small building blocks shared by the flow and synthesis networks."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def conv(c_in: int, c_out: int, stride: int = 1, act: bool = True) -> nn.Sequential:
    layers = [nn.Conv2d(c_in, c_out, 3, stride, 1)]
    if act:
        layers.append(nn.LeakyReLU(0.1, inplace=False))
    return nn.Sequential(*layers)


def run_padded(stack: nn.Sequential, x: torch.Tensor, multiple: int = 8) -> torch.Tensor:
    """``stack(x)`` for a stack of ``conv`` blocks, its channels zero-extended to multiples of ``multiple``: the
    input once, each convolution's weights (zero rows and columns, padded on every call: they are small) and the
    output cut back to the last convolution's channels. The same values, where cuDNN runs convolutions of few
    channels that are not multiples of 8 in a slow kernel without tensor cores (F81: the fast network's metric,
    4 -> 12 -> 1 at full resolution). The extra channels between two convolutions meet zero weights in the next
    one, so what the activation makes of them does not matter."""
    out_channels = x.shape[1]  # (the stack's output channels once its last convolution has run)
    extra = -out_channels % multiple
    if extra:
        x = F.pad(x, (0, 0, 0, 0, 0, extra))
    for block in stack:
        conv = block[0]
        out_channels = conv.out_channels
        more_out = -out_channels % multiple
        weight = F.pad(conv.weight, (0, 0, 0, 0, 0, x.shape[1] - conv.in_channels, 0, more_out))
        bias = None if conv.bias is None else F.pad(conv.bias, (0, more_out))
        x = F.conv2d(x, weight, bias, conv.stride, conv.padding, conv.dilation)
        for layer in block[1:]:
            x = layer(x)
    return x[:, :out_channels]
