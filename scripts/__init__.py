"""Device scripts, diagnostics and plots: run from the repository root (python -m scripts.diagnose.validation)."""
