"""Worker: write median.py, a correct median of a non-empty list of numbers."""
from pathlib import Path

Path("median.py").write_text('''def median(xs):
    """The median of a non-empty list of numbers: the middle value, or the mean of the two."""
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    if n % 2 == 1:
        return s[mid]
    return (s[mid - 1] + s[mid]) / 2
''', encoding="utf-8")
print("median.py written")
