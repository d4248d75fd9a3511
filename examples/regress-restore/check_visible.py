"""Visible suite (the admission gate whose trace the worker sees): encode('abc') == 'efg'."""
import os
import sys

sys.path.insert(0, os.getcwd())
from caesar import encode  # noqa: E402

got = encode("abc")
print(f"encode('abc') = {got!r}, expected 'efg'")
sys.exit(0 if got == "efg" else 1)
