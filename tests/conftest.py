"""Shared fixtures. The repository root is on sys.path through pytest.ini's ``pythonpath = .``."""

import os
from pathlib import Path
from typing import List, Sequence

if os.environ.get("PYTEST_XDIST_WORKER"):
    # one thread per worker and per process a test starts, set before torch starts its thread pool: the workers
    # already fill the cores (docs/performance.md, Test suite)
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, "1")

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cpu_network():
    """The committed weights on the CPU (loaded once for the session; read-only use)."""
    from softsplat_vfi.engine.interpolator import load_network
    from softsplat_vfi.engine.options import DEFAULT_WEIGHTS

    return load_network(DEFAULT_WEIGHTS, torch.device("cpu"))


@pytest.fixture(scope="session")
def cpu_interpolator(cpu_network):
    """``engine.Interpolator`` with the committed weights on the CPU, whole frames, default options otherwise."""
    from softsplat_vfi.engine import Interpolator, InterpolatorOptions

    return Interpolator(InterpolatorOptions(device="cpu", tile=0), network=cpu_network)


class BlendInterpolator:
    """A stand-in for the engine where the network is not the point: integer frames (3 or 4 channels) mixed
    linearly in time, the same way the pipeline's ``FrameInterpolator`` interface asks of the engine. Records the
    shapes and times it was given."""

    def __init__(self) -> None:
        self.calls: List[tuple] = []

    def interpolate_integer(self, one: np.ndarray, two: np.ndarray, times: Sequence[float]) -> List[np.ndarray]:
        self.calls.append((one.shape, tuple(times)))
        top = np.iinfo(one.dtype).max
        return [np.clip(np.rint((1.0 - t) * one.astype(np.float64) + t * two.astype(np.float64)), 0, top)
                .astype(one.dtype) for t in times]


@pytest.fixture(scope="session")
def footage(tmp_path_factory):
    """A footage folder of three short generated clips (tests/training_fixtures.make_footage), for training tests."""
    from tests.training_fixtures import make_footage

    return make_footage(tmp_path_factory.mktemp("footage"))


@pytest.fixture
def blend_interpolator() -> BlendInterpolator:
    return BlendInterpolator()
