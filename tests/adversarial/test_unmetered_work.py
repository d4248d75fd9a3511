"""Family: engine work a worker causes, unmetered.

After the worker ends, the engine copies its workspace (the judged copy), hashes it, copies it
again (the gate's snapshot) and hands it on. 60,000 empty files or a 1 GiB sparse file made the
engine copy and hash for tens of seconds while the run's budget said 6, and a 1 TB sparse file
would have filled the disk (copies were dense). Now a workspace is checked against declared
limits (`max_files`, `max_workspace_bytes`, with defaults) before a byte is copied, a sparse file
within them is copied sparse, and the staging time is paid from the attempt's evaluation
reservation. (No test here times anything: they assert what was refused, copied and charged.)
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ACCEPT = "import sys\nsys.exit(0)\n"


def node(kit, tag: str, worker: str, extra: str = "", gate: str = ACCEPT) -> str:
    return (f"worker = {kit.argv(tag + '_w.py', worker)}\ngate = {kit.argv(tag + '_g.py', gate)}\n"
            f"spend_ceiling = 30.0\ntimeout_s = 60\n{extra}")


def only_verdict(kit, name: str = "a") -> dict:
    (v,) = [r for r in kit.records(kit.ledger) if r["type"] == "verdict" and r["node"] == name]
    return v


def nothing_staged(kit) -> bool:
    acc = f"{kit.ledger}.accepted"
    return not os.path.exists(acc) or all(not os.listdir(os.path.join(acc, d))
                                          for d in os.listdir(acc))


def test_empty_files_past_max_files_are_refused_before_copying(kit) -> None:
    # the default limit's first excess (the 60,000 of the report were refused by the same
    # count, at the same entry: the walk stops at 10,001)
    many = "for i in range(10_001):\n    open(f'f{i}', 'w').close()\n"
    r = kit.start(kit.graph({"a": node(kit, "a", many)}))
    assert r.code == 3, (r.code, r.err)
    v = only_verdict(kit)
    assert v["verdict"] == "error" and "max_files = 10000" in v["detail"]
    assert nothing_staged(kit)


def test_a_one_gib_sparse_file_is_refused_before_copying(kit) -> None:
    sparse = "with open('big', 'wb') as f:\n    f.truncate(1 << 30)\n"
    r = kit.start(kit.graph({"a": node(kit, "a", sparse)}))
    assert r.code == 3
    v = only_verdict(kit)
    assert v["verdict"] == "error" and "max_workspace_bytes" in v["detail"]
    assert nothing_staged(kit)


def test_a_one_tb_sparse_file_never_reaches_the_disk(kit) -> None:
    sparse = "with open('huge', 'wb') as f:\n    f.truncate(1 << 40)\n"
    r = kit.start(kit.graph({"a": node(kit, "a", sparse)}))
    assert r.code == 3 and "max_workspace_bytes" in only_verdict(kit)["detail"]
    assert nothing_staged(kit)


def test_hard_links_count_once_per_name(kit) -> None:
    # one 8 MiB file under 40 names: the copies would hold 40 files of 8 MiB each
    links = ("import os\nopen('f0', 'wb').write(b'x' * (8 << 20))\n"
             "for i in range(1, 40):\n    os.link('f0', f'f{i}')\n")
    r = kit.start(kit.graph({"a": node(kit, "a", links)}))
    assert r.code == 3 and "max_workspace_bytes" in only_verdict(kit)["detail"]


def test_a_tree_nested_thousands_deep_is_refused_by_depth(kit) -> None:
    deep = "import os\nfor _ in range(1500):\n    os.mkdir('d')\n    os.chdir('d')\n"
    try:
        r = kit.start(kit.graph({"a": node(kit, "a", deep)}))
        assert r.code == 3 and "Traceback" not in r.err
        assert "levels" in only_verdict(kit)["detail"]
        from loopproof.engine.system.trees import remove_tree
        remove_tree(Path(f"{kit.ledger}.work"))  # the engine's delete: iterative, any depth
        assert not os.path.exists(f"{kit.ledger}.work")
    finally:  # pytest's own clean-up recurses and would fail on this tree in a later session
        subprocess.run(["rm", "-rf", str(kit.tmp)], check=False)


def test_declared_limits_are_the_ones_checked(kit) -> None:
    five = ("import os\nn = 6 if os.environ['LOOPPROOF_ATTEMPT'] == '1' else 5\n"
            "for f in os.listdir('.'):\n    os.unlink(f)\n"
            "for i in range(n):\n    open(f'f{i}', 'w').write('x' * 10)\n")
    spec = kit.graph({"a": node(kit, "a", five, "attempts = 2\nmax_workspace_bytes = 50\n")},
                     extra="max_files = 5\n")
    r = kit.start(spec)
    assert r.code == 0, (r.code, r.err)
    first, second = [x for x in kit.records(kit.ledger) if x["type"] == "verdict"]
    assert first["verdict"] == "error" and "max_files = 5 " in first["detail"]
    assert second["verdict"] == "accept"


def test_a_sparse_file_within_the_limits_stays_sparse_and_its_staging_is_paid(kit) -> None:
    # 128 MiB apparent, 8 KiB of data: copied as data extents, every copy sparse
    sparse = ("with open('s', 'wb') as f:\n    f.write(b'a' * 4096)\n    f.seek(128 << 20)\n"
              "    f.write(b'z' * 4096)\n")
    spec = kit.graph({"a": node(kit, "a", sparse),
                      "b": node(kit, "b", "pass\n", 'needs = ["a"]\n')})
    r = kit.start(spec)
    assert r.code == 0, (r.code, r.err)
    v = only_verdict(kit)
    accepted = os.path.join(f"{kit.ledger}.accepted", "a", f"{v['activation']}-{v['attempt']}",
                            "s")
    handed = os.path.join(f"{kit.ledger}.work", "b", "inputs", "a", "s")
    for copy in (accepted, handed):
        st = os.stat(copy)
        assert st.st_size == (128 << 20) + 4096 and st.st_blocks * 512 < (1 << 20), copy
    evaluation = next(x for x in kit.records(kit.ledger)
                      if x["type"] == "settle" and x["what"] == "evaluation" and x["node"] == "a")
    staging = evaluation["staging"]["seconds"]
    assert staging > 0 and evaluation["amount"] >= staging - 1e-6  # paid from the attempt
