"""The training library: recipes (config), flags (options), the trainer, data, losses, schedule, validation.

``train.py`` is its command line; ``python -m training.stage|unpack|export|average|linearity|holdout`` are its tools.
"""
