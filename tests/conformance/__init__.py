"""Conformance cases for state-bound evidence, typed actions, the checkpoint and recertification.
`cases.py` holds them; `engine.conformance` and `test_conformance.py` both run them from there."""
