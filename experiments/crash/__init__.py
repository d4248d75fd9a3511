"""The crash study: `python -m experiments.crash` runs it (see study.py)."""
