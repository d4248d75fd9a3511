"""Gate: reject unless the data has as many rows as its header promises and mean.txt is their mean."""
import sys
from pathlib import Path

lines = Path("inputs/fetch/data.csv").read_text(encoding="utf-8").splitlines()
promised = int(lines[0].split("=", 1)[1])
values = [float(line.split(",")[1]) for line in lines[2:] if line]
if len(values) != promised:
    print(f"reject: {len(values)} rows, header promises {promised}")
    sys.exit(1)
try:
    got = float(Path("mean.txt").read_text(encoding="utf-8"))
except (FileNotFoundError, ValueError):
    sys.exit(1)
sys.exit(0 if abs(got - sum(values) / len(values)) < 1e-6 else 1)
