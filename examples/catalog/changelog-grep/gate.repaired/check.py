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
top = re.split(r"(?m)^## ", md)
verdict(len(top) >= 3 and top[1].startswith("[1.4.0]") and re.search(r"(?m)^- \S", top[1]) is not None
        and top[2].startswith("[1.3.2]"))
