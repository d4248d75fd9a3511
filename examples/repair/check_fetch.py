"""Gate (deliberately weak): accept iff data.csv starts with a row-count header and a column line."""
import sys
from pathlib import Path

try:
    lines = Path("data.csv").read_text(encoding="utf-8").splitlines()
except FileNotFoundError:
    sys.exit(1)
sys.exit(0 if len(lines) >= 2 and lines[0].startswith("# rows=") and lines[1] == "id,value" else 1)
