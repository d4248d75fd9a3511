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
ok = (isinstance(c, dict) and set(c) == {"name", "port", "retries", "timeout_s", "mode", "tls", "hosts"}
      and isinstance(c["name"], str) and c["name"].strip() != ""
      and type(c["port"]) is int and 1 <= c["port"] <= 65535
      and type(c["retries"]) is int and 0 <= c["retries"] <= 10
      and type(c["timeout_s"]) is int and 1 <= c["timeout_s"] <= 300
      and c["mode"] in ("batch", "stream") and c["tls"] is True
      and isinstance(c["hosts"], list) and len(c["hosts"]) >= 1
      and all(isinstance(h, str) and re.fullmatch(r"[a-z0-9.-]+\.[a-z]+", h) for h in c["hosts"])
      and len(set(c["hosts"])) == len(c["hosts"]))
verdict(ok)
