"""Worker: count the words that `split` produced (inputs/split/words.txt) into counts.json."""
import collections
import json
from pathlib import Path

words = Path("inputs/split/words.txt").read_text(encoding="utf-8").split()
counts = collections.Counter(words)
with open("counts.json", "w", encoding="utf-8") as out:
    json.dump(dict(sorted(counts.items())), out, indent=1)
print("all tests pass")  # a claim; only the gate's exit code counts
