"""The benchmark modules under bench/: they import, the GPU ones refuse a machine without CUDA with a message and
exit code 2 (instead of a traceback), and the CPU one times a frame."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import List

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
WEIGHTS = ROOT / "softsplat_vfi" / "weights"

GPU_BENCHES = [
    ("bench.bench_network", ["--sizes", "1080p"]),
    ("bench.bench_network", ["--weights", str(WEIGHTS / "network.safetensors"), "--batch", "1", "2", "4",
                             "--profile"]),
    ("bench.compile_check", ["--weights", "unused"]),
    ("bench.bench_softsplat", []),
    ("bench.bench_train", ["--data", "unused"]),
    ("bench.bench_video", ["--flow-scale", "1", "auto"]),
]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
@pytest.mark.parametrize("module, argv", GPU_BENCHES,
                         ids=[f"{name} {' '.join(argv[-3:])}" for name, argv in GPU_BENCHES])
def test_gpu_bench_refuses_without_cuda(module: str, argv: List[str], capsys: pytest.CaptureFixture) -> None:
    bench = importlib.import_module(module)
    assert bench.main(argv) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_cpu_bench_times_a_frame(capsys: pytest.CaptureFixture) -> None:
    from bench import bench_cpu

    weights = str(WEIGHTS / "fast.safetensors")
    assert bench_cpu.main(["--weights", weights, "--sizes", "540p", "--repeats", "1"]) == 0
    line = capsys.readouterr().out.strip()
    match = re.fullmatch(r".*fast\.safetensors 540p: median (\d+\.\d\d) s, fastest (\d+\.\d\d) s "
                         r"\(1 calls, \d+ threads\)", line)
    assert match, line
    assert float(match.group(1)) == float(match.group(2)) > 0  # one call: its median is its time


def test_network_bench_names_bad_arguments_before_the_gpu(capsys: pytest.CaptureFixture) -> None:
    from bench import bench_network

    with pytest.raises(SystemExit):
        bench_network.main(["--batch", "0"])
    assert "give pairs per call as whole numbers of 1 or more" in capsys.readouterr().err
    assert bench_network.main(["--weights", "missing.safetensors", "--batch", "2"]) == 2
    assert "--weights missing.safetensors: no such file" in capsys.readouterr().err
