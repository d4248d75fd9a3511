"""Naive gate's pinned tests (run by `python -m pytest` on this file, or laid over a copy of the
judged tree)."""
import os
import sys

sys.path.insert(0, os.getcwd())
from median import median  # noqa: E402


def test_odd():
    assert median([3, 1, 2]) == 2


def test_even():
    assert median([1, 2, 3, 4]) == 2.5


def test_one():
    assert median([7]) == 7
