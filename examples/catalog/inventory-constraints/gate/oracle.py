import csv
import io
import json
import re
import sys
from datetime import date
from pathlib import Path

WS = Path(sys.argv[1])


def text(name):
    return (WS / name).read_text(encoding="utf-8")


def verdict(ok):
    sys.exit(0 if ok else 1)

rows = list(csv.reader(io.StringIO(text("inventory.csv"))))
ok = len(rows) >= 2 and rows[0] == ["sku", "name", "qty", "price"]
skus = [r[0] for r in rows[1:] if r]
ok = ok and len(set(skus)) == len(skus)
for r in rows[1:]:
    ok = ok and len(r) == 4 and re.fullmatch(r"[A-Z]-\d{3}", r[0]) is not None and r[1].strip() != ""
    ok = ok and re.fullmatch(r"\d+", r[2] or "x") is not None and 0 <= int(r[2] or 0) <= 1000
    ok = ok and re.fullmatch(r"\d+\.\d{2}", r[3] or "x") is not None and float(r[3]) > 0
verdict(ok)
