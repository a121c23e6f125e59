"""Scoring: every quality figure the project publishes, made by the code users run.

``methods`` holds the common call every scorer makes (``Method``: ours as an ``engine.Interpolator`` at the user's
defaults, or a peer) and ``Benchmark``, a protocol's own settings; ``metrics`` the measures (PSNR, SSIM, the detail
kept); ``peers`` the RIFE releases; ``middlebury``, ``xiph``, ``holdout`` and ``patterns`` the sets. The tools are
thin command lines over them: benchmark_middlebury.py, benchmark_xiph.py, ``python -m training.holdout`` and
``python -m bench.patterns``. Importing the package imports nothing.
"""
