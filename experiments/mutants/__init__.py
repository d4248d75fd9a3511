"""The mutants study: `python -m experiments.mutants` runs it (see study.py)."""
