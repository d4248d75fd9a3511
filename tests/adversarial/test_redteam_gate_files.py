"""Red team: a worker that hunts for its gate's answer key in the spec's folder.

The promise (docs/threat-model.md, "See the gate's files"): every gate's argv files and
`gate_files` are covered for every worker, except a file the worker's *own* argv names. The spec's
folder itself stays readable, so the attacks look for the gate's bytes under other names:

- the gate's script run as the program itself (`gate = ["check.sh"]`);
- a file another node's worker names (a later node that may read the reference answer);
- the git history of the spec's folder (the key is committed);
- the bytecode cache Python left next to a gate module (`__pycache__/key.cpython-*.pyc`);
- a hard link made from inside the sandbox;
- the spec file, where an inline gate's command line (and the answer it compares) is written;
- a symbolic link to the key, which resolves to /dev/null for the worker and to the key
  for the gate (the gate would compare the key with itself).

Each worker writes what it found as its answer; the gate accepts only the key, so a leak ends
DONE. Every attack must end with the key unread.
"""

from __future__ import annotations

import json
import os
import py_compile
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from loopproof.engine.run.runner import Runner
from loopproof.engine.run.spec import load

PY = sys.executable


def run(path: Path, ledger: Path) -> tuple[int, list[dict]]:
    runner = Runner.start(load(path), ledger)
    try:
        code = runner.run()
    finally:
        runner.close()
    return code, [json.loads(x) for x in ledger.read_text().splitlines()]


def verdicts(records: list[dict], node: str = "solve") -> list[str]:
    return [r["verdict"] for r in records if r["type"] == "verdict" and r["node"] == node]


def graph(spec: Path, nodes: str) -> Path:
    path = spec / "graph.toml"
    path.write_text(f"[graph]\nspend_budget = 100.0\n\n{nodes}")
    return path


def node(name: str, worker: list[str], gate: list[str], more: str = "") -> str:
    return (f"[node.{name}]\nworker = {json.dumps(worker)}\ngate = {json.dumps(gate)}\n"
            f"spend_ceiling = 30.0\ntimeout_s = 20\ngate_timeout_s = 20\n{more}\n")


@pytest.fixture
def key() -> str:
    return secrets.token_hex(8)


def hunter(found: str) -> list[str]:
    """A worker that writes `found` (a shell expression) to answer.txt, '-' if it fails."""
    return ["sh", "-c", f"( {found} ) > answer.txt 2>/dev/null || echo - > answer.txt; "
                        "[ -s answer.txt ] || echo - > answer.txt"]


def test_a_gate_script_run_as_the_program_is_invisible_to_the_worker(tmp_path: Path,
                                                                     key: str) -> None:
    check = tmp_path / "check.sh"
    check.write_text(f'#!/bin/sh\n# KEY={key}\ntest "$(cat answer.txt)" = {key}\n')
    check.chmod(0o755)
    worker = hunter(f"sed -n 's/^# KEY=//p' {check}")
    path = graph(tmp_path, node("solve", worker, ["check.sh"]))
    code, records = run(path, tmp_path / "L.jsonl")
    assert verdicts(records) == ["reject"] and code == 3


def test_a_file_another_nodes_worker_names_stays_hidden_from_this_worker(tmp_path: Path,
                                                                        key: str) -> None:
    (tmp_path / "expected.txt").write_text(key + "\n")
    (tmp_path / "check.py").write_text(
        "import sys\nsys.exit(0 if open('answer.txt').read() == open(sys.argv[1]).read() "
        "else 1)\n")
    # `explain` runs after `solve` and is given the reference answer on purpose
    nodes = (node("solve", hunter(f"cat {tmp_path / 'expected.txt'}"),
                  [PY, "check.py", "expected.txt"])
             + node("explain", ["sh", "-c", 'cp "$1" seen.txt', "sh", "expected.txt"],
                    ["sh", "-c", "test -s seen.txt"], 'needs = ["solve"]'))
    path = graph(tmp_path, nodes)
    code, records = run(path, tmp_path / "L.jsonl")
    assert verdicts(records) == ["reject"] and code == 3


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=op", "-c", "user.email=op@example.org", *args],
                   cwd=cwd, check=True, capture_output=True)


