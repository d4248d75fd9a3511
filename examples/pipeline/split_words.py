"""Worker: write words.txt, one lower-case word per line, from the text named on the command line."""
import re
import sys
from pathlib import Path

text = Path(sys.argv[1]).read_text(encoding="utf-8")
words = re.findall(r"[a-z]+", text.lower())
with open("words.txt", "w", encoding="utf-8") as out:
    out.write("\n".join(words) + "\n")
print(f"done: {len(words)} words")  # a claim: recorded in the ledger, never trusted
