"""The integrity study: `python -m experiments.integrity` runs it (see study.py)."""
