"""Crash-graph worker (standard library only): deterministic in (seed, node, activation, attempt).

argv: SEED NODE PASS_FROM CALLS_FILE [WIDTH]. It appends one line to CALLS_FILE (outside the
workspace) so the experiment can count how often workers really ran, then writes `<node>.txt`
into its workspace: the expected content when this attempt passes, a fixed wrong one when it
fails. With WIDTH (a build of the wide crash graph, activation 0), it first waits until WIDTH
builds have called for this attempt number (their lines in CALLS_FILE; at most 10 s): so when
one build's worker returns, every build of the wave has called, in every run of the seed. Then
build_i waits i x STAGGER_S more: build_0's verdict is recorded while the others still work
(without it, two verdicts could both be recorded before either's next crash site, and the
attempts in flight after a verdict would depend on thread timing).
"""

import hashlib
import os
import sys
import time

STAGGER_S = 0.75


def expected(seed: str, node: str) -> str:
    return hashlib.sha256(f"{seed}/{node}".encode()).hexdigest() + "\n"


def rendezvous(calls: str, width: int, tail: str) -> None:
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        with open(calls) as f:
            called = {line.split(" ", 1)[0] for line in f if line.startswith("build_")
                      and line.rstrip("\n").endswith(tail)}
        if len(called) >= width:
            return
        time.sleep(0.01)


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
    if len(sys.argv) > 5 and activation == 0:
        rendezvous(calls, int(sys.argv[5]), f" {activation} {attempt}")
        time.sleep(STAGGER_S * int(node.rsplit("_", 1)[1]))  # build_i returns i steps later
    with open(f"{node}.txt", "w") as out:
        out.write(expected(seed, node) if passes else f"wrong answer from {node}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
