"""The transition study: `python -m experiments.transition` runs it (see study.py)."""
