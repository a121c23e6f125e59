"""Diagnostics of trained weights and training logs (python -m scripts.diagnose.NAME)."""
