"""The README's Python block runs as written, top to bottom, on a CPU-only machine (issue 67: ``device="cuda"``
failed there, a rebound ``flow`` broke the two softsplat lines after it).

The block is kept in tests/data/readme_python.py, and README.md's first ```python block must be the same text;
the block is run from a folder holding the repository's images (cropped), with CUDA hidden."""

import os
import re
import subprocess
import sys
from pathlib import Path

import cv2

ROOT = Path(__file__).resolve().parent.parent
BLOCK = ROOT / "tests" / "data" / "readme_python.py"


def _readme_block() -> str:
    found = re.search(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert found, "README.md has no ```python block"
    return found.group(1)


def _run(code: str, folder: Path) -> subprocess.CompletedProcess:
    # the repository's images, cropped: the same code, a twentieth of the pixels to keep the test short
    (folder / "images").mkdir()
    for name in ("one.png", "two.png"):
        cv2.imwrite(str(folder / "images" / name), cv2.imread(str(ROOT / "images" / name))[96:160, 144:240])
    (folder / "block.py").write_text(code)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(ROOT))
    # (the weights are found from the package, the images from the current folder, as in a clone)
    return subprocess.run([sys.executable, "block.py"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_readme_python_block_runs_on_the_cpu(tmp_path):
    proc = _run(BLOCK.read_text(), tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "mid.png").is_file()


def test_the_readme_shows_the_block_that_is_tested():
    assert _readme_block() == BLOCK.read_text()
