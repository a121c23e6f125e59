"""Small building blocks shared by the flow and synthesis networks."""

from __future__ import annotations

from torch import nn


def conv(c_in: int, c_out: int, stride: int = 1, act: bool = True) -> nn.Sequential:
    layers = [nn.Conv2d(c_in, c_out, 3, stride, 1)]
    if act:
        layers.append(nn.LeakyReLU(0.1, inplace=False))
    return nn.Sequential(*layers)
