"""The gate of `fix`: calc.add must add (on the judged copy; the worker never sees this file)."""

import importlib.util
import sys

spec = importlib.util.spec_from_file_location("calc", "calc.py")
if spec is None or spec.loader is None:
    sys.exit("no calc.py in the workspace")
calc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(calc)
cases = [(2, 3, 5), (-1, 1, 0), (10, 0, 10)]
bad = [(a, b, calc.add(a, b)) for a, b, want in cases if calc.add(a, b) != want]
sys.exit(f"add is wrong for {bad}" if bad else 0)
