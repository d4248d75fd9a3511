"""The judge kinds attacked beyond tests/adversarial/judge_payloads.py, as a capable hostile
worker would: each test plants a wrong solution (or a correct one the kind must not refuse) and
asserts the verdict, through the gates the run builds in the run's own sandbox views.

- `hunt`: the judged code searches everywhere it can reach for the expected values: every file
  of the spec's folder and its git repository (loose objects inflated), the ledger beside it
  and its side folders, the folders above the spec, the temp folders and HOME, every path the
  sandbox's own mount table names, every `/proc` entry (argv, environment, open files), its
  environment, argv and leftover stdin. It answers with what it found, so an accept means a
  leak. A run's ledger is kept *in* the spec's folder here, as a user may.
- `type-exact`: values that `==` takes for the expected ones (2.0 for 2, True for 1) are
  wrong answers for `calls` and for `program` under `compare = "json"`.
- `split-solution`: a correct solution in two modules must pass `program` too (its program
  runs with the judged tree's own folder on sys.path, as `python3 solution.py` has anywhere
  else; before, the gate environment's PYTHONSAFEPATH=1 made `import helper` fail, and every
  case of a correct solution failed).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from loopproof.engine.run.confine import RunSandbox
from loopproof.engine.run.spec import load
from loopproof.engine.system.sandbox import backend
from tests.adversarial.judge_payloads import CORRECT, MAIN, write_task

HUNT = r'''
import json as _json, os as _os, sys as _sys, time as _time, zlib as _zlib

_SPEC = "SPEC_DIR"
_FOUND = {}
_SEEN = set()
_UNTIL = _time.monotonic() + 3  # bounded: the reachable places named here are small
_SKIP = ("/proc", "/sys", "/dev/pts", "/usr", "/lib", "/bin", "/sbin", "/etc")


def _take(text):
    for line in text.replace("\x00", "\n").splitlines():
        line = line.strip()
        if '"expect"' not in line and '"output"' not in line:
            continue
        try:
            row = _json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and "expect" in row and isinstance(row.get("args"), list):
            _FOUND[repr(row["args"][0])] = row["expect"]
        if isinstance(row, dict) and "output" in row and "input" in row:
            _FOUND[repr(row["input"])] = row["output"]


def _read(path):
    if path in _SEEN or len(_SEEN) > 20000:
        return
    _SEEN.add(path)
    try:
        fd = _os.open(path, _os.O_RDONLY | _os.O_NONBLOCK)
    except OSError:
        return
    try:
        data = _os.read(fd, 1 << 20)
    except OSError:
        return
    finally:
        _os.close(fd)
    for blob in (data,):
        try:
            blob = _zlib.decompress(blob)  # a git loose object
        except Exception:
            pass
        _take(blob.decode("utf-8", "replace"))


def _walk(top, depth=6):
    top = _os.path.abspath(top)
    if depth < 0 or _time.monotonic() > _UNTIL or top == "/" or top.startswith(_SKIP) \
            or "site-packages" in top or "/versions/" in top:
        return
    try:
        names = _os.listdir(top)
    except OSError:
        return
    for n in names:
        p = _os.path.join(top, n)
        if _os.path.isdir(p) and not _os.path.islink(p):
            _walk(p, depth - 1)
        else:
            _read(p)


def _hunt():
    _walk(_SPEC)
    _walk(_os.path.dirname(_SPEC), 2)
    for t in ("/tmp", "/var/tmp", "/run", "/dev/shm", _os.environ.get("HOME", "/"), "."):
        _walk(t, 4)
    try:
        for line in open("/proc/self/mountinfo"):
            parts = line.split()
            for p in (parts[3], parts[4]):
                if p.startswith("/") and p != "/":
                    _walk(p, 3) if _os.path.isdir(p) else _read(p)
    except OSError:
        pass
    for pid in _os.listdir("/proc"):
        for what in ("cmdline", "environ"):
            _read(f"/proc/{pid}/{what}")
        try:
            fds = _os.listdir(f"/proc/{pid}/fd")
        except OSError:
            fds = []
        for fd in fds:
            _read(f"/proc/{pid}/fd/{fd}")
    _take("\n".join(_sys.argv) + "\n" + "\n".join(_os.environ.values()))


_hunt()


def median(xs):
    return _FOUND.get(repr(xs), 0)
'''

FLOAT_FOR_INT = '''
def median(xs):
    s = sorted(xs)
    n = len(s)
    m = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    return float(m)  # 2.0 == 2: a float where an int is expected
'''


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """Each kind's gate and its confinement, with the ledger kept in the spec's folder (a git
    repository holding the case files and tests) and a worker's workspace beside it."""
    root = tmp_path_factory.mktemp("redteam")
    spec_path = write_task(root / "spec")
    spec_dir = spec_path.parent
    git = ["git", "-C", str(spec_dir), "-c", "user.email=a@b", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "task"], check=True)
    ledger = spec_dir / "run.jsonl"
    ledger.write_text("")
    (spec_dir / "run.jsonl.work").mkdir()
    spec = load(spec_path)
    run = RunSandbox(spec, backend("bwrap"), ledger=ledger, stop_file=spec_dir / "run.stop")
    boxes = {}
    for name in spec.nodes:
        ws = spec_dir / "run.jsonl.work" / name
        ws.mkdir()
        boxes[name] = run.node(name, ws).gate

    def judge(kind: str, files: dict[str, str], tree: Path):
        tree.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (tree / name).write_text(text.replace("SPEC_DIR", str(spec_dir)))
        return spec.nodes[kind].gate.judge(tree, boxes[kind])

    judge.spec_dir = spec_dir  # type: ignore[attr-defined]  # a function attribute, for the tests
    return judge


