"""The training step's forward with the network's regions between its custom kernels compiled (``train.py
--compile``).

The regions are those ``model.runtime.compiled_regions`` compiles for inference: the encoder, each flow decoder's
warp and head, the splatting metric and the synthesis decoder, and the step's losses beside them. The correlation
and softsplat kernels stay as they are. Unlike inference, the network's parameters and their names must not change
(the optimizer, the moving average and the saved state hold them), so nothing is padded or replaced: each module
region takes a compiled call (``nn.Module._compiled_call_impl``, what ``nn.Module.compile`` sets) only while
``active()`` holds, and validation, the outer flows of quadratic batches and saving run the plain network, at
whatever sizes they need, without compiling for them.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Callable, Iterator, List, Tuple

import torch
from torch import nn


class CompiledRegions:
    """Compiled calls for a network's regions, switched on for the training step alone (``active``).

    Each region compiles on its first step, for the step's fixed shapes (``dynamic=False``); Dynamo's limit on
    variants of one code object is raised, since the flow decoders' regions run once per pyramid level."""

    def __init__(self, net: nn.Module, backend: str = "inductor") -> None:
        """``backend``: torch.compile's (``"eager"`` traces without generating code: the CPU tests' way)."""
        config = torch._dynamo.config
        config.recompile_limit = max(config.recompile_limit, 256)
        self.compile = functools.partial(torch.compile, dynamic=False, backend=backend)
        self.modules: List[Tuple[nn.Module, Callable]] = [
            (module, self.compile(module._call_impl)) for module in (net.encoder, net.metric, net.decoder)]
        self.methods: List[Tuple[nn.Module, str, Callable]] = [
            (decoder, name, self.compile(getattr(decoder, name)))
            for decoder in net.flow.decoders for name in ("warp", "head")]

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        for module, call in self.modules:
            module._compiled_call_impl = call
        for owner, name, call in self.methods:
            owner.__dict__[name] = call
        try:
            yield
        finally:
            for module, _ in self.modules:
                module._compiled_call_impl = None
            for owner, name, _ in self.methods:
                owner.__dict__.pop(name, None)
