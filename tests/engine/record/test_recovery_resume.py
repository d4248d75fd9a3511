"""`loopproof resume` end to end on damaged copies of a finished and of an unfinished run.

The damage points are the ones the enumeration (tests/engine/record/test_recovery_rule.py) classes, chosen
where a wrong rule does harm: a complete record's newline zeroed (the old rule cut the two last
records and ran `count` again), a 4 KiB zero fill ending inside the last line (the old rule kept
4 of 16 records, ran both nodes again and forgot their spend), a committed record's newline lost,
zeros appended after the end, and a write a crash cut short. Each damaged run must resume to
the same outcome as the undamaged one or be refused (exit 5, not a byte written); a committed
attempt is never run again and no spend is forgotten.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loopproof.engine.cli import main as cli_main
from loopproof.engine.record.committed import read_floor
from loopproof.engine.system.canonical import canonical
from tests.support.launchers import python_asked_once  # noqa: F401  (a fixture)
from tests.support.oracles import records
from tests.support.paths import REPO

EXAMPLE = REPO / "examples" / "pipeline"
LOOPPROOF = Path(sys.executable).parent / "loopproof"
# the runs' `python3` (pyenv's shim, ~0.2 CPU-s a question) asked once (tests/support/launchers.py)
pytestmark = pytest.mark.usefixtures("python_asked_once")


def _loopproof(*args: str, cwd: Path, crash: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LOOPPROOF_CRASH_AT"}
    if crash:
        env["LOOPPROOF_CRASH_AT"] = crash
    return subprocess.run([str(LOOPPROOF), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A finished run and one SIGKILLed before `count`'s worker ran (its Begin recorded)."""
    out = {}
    for name, crash in (("finished", None), ("unfinished", "runner.before_worker:2")):
        folder = tmp_path_factory.mktemp(name)
        for f in EXAMPLE.iterdir():
            shutil.copy(f, folder / f.name)
        proc = _loopproof("run", "graph.toml", "--ledger", str(folder / "run.jsonl"), "--json",
                          cwd=folder, crash=crash)
        assert proc.returncode == (0 if crash is None else -9), proc.stderr
        out[name] = folder
    return out


def _resume(ledger: Path, capsys, monkeypatch) -> subprocess.CompletedProcess:
    """`loopproof resume --ledger L --json` in this process, in the ledger's folder (the runs
    themselves, one SIGKILLed, are real processes: the fixture above)."""
    monkeypatch.chdir(ledger.parent)
    capsys.readouterr()
    argv = ["resume", "--ledger", str(ledger), "--json"]
    code = cli_main(argv)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(argv, code, out.out, out.err)


def _copy(runs: dict[str, Path], which: str, tmp_path: Path) -> Path:
    folder = tmp_path / which
    shutil.copytree(runs[which], folder, symlinks=True)
    return folder / "run.jsonl"


def _lines(ledger: Path) -> list[bytes]:
    return ledger.read_bytes().splitlines(keepends=True)


def _zero_fill_into_last_line(data: bytes, lines: list[bytes]) -> bytes:
    end = len(data) - len(lines[-1]) // 2  # ends inside the last line
    return data[:end - 4096] + b"\x00" * 4096 + data[end:]


REFUSED = {
    "second-to-last newline zeroed": lambda data, ls, mark: (
        data[:len(data) - len(ls[-1]) - 1] + b"\x00" + ls[-1]),
    "4 KiB zero fill ending inside the last line": lambda data, ls, mark: (
        _zero_fill_into_last_line(data, ls)),
    # the newline of the last record the mark beside the ledger says was committed, and what
    # follows it (the rest of a crashed run's last group commit, never fsynced, may be cut)
    "cut just short of the committed point": lambda data, ls, mark: data[:mark - 1],
}


@pytest.mark.parametrize("which", ["finished", "unfinished"])
@pytest.mark.parametrize("damage", sorted(REFUSED))
def test_damage_to_committed_records_is_refused_and_nothing_is_cut(runs, tmp_path, which,
                                                                   damage, capsys, monkeypatch):
    ledger = _copy(runs, which, tmp_path)
    data = ledger.read_bytes()
    mark = read_floor(ledger, signed=False).bytes
    assert 0 < mark <= len(data)
    ledger.write_bytes(REFUSED[damage](data, _lines(ledger), mark))
    damaged = ledger.read_bytes()
    before = sorted(p.name for p in ledger.parent.iterdir())
    proc = _resume(ledger, capsys, monkeypatch)
    assert proc.returncode == 5, (proc.returncode, proc.stdout, proc.stderr[-500:])
    assert "Traceback" not in proc.stderr and "fix:" in proc.stderr
    assert ledger.read_bytes() == damaged  # not a byte cut or appended
    assert sorted(p.name for p in ledger.parent.iterdir()) == before


def test_zeros_after_a_finished_run_are_cut_kept_and_the_run_reported_as_is(runs, tmp_path,
                                                                           capsys, monkeypatch):
    ledger = _copy(runs, "finished", tmp_path)
    data = ledger.read_bytes()
    ledger.write_bytes(data + b"\x00" * 512)  # power loss after the last fsync: zero padding
    proc = _resume(ledger, capsys, monkeypatch)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["outcome"] == "DONE"
    assert ledger.read_bytes() == data  # nothing run again, nothing appended
    kept = ledger.parent / f"run.jsonl.torn-{len(data)}"
    assert kept.read_bytes() == b"\x00" * 512 and kept.name in proc.stderr


def test_a_torn_write_on_an_unfinished_run_is_cut_kept_and_resumed(runs, tmp_path, capsys,
                                                                    monkeypatch):
    """The write after the crash point cut short, as the engine leaves it (the mark beside the
    ledger names the records before it): resume cuts exactly that, keeps it in a side file the
    `resumed` record names, and ends like the undamaged run; `split`'s committed attempt is not
    run again, and the spend before the crash is all still there."""
    clean = _copy(runs, "unfinished", tmp_path / "clean")
    ledger = _copy(runs, "unfinished", tmp_path / "torn")
    before = records(ledger)
    torn = canonical({"type": "settle", "node": "count", "amount": 0.5})[:23]
    with ledger.open("ab") as f:
        f.write(torn)
    results = {}
    for name, path in (("clean", clean), ("torn", ledger)):
        proc = _resume(path, capsys, monkeypatch)
        assert proc.returncode == 0, proc.stderr
        results[name] = json.loads(proc.stdout)
    for name in ("outcome", "nodes"):
        assert results["torn"][name] == results["clean"][name]
    assert results["torn"]["outcome"] == "DONE"
    after = records(ledger)
    assert after[:len(before)] == before  # every complete record kept
    resumed = next(r for r in after if r["type"] == "resumed")
    assert (ledger.parent / resumed["torn_kept"]).read_bytes() == torn
    begins = [r["node"] for r in after if r["type"] == "begin"]
    assert begins.count("split") == 1  # the committed attempt was not run again
    spent_before = sum(r["amount"] for r in before if r["type"] == "settle")
    finish = next(r for r in after if r["type"] == "finish")
    assert finish["settled"] >= spent_before + resumed["reserved"] > 0
