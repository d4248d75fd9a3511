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

c = json.loads(text("config.json"))
types = {"name": str, "port": int, "retries": int, "timeout_s": int, "mode": str, "tls": bool, "hosts": list}
verdict(isinstance(c, dict) and all(isinstance(c.get(k), t) for k, t in types.items())
        and c["name"] != "" and c["port"] > 0 and c["hosts"] != [] and c["mode"] != "")