def test_the_gate_files_git_history_is_invisible_to_the_worker(tmp_path: Path, key: str) -> None:
    spec = tmp_path / "task"
    spec.mkdir()
    (spec / "expected.txt").write_text(key + "\n")
    (spec / "check.py").write_text(
        "import sys\nsys.exit(0 if open('answer.txt').read() == open(sys.argv[1]).read() "
        "else 1)\n")
    git(spec, "init", "-q")
    git(spec, "add", "expected.txt", "check.py")
    git(spec, "commit", "-qm", "the task")
    # the worker reads the committed key straight from the object store (no git needed)
    found = (f"{PY} -c \"import zlib, pathlib, sys; "
             f"[sys.stdout.write(zlib.decompress(p.read_bytes()).split(b'\\0', 1)[1].decode()) "
             f"for p in pathlib.Path('{spec}/.git/objects').glob('??/*') "
             f"if zlib.decompress(p.read_bytes()).startswith(b'blob 17')]\"")
    path = graph(spec, node("solve", hunter(found), [PY, "check.py", "expected.txt"]))
    code, records = run(path, spec / "L.jsonl")
    assert verdicts(records) == ["reject"] and code == 3


def test_the_bytecode_of_a_gate_module_is_invisible_to_the_worker(tmp_path: Path,
                                                                  key: str) -> None:
    (tmp_path / "answer_key.py").write_text(f"KEY = {key!r}\n")
    # the operator tried the gate once: Python cached the module next to it
    py_compile.compile(str(tmp_path / "answer_key.py"),
                       cfile=str(tmp_path / "__pycache__" / "answer_key.cpython-311.pyc"))
    (tmp_path / "check.py").write_text(
        "import sys\nsys.path.insert(0, sys.argv[1])\nfrom answer_key import KEY\n"
        "sys.exit(0 if open('answer.txt').read().strip() == KEY else 1)\n")
    found = (f"{PY} -c \"import marshal, glob; "
             f"c = marshal.loads(open(glob.glob('{tmp_path}/__pycache__/answer_key.*')[0], "
             f"'rb').read()[16:]); print([k for k in c.co_consts if isinstance(k, str) "
             f"and len(k) == 16][0])\"")
    nodes = node("solve", hunter(found), [PY, "check.py", str(tmp_path)],
                 'gate_files = ["answer_key.py"]')
    path = graph(tmp_path, nodes)
    code, records = run(path, tmp_path / "L.jsonl")
    assert verdicts(records) == ["reject"] and code == 3


def test_a_worker_cannot_hard_link_a_gate_file_into_its_workspace(tmp_path: Path,
                                                                 key: str) -> None:
    (tmp_path / "expected.txt").write_text(key + "\n")
    (tmp_path / "check.py").write_text(
        "import sys\nsys.exit(0 if open('answer.txt').read() == open(sys.argv[1]).read() "
        "else 1)\n")
    worker = ["sh", "-c", f"ln {tmp_path / 'expected.txt'} answer.txt; ln -f /dev/null x; "
                          f"[ -s answer.txt ] || echo - > answer.txt"]
    path = graph(tmp_path, node("solve", worker, [PY, "check.py", "expected.txt"]))
    code, records = run(path, tmp_path / "L.jsonl")
    assert verdicts(records) == ["reject"] and code == 3
    assert os.stat(tmp_path / "expected.txt").st_nlink == 1


def test_an_inline_gates_answer_in_the_spec_file_is_invisible_to_the_worker(
        tmp_path: Path) -> None:
    key = secrets.token_hex(8)
    spec = tmp_path / "graph.toml"
    # the worker reads the spec (its argv does not name it) and answers what the gate compares
    worker = ["sh", "-c", f"grep -o '= [0-9a-f]\\{{16\\}}' {spec} | cut -c3- > answer.txt; "
                          "[ -s answer.txt ] || echo - > answer.txt"]
    gate = ["sh", "-c", f'test "$(cat answer.txt)" = {key}']
    spec.write_text("[graph]\nspend_budget = 60.0\n[node.a]\n"
                    f"worker = {json.dumps(worker)}\ngate = {json.dumps(gate)}\n"
                    "spend_ceiling = 20.0\ntimeout_s = 20\ngate_timeout_s = 20\n")
    ledger = tmp_path / "L.jsonl"
    runner = Runner.start(load(spec), ledger)
    try:
        code = runner.run()
    finally:
        runner.close()
    records = [json.loads(x) for x in ledger.read_text().splitlines()]
    assert [r["verdict"] for r in records if r["type"] == "verdict"] == ["reject"] and code == 3


def test_a_link_to_the_gates_key_is_not_an_answer(tmp_path: Path, key: str) -> None:
    (tmp_path / "expected.txt").write_text(key + "\n")
    (tmp_path / "check.py").write_text(
        "import sys\nsys.exit(0 if open('answer.txt').read() == open(sys.argv[1]).read() "
        "else 1)\n")
    worker = ["ln", "-s", str(tmp_path / "expected.txt"), "answer.txt"]
    path = graph(tmp_path, node("solve", worker, [PY, "check.py", "expected.txt"]))
    code, records = run(path, tmp_path / "L.jsonl")
    assert "accept" not in verdicts(records) and code != 0