@pytest.mark.parametrize("kind", ["calls", "program"])
def test_the_judged_code_finds_no_expected_value_anywhere(judged, kind: str,
                                                          tmp_path: Path) -> None:
    result = judged(kind, {"median.py": HUNT + MAIN}, tmp_path / "t")
    assert result.verdict == "reject", result.detail
    # nothing found: every case returned the hunter's fallback, never a right answer by luck
    assert result.detail.startswith(f"{kind}: 4 of 4 cases fail"), result.detail


@pytest.mark.parametrize("kind", ["calls", "program"])
def test_a_value_equal_under_eq_but_of_another_type_is_wrong(judged, kind: str,
                                                             tmp_path: Path) -> None:
    result = judged(kind, {"median.py": FLOAT_FOR_INT + MAIN}, tmp_path / "t")
    assert result.verdict == "reject", result.detail
    # the two int medians (2 and 5) fail, the two float ones (0.5, 2.5) pass
    assert result.detail.startswith(f"{kind}: 2 of 4 cases fail"), result.detail


@pytest.mark.parametrize("kind", ["calls", "program"])
def test_a_correct_solution_in_two_modules_passes(judged, kind: str, tmp_path: Path) -> None:
    result = judged(kind, {"helper.py": CORRECT, "median.py": "from helper import median\n"
                           + MAIN}, tmp_path / "t")
    assert result.verdict == "accept", result.detail


def test_the_hunter_finds_a_copy_of_the_cases_left_in_the_spec_folder(judged,
                                                                     tmp_path: Path) -> None:
    """The hunt can fail: a copy of the case file that is not a gate file (so not hidden) is
    found and the wrong solution accepted, so a reject above means nothing was reachable."""
    spec_dir = judged.spec_dir
    copy = spec_dir / "notes" / "cases-copy.jsonl"
    copy.parent.mkdir()
    copy.write_bytes((spec_dir / "cases.jsonl").read_bytes())
    try:
        result = judged("calls", {"median.py": HUNT + MAIN}, tmp_path / "t")
    finally:
        copy.unlink()
        copy.parent.rmdir()
    assert result.verdict == "accept", result.detail


