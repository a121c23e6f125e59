"""Scoring: every quality figure the project publishes, made by the code users run.

``metrics`` holds the measures (PSNR, SSIM, the detail kept) and ``peers`` the RIFE releases scored beside ours.
Importing the package imports nothing.
"""
