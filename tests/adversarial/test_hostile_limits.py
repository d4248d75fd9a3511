"""Hostile workers against the resource limits (docs/threat-model.md, "Use up the machine").

Five real programs under the default sandbox, each with a small limit so the test is quick: a
fork bomb, a memory hog, a filler of the private /tmp (one that sleeps on, one that quits when its
write fails), and a filler of the workspace. Each must be
stopped at its limit, not at its deadline: the attempt ends with the limit in words in the
ledger (`claims.limit`, and the settle record) and in `loopproof show`, the ledger verifies, the
engine goes on to the gate and reports FAILED (exit 3), and no process of it is left
(tests/support/leftover_processes.py counts after every test).

None of them can take the machine down even if its limit failed: each stops by itself far past
its limit but far below harm, then sleeps, and the worker's deadline (timeout_s = 15) kills the
sandbox. The fork bomb is a tree of depth 9 (at most 1023 sleeping shells, about 1 MiB each), the
hog stops at 512 MiB, the fillers at 64 MiB (of /tmp, which is memory, and of the workspace's
disk); the test then fails (stopped at the deadline, no limit in the ledger).
"""

from __future__ import annotations

import json
import time

import pytest

from loopproof.engine.system import limits

BOMB = "b() { if [ $1 -gt 0 ]; then b $(($1 - 1)) & b $(($1 - 1)) & fi; sleep 20; }; b 9"
HOG = ("import time\nx = []\nfor _ in range(512):\n    x.append(bytearray(1 << 20))\n"
       "time.sleep(20)\n")
TMP_FILLER = "dd if=/dev/zero of=/tmp/fill bs=64k count=1024; sleep 20"
# Stopped by the full /tmp rather than killed at it: dd fails (ENOSPC) and the worker gives up at
# once, before any poll of the engine's could see the folder (it was not named in the ledger).
TMP_QUITTER = "dd if=/dev/zero of=/tmp/fill bs=64k count=1024; exit 1"
WS_FILLER = ('i=0; while [ $i -lt 640 ]; do i=$((i + 1)); '
             'head -c 100000 /dev/zero > "f$i"; done; sleep 20')

CASES = {  # name: (worker argv, limit fields, the limit in words)
    "fork bomb": (["/bin/sh", "-c", BOMB], "max_processes = 32", "process limit 32"),
    "memory hog": (None, "max_memory_bytes = 67108864", "memory limit 64 MiB"),
    "tmp filler": (["/bin/sh", "-c", TMP_FILLER], "max_tmp_bytes = 1048576",
                   "tmp limit 1 MiB"),
    "tmp filler that quits": (["/bin/sh", "-c", TMP_QUITTER], "max_tmp_bytes = 1048576",
                              "tmp limit 1 MiB"),
    "workspace filler": (["/bin/sh", "-c", WS_FILLER], "max_workspace_bytes = 1048576",
                         "workspace limit 1 MiB"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_hostile_worker_is_stopped_at_its_limit(kit, name: str) -> None:
    argv, fields, words = CASES[name]
    worker = json.dumps(argv) if argv is not None else kit.argv("hog.py", HOG)
    spec = kit.graph({"a": f"worker = {worker}\ngate = [\"/bin/false\"]\nspend_ceiling = 30.0\n"
                           f"timeout_s = 15\n{fields}\n"}, sandbox=True)
    start = time.monotonic()
    res = kit.start(spec)
    took = time.monotonic() - start
    assert res.code == 3, res.err  # FAILED: the gate rejected; the engine itself went on
    assert took < 12, f"stopped at the deadline, not at the limit ({took:.1f} s)"
    records = kit.records(kit.ledger)
    claim = next(r for r in records if r["type"] == "claim")["claims"]
    assert claim["killed"] == "limit" and claim["limit"] == words, claim
    kind = words.split()[0].replace("process", "processes")
    assert claim["held_by"][kind] not in ("none", "rlimit"), claim["held_by"]
    assert claim["held_by"]["lifecycle"].startswith("cgroup"), claim["held_by"]
    settle = next(r for r in records if r["type"] == "settle" and r.get("killed"))
    assert settle["killed"] == "limit" and settle["limit"] == words
    assert kit.run("verify", kit.ledger).code == 0
    shown = kit.run("show", kit.ledger)
    assert shown.code == 0 and f"killed: {words} after" in shown.out, shown.out
    assert limits.reap(limits.owner_of(kit.ledger)) == 0  # nothing of the run left
