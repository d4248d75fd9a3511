"""Worker: look for a nonce whose SHA-256 starts with 12 zero hex digits (far too hard), writing
progress as it goes. It never finishes on its own; the meter stops it."""
import hashlib
import time
from pathlib import Path

nonce = 0
with open("progress.txt", "w", encoding="utf-8") as out:
    while True:
        for _ in range(2000):
            digest = hashlib.sha256(str(nonce).encode()).hexdigest()
            if digest.startswith("0" * 12):
                Path("answer.txt").write_text(str(nonce), encoding="utf-8")
                raise SystemExit(0)
            nonce += 1
        out.write(f"{nonce}\n")
        out.flush()
        time.sleep(0.01)  # be gentle with a shared machine
