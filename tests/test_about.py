"""The licence terms, stated once (engine/about.py) and shown where users meet the weights: the shipped files'
metadata, ``run.py --version`` and ``--help``."""

import hashlib
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from softsplat_vfi.engine.about import CODE_LICENCE, LICENCE_KEY, WEIGHTS_TERMS, __version__

ROOT = Path(__file__).resolve().parent.parent
# sha256 (first 16 digits) of each shipped file's tensor bytes (everything after the header), taken before the terms
# were added to the header: adding them left every tensor bitwise as it was
TENSOR_DIGESTS = {"network": "13e8061f78c7e84d", "fast": "427c1b5c6d54d344"}


@pytest.mark.parametrize("name", sorted(TENSOR_DIGESTS))
def test_the_shipped_weights_carry_the_terms_in_their_metadata(name):
    from softsplat_vfi.model.weights import read_metadata

    assert read_metadata(ROOT / "softsplat_vfi" / "weights" / f"{name}.safetensors")[LICENCE_KEY] == WEIGHTS_TERMS


@pytest.mark.parametrize("name", sorted(TENSOR_DIGESTS))
def test_the_terms_left_the_tensors_bitwise_as_they_were(name):
    raw = (ROOT / "softsplat_vfi" / "weights" / f"{name}.safetensors").read_bytes()
    header = struct.unpack("<Q", raw[:8])[0]
    assert hashlib.sha256(raw[8 + header:]).hexdigest()[:16] == TENSOR_DIGESTS[name]


def test_the_terms_say_non_commercial_and_name_the_sources():
    assert "non-commercial research use only" in WEIGHTS_TERMS
    assert "weights/README.md" in WEIGHTS_TERMS
    readme = (ROOT / "softsplat_vfi" / "weights" / "README.md").read_text()
    assert "non-commercial research use only" in readme
    assert "MIT" in CODE_LICENCE and (ROOT / "LICENSE").read_text().startswith("MIT License")


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], capture_output=True, text=True, cwd=ROOT)


def test_version_prints_the_version_and_both_licences_on_stdout():
    proc = _cli("--version")
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.splitlines() == [f"softsplat-vfi {__version__}", CODE_LICENCE, WEIGHTS_TERMS]


def test_help_ends_with_the_terms():
    proc = _cli("--help")
    assert proc.returncode == 0
    folded = " ".join(proc.stdout.split())
    assert folded.endswith(f"Licence: {CODE_LICENCE} {WEIGHTS_TERMS}")
    assert "--version" in proc.stdout
