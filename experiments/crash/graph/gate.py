"""Crash-graph gate (standard library only): accept iff `<node>.txt` holds the expected content.

argv: SEED NODE. Runs on a read-only snapshot of the node's workspace; exit 0 accept, 1 reject.
"""

import hashlib
import sys


def main() -> int:
    seed, node = sys.argv[1], sys.argv[2]
    want = hashlib.sha256(f"{seed}/{node}".encode()).hexdigest() + "\n"
    try:
        with open(f"{node}.txt") as f:
            got = f.read()
    except OSError:
        return 1
    return 0 if got == want else 1


if __name__ == "__main__":
    sys.exit(main())
