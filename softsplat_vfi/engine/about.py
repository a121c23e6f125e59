"""The project's version and licence terms, stated once; imports nothing, so ``run.py --help`` stays fast.

Everything a user meets shows ``WEIGHTS_TERMS`` from here: ``run.py --help`` and ``--version``, the ComfyUI nodes'
descriptions, and the shipped weights files' metadata (key ``LICENCE_KEY``; tests/test_about.py checks that the
files hold this very text).
"""

from __future__ import annotations

__version__ = "0.1.0"

CODE_LICENCE = "The code is under the MIT licence (LICENSE); it does not cover the trained weights."

# why: weights/README.md "Licence" and the data READMEs (DAVIS, Cityscapes, UAV123/UAVDT/DTB70, CC BY-NC 4.0,
# S-Lab License 1.0, film and TV excerpts, ...)
WEIGHTS_TERMS = ("The trained weights (weights/network.safetensors, weights/fast.safetensors) are for "
                 "non-commercial research use only: much of the footage they were trained on is under research or "
                 "non-commercial terms (DAVIS, Cityscapes, UAV123, UAVDT, DTB70, CC BY-NC 4.0, S-Lab License 1.0, "
                 "film and TV excerpts; weights/README.md lists them).")

# the metadata key of a weights file that holds its terms
LICENCE_KEY = "licence"


def version_text() -> str:
    """What ``run.py --version`` prints: the version, then the code's licence and the weights' terms."""
    return f"softsplat-vfi {__version__}\n{CODE_LICENCE}\n{WEIGHTS_TERMS}"
