"""Training: footage and synthetic data on the GPU, losses, schedule (used by train.py)."""
