"""The bounds study: `python -m experiments.bounds` runs it (see study.py)."""
