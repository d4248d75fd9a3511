"""The reference solution: the median of a non-empty list of numbers; as a program, the median
of the JSON list on stdin, printed as JSON."""
import json
import sys


def median(xs):
    s = sorted(xs)
    half, odd = divmod(len(s), 2)
    return s[half] if odd else (s[half - 1] + s[half]) / 2


if __name__ == "__main__":
    print(json.dumps(median(json.loads(sys.stdin.read()))))
