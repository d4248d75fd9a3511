"""Crash-graph worker (standard library only): deterministic in (seed, node, activation, attempt).

argv: SEED NODE PASS_FROM CALLS_FILE. It appends one line to CALLS_FILE (outside the workspace)
so the experiment can count how often workers really ran, then writes `<node>.txt` into its
workspace: the expected content when this attempt passes, a fixed wrong one when it fails.
"""

import hashlib
import os
import sys


def expected(seed: str, node: str) -> str:
    return hashlib.sha256(f"{seed}/{node}".encode()).hexdigest() + "\n"


def main() -> int:
    seed, node, pass_from, calls = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    activation = int(os.environ.get("LOOPPROOF_ACTIVATION", "0"))
    attempt = int(os.environ.get("LOOPPROOF_ATTEMPT", "1"))
    # pass_from: "A:N,B:M" -> in activation A pass from attempt N on; activations not listed fail
    rules = dict(item.split(":") for item in pass_from.split(",") if item)
    threshold = rules.get(str(activation))
    passes = threshold is not None and attempt >= int(threshold)
    fd = os.open(calls, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{node} {activation} {attempt}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    with open(f"{node}.txt", "w") as out:
        out.write(expected(seed, node) if passes else f"wrong answer from {node}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
