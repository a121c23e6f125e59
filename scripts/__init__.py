"""Remote-GPU training scripts (remote/) and diagnostics of trained weights (python -m scripts.diagnose.NAME)."""
