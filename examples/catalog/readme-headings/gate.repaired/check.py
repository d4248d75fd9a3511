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

def sections(md):
    out, current = {}, None
    for line in md.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            out[current] = []
        elif current is not None and line.strip():
            out[current].append(line)
    return out

s = sections(text("README.md"))
verdict(all(k in s and s[k] for k in ("Install", "Usage", "Requirements", "License")))
