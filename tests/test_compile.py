"""``torch.compile`` of the whole network gives the eager network's frames on the CPU (issue 64).

Before softsplat ran its CPU accumulation outside the graph (``softsplat._index_add_eager``), Inductor's code for
it wrote out of bounds on several threads (pytorch/pytorch#191837) and the process aborted with heap corruption,
so the comparison runs in a child process: a crash fails the test instead of ending pytest. Compiling the whole
network takes minutes on a small CPU (about 10 on two shared cores; seconds once Inductor's cache holds it).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WEIGHTS = ROOT / "weights" / "network.safetensors"
MATCH_PSNR = 40.0  # dB, bench/bench_network.py's rule for a compiled network that makes the eager frames

CHILD = r"""
import json, math, sys
import torch
from model import load_weights

torch.set_num_threads(2)  # the bad code runs only on several threads
net = load_weights(sys.argv[1], "cpu")
g = torch.Generator().manual_seed(0)
one, two = torch.rand(1, 3, 128, 192, generator=g), torch.rand(1, 3, 128, 192, generator=g)
with torch.no_grad():
    eager = net(one, two, [0.5])[0]
    compiled = torch.compile(net, dynamic=False)(one, two, [0.5])[0]
mse = (compiled.clamp(0, 1) - eager.clamp(0, 1)).pow(2).mean().item()
print(json.dumps({"psnr": -10 * math.log10(max(mse, 1e-20))}))
"""


@pytest.mark.slow
def test_whole_network_compiled_matches_eager() -> None:
    if not WEIGHTS.exists():
        pytest.skip(f"{WEIGHTS} is missing")
    done = subprocess.run([sys.executable, "-c", CHILD, str(WEIGHTS)], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, f"compiled network failed (code {done.returncode}): {done.stderr[-2000:]}"
    psnr = json.loads(done.stdout.strip().splitlines()[-1])["psnr"]
    assert psnr >= MATCH_PSNR, f"compiled frames {psnr:.1f} dB from eager"
