"""Gate: accept iff counts.json equals a fresh count of inputs/split/words.txt and is not empty."""
import collections
import json
import sys
from pathlib import Path

try:
    got = json.loads(Path("counts.json").read_text(encoding="utf-8"))
except (FileNotFoundError, ValueError) as exc:
    print(f"reject: {exc}")
    sys.exit(1)
want = collections.Counter(Path("inputs/split/words.txt").read_text(encoding="utf-8").split())
sys.exit(0 if want and got == dict(want) else 1)
