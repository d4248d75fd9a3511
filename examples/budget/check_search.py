"""Gate: accept iff answer.txt holds a nonce whose SHA-256 starts with 12 zero hex digits."""
import hashlib
import sys
from pathlib import Path

try:
    nonce = Path("answer.txt").read_text(encoding="utf-8").strip()
except FileNotFoundError:
    print("reject: no answer.txt")
    sys.exit(1)
sys.exit(0 if hashlib.sha256(nonce.encode()).hexdigest().startswith("0" * 12) else 1)
