"""Gate: accept (exit 0) iff words.txt holds exactly the words of the text, in order."""
import re
import sys
from pathlib import Path

try:
    got = Path("words.txt").read_text(encoding="utf-8").split()
except FileNotFoundError:
    print("reject: words.txt is missing")
    sys.exit(1)
want = re.findall(r"[a-z]+", Path(sys.argv[1]).read_text(encoding="utf-8").lower())
if not want:
    print("error: the reference text has no words")
    sys.exit(2)
sys.exit(0 if got == want else 1)
