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

md = text("README.md")
s = sections(md)
facts = {"Install": "pip install loopproof-demo", "Usage": "must stop within its budget",
         "Requirements": "Python 3.11 or newer is required", "License": "Apache-2.0"}
links = re.findall(r"\]\(([^)]*)\)", md)
allowed = {"https://example.org/guide", "https://example.org/api",
           "https://www.apache.org/licenses/LICENSE-2.0"}
verdict(md.startswith("# ") and all(k in s and any(v in line for line in s[k]) for k, v in facts.items())
        and set(links) == allowed)