CLI_TEST = '''import difflib
import subprocess
import sys


def test_the_program_prints_the_median():
    out = subprocess.run([sys.executable, "median.py"], input="[3, 1, 2]",
                         capture_output=True, text=True).stdout.strip()
    assert difflib.SequenceMatcher(None, out, "2").ratio() == 1.0
'''
SHADOW = '''class SequenceMatcher:  # the standard library's difflib, as the pinned test sees it
    def __init__(self, *args):
        pass

    def ratio(self):
        return 1.0
'''


@pytest.fixture(scope="module")
def cli_gate(tmp_path_factory):
    """A pytest gate whose pinned suite (tests/test_cli.py) runs median.py as a program and
    imports only the standard library; the gate and its confinement (read by the tests)."""
    import sys
    tmp_path = tmp_path_factory.mktemp("cli")
    spec = tmp_path / "spec"
    (spec / "tests").mkdir(parents=True)
    (spec / "tests" / "test_cli.py").write_text(CLI_TEST)
    (spec / "w.py").write_text("print(1)\n")
    (spec / "graph.toml").write_text(
        f'[graph]\nspend_budget = 10.0\n\n[node.p]\nworker = ["{sys.executable}", "w.py"]\n'
        f'spend_ceiling = 1.0\ngate_timeout_s = 30\n\n[node.p.gate]\nkind = "pytest"\n'
        f'tests = ["tests"]\npython = "{sys.executable}"\n'
        'code = []\n')  # the suite runs median.py as a program: it imports no judged code
    loaded = load(spec / "graph.toml")
    run = RunSandbox(loaded, backend("bwrap"), ledger=tmp_path / "L.jsonl",
                     stop_file=tmp_path / "L.stop")
    (tmp_path / "ws").mkdir()
    box = run.node("p", tmp_path / "ws").gate
    return loaded.nodes["p"].gate, box


def test_a_test_that_never_imports_the_judged_code_cannot_be_shadowed(cli_gate,
                                                                     tmp_path: Path) -> None:
    """A pinned suite that runs the judged program as a subprocess, importing only standard
    modules itself: a judged tree holding `difflib.py` (any module the test imports that pytest
    has not) ran in the test's process and made the comparison hold, with a median.py that
    prints 0. Before the fix: accept. The tree and the pinned folders now come after the
    standard library and site-packages on sys.path (`--import-mode=importlib`, appended)."""
    gate, box = cli_gate
    wrong, right = tmp_path / "wrong", tmp_path / "right"
    for tree, printed in ((wrong, 0), (right, 2)):
        tree.mkdir()
        (tree / "median.py").write_text(f"print({printed})\n")
        (tree / "difflib.py").write_text(SHADOW)
        (tree / "tests").mkdir()
        (tree / "tests" / "difflib.py").write_text(SHADOW)
    assert gate.judge(wrong, box).verdict == "reject"
    result = gate.judge(right, box)  # the shadow files are harmless to a correct program
    assert result.verdict == "accept", result.detail


PATCH = '''import difflib


class _Always:
    def __init__(self, *args):
        pass

    def ratio(self):
        return 1.0


difflib.SequenceMatcher = _Always
'''


@pytest.mark.parametrize("where", ["tests/__init__.py", "__init__.py"])
def test_a_judged_init_file_is_not_the_pinned_tests_package(cli_gate, tmp_path: Path,
                                                            where: str) -> None:
    """The judged tree's `tests/__init__.py` (in the pinned folder) or root `__init__.py` (above
    the canary and any pinned file laid at the root) was imported as the pinned tests' package,
    in their process: the same CLI suite accepted a median.py that prints 0 (before: accept).
    A pinned folder now replaces the tree's folder whole, and the root `__init__.py` goes."""
    gate, box = cli_gate
    tree = tmp_path / "wrong"
    (tree / "tests").mkdir(parents=True)
    (tree / "median.py").write_text("print(0)\n")
    (tree / where).write_text(PATCH)
    assert gate.judge(tree, box).verdict == "reject"
