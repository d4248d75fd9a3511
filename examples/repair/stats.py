"""Worker: the mean of the values in inputs/fetch/data.csv, written to mean.txt."""
from pathlib import Path

lines = Path("inputs/fetch/data.csv").read_text(encoding="utf-8").splitlines()[2:]
values = [float(line.split(",")[1]) for line in lines if line]
with open("mean.txt", "w", encoding="utf-8") as out:
    out.write(f"{sum(values) / len(values):.6f}\n")
print("mean computed, looks right to me")  # a claim, never read by control flow
