"""The published SoftSplat network (Niklaus & Liu, CVPR 2020), for its released checkpoints.

Users who already have ``network-lf.pytorch`` or ``network-l1.pytorch`` on disk can load
them with ``model.weights.load_published(path)`` (or ``run.py --weights PATH``). This module only
reproduces that architecture so its keys and shapes match; module attribute names
follow the checkpoint (``netFlow.netExtractor.netFirst.0.weight``, the GridNet's
``'0x0 - 1x0'``), which is why they break this project's naming rules.
The expected keys and shapes are committed in ``published_keys.json`` beside this file.

Conventions at the boundary are this project's: RGB in [0, 1]. The published net
works in BGR on inputs normalised by their joint mean and standard deviation,
so ``forward`` flips and normalises internally.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .. import softsplat

from .correlation import correlation
from .network import AUTO, FlowScale
from .warp import InputPadder, backwarp


def _lrelu() -> nn.LeakyReLU:
    return nn.LeakyReLU(negative_slope=0.1, inplace=False)


def _resize_flow(flow: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    # the published code scales both components by the width ratio
    return F.interpolate(flow, size=size, mode="bilinear", align_corners=False) * (size[1] / flow.shape[3])


class _FlowDecoder(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        widths = [channels, 128, 128, 96, 64, 32]
        layers: List[nn.Module] = []
        for c_in, c_out in zip(widths[:-1], widths[1:]):
            layers += [nn.Conv2d(c_in, c_out, 3, 1, 1), _lrelu()]
        layers.append(nn.Conv2d(32, 2, 3, 1, 1))
        self.netMain = nn.Sequential(*layers)

    def forward(self, one: torch.Tensor, two: torch.Tensor, previous: Optional[torch.Tensor]) -> torch.Tensor:
        if previous is None:
            return self.netMain(torch.cat([one, correlation(one, two, 4)], 1))
        flow = _resize_flow(previous, one.shape[2:])
        volume = correlation(one, backwarp(two, flow), 4)
        return self.netMain(torch.cat([one, volume, flow], 1))


class _FlowExtractor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        names = ("netFirst", "netSecond", "netThird", "netFourth", "netFifth", "netSixth")
        widths = (3, 16, 32, 64, 96, 128, 192)
        for name, c_in, c_out in zip(names, widths[:-1], widths[1:]):
            self.add_module(name, nn.Sequential(nn.Conv2d(c_in, c_out, 3, 2, 1), _lrelu(),
                                                nn.Conv2d(c_out, c_out, 3, 1, 1), _lrelu()))
        self.names = names

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        feats = []
        for name in self.names:
            x = getattr(self, name)(x)
            feats.append(x)
        return feats


class PublishedFlow(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.netExtractor = _FlowExtractor()
        for name, width in zip(self.netExtractor.names, (16, 32, 64, 96, 128, 192)):
            self.add_module(name, _FlowDecoder(width + 81 + (2 if name != "netSixth" else 0)))

    def forward(self, one: torch.Tensor, two: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        size = one.shape[2:]
        feats_one, feats_two = self.netExtractor(one), self.netExtractor(two)
        fwd = bwd = None
        for level in range(5, -1, -1):
            decoder = getattr(self, self.netExtractor.names[level])
            fwd = decoder(feats_one[level], feats_two[level], fwd)
            bwd = decoder(feats_two[level], feats_one[level], bwd)
        return _resize_flow(fwd, size), _resize_flow(bwd, size)


class _Basic(nn.Module):
    """Residual block: 'relu-conv-relu-conv' (pre-activation) or 'conv-relu-conv'."""

    def __init__(self, kind: str, channels: Sequence[int], skip: bool = True) -> None:
        super().__init__()
        a, b, c = channels
        layers: List[nn.Module] = [nn.PReLU(a, 0.25)] if kind == "relu-conv-relu-conv" else []
        layers += [nn.Conv2d(a, b, 3, 1, 1, bias=False), nn.PReLU(b, 0.25), nn.Conv2d(b, c, 3, 1, 1, bias=False)]
        self.netMain = nn.Sequential(*layers)
        self.skip = skip
        self.netShortcut = nn.Conv2d(a, c, 1, 1, 0, bias=False) if skip and a != c else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.netMain(x)
        if not self.skip:
            return out
        return out + (x if self.netShortcut is None else self.netShortcut(x))


class _Down(nn.Module):
    def __init__(self, channels: Sequence[int]) -> None:
        super().__init__()
        a, b, c = channels
        self.netMain = nn.Sequential(nn.PReLU(a, 0.25), nn.Conv2d(a, b, 3, 2, 1, bias=False),
                                     nn.PReLU(b, 0.25), nn.Conv2d(b, c, 3, 1, 1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.netMain(x)


class _Up(nn.Module):
    def __init__(self, channels: Sequence[int]) -> None:
        super().__init__()
        a, b, c = channels
        self.netMain = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                                     nn.PReLU(a, 0.25), nn.Conv2d(a, b, 3, 1, 1, bias=False),
                                     nn.PReLU(b, 0.25), nn.Conv2d(b, c, 3, 1, 1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.netMain(x)


def _crop_to(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return x[:, :, :like.shape[2], :like.shape[3]]


def _grid_key(row_a: int, col_a: int, row_b: int, col_b: int) -> str:
    return f"{row_a}x{col_a} - {row_b}x{col_b}"


class _Encode(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        def block(c_in: int, c_out: int, stride: int) -> nn.Sequential:
            return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.PReLU(c_out, 0.25),
                                 nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.PReLU(c_out, 0.25))
        self.netOne = block(3, 32, 1)
        self.netTwo = block(32, 64, 2)
        self.netThr = block(64, 96, 2)

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        one = self.netOne(x)
        two = self.netTwo(one)
        return [torch.cat([x, one], 1), two, self.netThr(two)]


class _Softmetric(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.netInput = nn.Conv2d(3, 12, 3, 1, 1, bias=False)
        self.netError = nn.Conv2d(1, 4, 3, 1, 1, bias=False)
        widths = (16, 32, 64, 96)
        for row, width in enumerate(widths):
            self.add_module(_grid_key(row, 0, row, 1), _Basic("relu-conv-relu-conv", [width] * 3))
        for row in range(3):
            self.add_module(_grid_key(row, 0, row + 1, 0), _Down([widths[row], widths[row + 1], widths[row + 1]]))
            self.add_module(_grid_key(row + 1, 1, row, 1), _Up([widths[row + 1], widths[row], widths[row]]))
        self.netOutput = _Basic("conv-relu-conv", [16, 16, 1])

    def forward(self, enc_one: List[torch.Tensor], enc_two: List[torch.Tensor], flow: torch.Tensor) -> torch.Tensor:
        error = (enc_one[0] - backwarp(enc_two[0], flow)).abs().mean(1, keepdim=True)
        col = [torch.cat([self.netInput(enc_one[0][:, :3]), self.netError(error)], 1)]
        for row in range(3):
            col.append(self._modules[_grid_key(row, 0, row + 1, 0)](col[-1]))
        for row in range(3, -1, -1):
            col[row] = self._modules[_grid_key(row, 0, row, 1)](col[row])
            if row != 3:
                col[row] = col[row] + _crop_to(self._modules[_grid_key(row + 1, 1, row, 1)](col[row + 1]), col[row])
        return self.netOutput(col[0])


class _Warp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.netOne = _Basic("conv-relu-conv", [3 + 3 + 32 + 32 + 1 + 1, 32, 32])
        self.netTwo = _Basic("conv-relu-conv", [64 + 64 + 1 + 1, 64, 64])
        self.netThr = _Basic("conv-relu-conv", [96 + 96 + 1 + 1, 96, 96])

    def forward(self, enc_one: List[torch.Tensor], enc_two: List[torch.Tensor], metric_one: torch.Tensor,
                metric_two: torch.Tensor, fwd: torch.Tensor, bwd: torch.Tensor) -> List[torch.Tensor]:
        out = []
        for level, net in enumerate((self.netOne, self.netTwo, self.netThr)):
            if level:
                size = enc_one[level].shape[2:]
                metric_one = F.interpolate(metric_one, size=size, mode="bilinear", align_corners=False)
                metric_two = F.interpolate(metric_two, size=size, mode="bilinear", align_corners=False)
                fwd = _resize_flow(fwd, size)
                bwd = _resize_flow(bwd, size)
            out.append(net(torch.cat([
                softsplat.splat(torch.cat([enc_one[level], metric_one], 1), fwd,
                                metric_one.neg().clip(-20, 20), "soft"),
                softsplat.splat(torch.cat([enc_two[level], metric_two], 1), bwd,
                                metric_two.neg().clip(-20, 20), "soft"),
            ], 1)))
        return out


class PublishedSynthesis(nn.Module):
    WIDTHS = (32, 64, 96)

    def __init__(self) -> None:
        super().__init__()
        self.netEncode = _Encode()
        self.netSoftmetric = _Softmetric()
        self.netWarp = _Warp()
        for row, width in enumerate(self.WIDTHS):
            for col in range(5):
                self.add_module(_grid_key(row, col, row, col + 1), _Basic("relu-conv-relu-conv", [width] * 3))
        for col in (0, 1, 2):
            self.add_module(_grid_key(0, col, 1, col), _Down([32, 64, 64]))
            self.add_module(_grid_key(1, col, 2, col), _Down([64, 96, 96]))
        for col in (3, 4, 5):
            self.add_module(_grid_key(2, col, 1, col), _Up([96, 64, 64]))
            self.add_module(_grid_key(1, col, 0, col), _Up([64, 32, 32]))
        self.netOutput = _Basic("conv-relu-conv", [32, 32, 3])

    def forward(self, one: torch.Tensor, two: torch.Tensor, fwd: torch.Tensor, bwd: torch.Tensor,
                t: float) -> torch.Tensor:
        enc_one, enc_two = self.netEncode(one), self.netEncode(two)
        metric_one = self.netSoftmetric(enc_one, enc_two, fwd) * 2.0 * t
        metric_two = self.netSoftmetric(enc_two, enc_one, bwd) * 2.0 * (1.0 - t)
        col = self.netWarp(enc_one, enc_two, metric_one, metric_two, fwd * t, bwd * (1.0 - t))
        m = self._modules
        col[1] = col[1] + m[_grid_key(0, 0, 1, 0)](col[0])
        col[2] = col[2] + m[_grid_key(1, 0, 2, 0)](col[1])
        for c in (1, 2):  # columns that also go down the grid
            for row in range(3):
                col[row] = m[_grid_key(row, c - 1, row, c)](col[row])
                if row:
                    col[row] = col[row] + m[_grid_key(row - 1, c, row, c)](col[row - 1])
        for c in (3, 4, 5):  # columns that go up
            for row in range(2, -1, -1):
                col[row] = m[_grid_key(row, c - 1, row, c)](col[row])
                if row != 2:
                    col[row] = col[row] + _crop_to(m[_grid_key(row + 1, c, row, c)](col[row + 1]), col[row])
        return self.netOutput(col[0])


class PublishedNetwork(nn.Module):
    """``PublishedNetwork()(one, two, times)`` with RGB [0, 1] frames, like ``model.Network``
    (``model.interface.InterpolationNetwork``): whole pairs and tiles only, in float32 by default."""

    flow_alpha = False
    quadratic_paths = False
    cuda_graphs = False
    tiles = True
    bf16_autocast = False
    passes = 1

    @property
    def base(self) -> "PublishedNetwork":
        """The network each pass runs: itself."""
        return self

    def __init__(self) -> None:
        super().__init__()
        self.netFlow = PublishedFlow()
        self.netSynthesis = PublishedSynthesis()

    def forward(self, one: torch.Tensor, two: torch.Tensor, times: Sequence[float] = (0.5,),
                flow_scale: FlowScale = 1.0) -> List[torch.Tensor]:
        if flow_scale not in (1.0, AUTO):  # auto: its flow has one scale, the full one
            raise ValueError("the published network has no flow scale: use flow_scale 1.0")
        padder = InputPadder(one.shape, 2)
        a, b = padder.pad(one.flip(1), two.flip(1))  # RGB -> BGR
        mean = (a.mean([1, 2, 3], True) + b.mean([1, 2, 3], True)) / 2
        var = sum(x.var([1, 2, 3], unbiased=False, keepdim=True) + (mean - x.mean([1, 2, 3], True)) ** 2
                  for x in (a, b)) / 2
        std = var.sqrt()
        a, b = (a - mean) / (std + 1e-7), (b - mean) / (std + 1e-7)
        fwd, bwd = self.netFlow(a, b)
        outs = [self.netSynthesis(a, b, fwd, bwd, float(t)) * std + mean for t in times]
        return [padder.unpad(o).flip(1) for o in outs]


def expected_keys() -> Dict[str, List[int]]:
    """Key -> shape of the published architecture as built here (compare with published_keys.json)."""
    return {k: list(v.shape) for k, v in PublishedNetwork().state_dict().items()}
