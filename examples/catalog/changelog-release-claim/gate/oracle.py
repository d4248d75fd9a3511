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

md = text("CHANGELOG.md")
entries = re.split(r"(?m)^## ", md)
previous = "[1.3.2] - 2026-10-15\n\n### Fixed\n- Ledger replay truncates a torn final line.\n"
ok = md.startswith("# Changelog\n") and len(entries) == 3 and entries[2] == previous
if ok:
    head, _, body = entries[1].partition("\n")
    m = re.fullmatch(r"\[1\.4\.0\] - (\d{4}-\d{2}-\d{2})", head.strip())
    try:
        day = date.fromisoformat(m.group(1)) if m else None
    except ValueError:
        day = None
    ok = day is not None and date(2026, 10, 15) <= day <= date(2026, 11, 30)
    kinds = re.findall(r"(?m)^### (.*)$", body)
    blocks = re.split(r"(?m)^### .*$", body)[1:]
    ok = ok and bool(kinds) and all(k in ("Added", "Changed", "Fixed", "Removed", "Security") for k in kinds)
    ok = ok and all(re.search(r"(?m)^- \S.{10,}$", b) for b in blocks)
verdict(ok)
