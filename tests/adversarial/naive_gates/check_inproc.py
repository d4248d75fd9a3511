"""Naive gate, in-process style (as examples/median's): import the candidate, compare."""
import sys

sys.path.insert(0, ".")  # the judged copy is the working directory
try:
    from median import median
except Exception:
    sys.exit(2)
CASES = [([3, 1, 2], 2), ([1, 2, 3, 4], 2.5), ([7], 7), ([5, 1], 3.0)]
ok = all(median(list(xs)) == want for xs, want in CASES)
print("median:", "ok" if ok else "wrong")
sys.exit(0 if ok else 1)
