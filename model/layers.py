"""Small building blocks shared by the flow and synthesis networks."""

from __future__ import annotations

from torch import nn


def conv(c_in: int, c_out: int, stride: int = 1, act: bool = True) -> nn.Sequential:
    layers = [nn.Conv2d(c_in, c_out, 3, stride, 1)]
    if act:
        layers.append(nn.LeakyReLU(0.1, inplace=False))
    return nn.Sequential(*layers)


def zero_last_conv(module: nn.Module) -> None:
    """Zero the weights and bias of the last convolution in ``module``: a residual branch that starts at 0."""
    last = [m for m in module.modules() if isinstance(m, nn.Conv2d)][-1]
    nn.init.zeros_(last.weight)
    nn.init.zeros_(last.bias)
