"""The `pytest` judge kind: pinned tests laid over a scratch copy of the judged tree, run with a
pinned configuration and a pinned reporting plugin (engine/run/judge/pytest_harness.py).

Accept iff every test ID collected from the pinned tests alone (a collection run without the
judged tree, once per gate) is reported `passed`, no other ID is reported, and the two canary
tests the engine plants (one that must fail, one that must pass, under names drawn afresh each
run) come back as planted; a canary that comes back otherwise makes the verdict an error
("report forged"). Skipped, xfailed, missing or unexpected IDs are not a pass, and the exit code
of pytest is never read. The residual (code inside the test process can defeat a comparison made
there) is stated in the harness and in docs/gates.md.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopproof.engine.run.gate import ERROR, GateResult, TimedGate, judge_snapshot
from loopproof.engine.run.judge.calls import stream_facts
from loopproof.engine.run.judge.decide import decide
from loopproof.engine.run.judge.scratch import candidate_box, run_judged, scratch_copy
from loopproof.engine.run.judge.wire import NotStrict, read_stream, strict_json
from loopproof.engine.system.sandbox import Confinement
from loopproof.model.judging import NoResult

HARNESS = Path(__file__).with_name("pytest_harness.py").read_text(encoding="utf-8")
ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
CANARY = '''def test_{name}_must_pass():
    assert [1, 2] == [1, 2]


def test_{name}_must_fail():
    assert [1, 2] == [2, 1]
'''
INI = "[pytest]\naddopts =\nxfail_strict = false\npython_files = test_*.py *_test.py\n"


def pinned_tests(spec_dir: Path, tests: Sequence[str]) -> tuple[tuple[str, Path], ...]:
    """(name in the judged tree, absolute pinned file) for every file of `tests` (files or
    folders relative to the spec's folder); ValueError names what is wrong."""
    laid: dict[str, Path] = {}
    for t in tests:
        src = Path(t) if Path(t).is_absolute() else spec_dir / t
        src = Path(os.path.abspath(src))
        if src.is_file():
            pairs = [(src.name, src)]
        elif src.is_dir():
            pairs = sorted((f"{src.name}/{p.relative_to(src).as_posix()}", p)
                           for p in src.rglob("*") if p.is_file()
                           and "__pycache__" not in p.parts)
        else:
            raise ValueError(f"{src} is not a file or folder")
        for name, p in pairs:
            if name in laid:
                raise ValueError(f"two pinned tests would be laid at {name!r}")
            laid[name] = p
    if not laid:
        raise ValueError("names no test file")
    return tuple(sorted(laid.items()))


def lay(tree: Path, laid: Sequence[tuple[str, Path]], extra: dict[str, str]) -> None:
    """Lay the pinned files (and the engine's own `extra`) over `tree`, replacing what is
    there under the same names. A pinned folder replaces the tree's folder of that name whole,
    and the tree's root `__init__.py` goes: the judged code's `tests/__init__.py` (or a root one
    above a laid test file) would otherwise be imported as the pinned tests' package, in their
    process, even by a suite that never imports the judged code."""
    items = [(n, p.read_bytes()) for n, p in laid] + [(n, t.encode()) for n, t in extra.items()]
    names = {n for n, _ in items}
    for top in sorted({n.split("/", 1)[0] for n in names if "/" in n} | {"__init__.py"}):
        here = tree / top
        if top in names:
            continue
        if here.is_dir() and not here.is_symlink():
            shutil.rmtree(here)
        elif here.exists() or here.is_symlink():
            here.unlink()
    for name, data in items:
        target = tree / name
        for parent in [*reversed(target.relative_to(tree).parents)][1:]:
            here = tree / parent
            if here.is_symlink() or (here.exists() and not here.is_dir()):
                here.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        target.write_bytes(data)


def _args(tree: Path, ini: str, files: Sequence[str], collect: bool) -> list[str]:
    return ["-c", str(tree / ini), "--rootdir", str(tree), "--noconftest",
            "-p", "no:cacheprovider", "-q", "--tb=no", "-o", "console_output_style=classic",
            "--import-mode=importlib", *(["--collect-only"] if collect else []), *files]


def _path(tree: Path, files: Sequence[str]) -> list[str]:
    """What the harness appends to sys.path, after the standard library and site-packages (so
    no file of the judged tree stands in for a module they hold): the laid folders first (a
    pinned helper module beats a judged one of the same name), then the tree's root."""
    return [*(str(tree / f) for f in files if (tree / f).is_dir()), str(tree)]


@dataclass(frozen=True)
class PytestGate(TimedGate):
    """`kind = "pytest"`: the pinned `tests`, run over the judged tree."""

    python: str
    laid: tuple[tuple[str, Path], ...]
    timeout_s: float = 60.0
    collected: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def argv(self) -> tuple[str, ...]:
        return (self.python,)

    def hidden_files(self) -> tuple[Path, ...]:
        """What the judged code must never see: the pinned test files (they are laid over its
        tree as copies; the originals stay hidden)."""
        return tuple(p for _, p in self.laid)

    def pinned_files(self) -> tuple[Path, ...]:
        """The pinned tests and the interpreter."""
        return (*self.hidden_files(), Path(self.python))

    def judge(self, workspace: Path, confine: Confinement | None = None) -> GateResult:
        return judge_snapshot(workspace, self.timeout_s,
                              lambda snap, t: self.run(snap, t, confine))

    def _files(self) -> list[str]:
        """What pytest is given: the laid files and folders at the top of the tree."""
        return sorted({name.split("/", 1)[0] for name, _ in self.laid})

    def test_ids(self, timeout_s: float, confine: Confinement | None) -> list[str] | str:
        """The IDs the pinned tests alone collect (cached per gate), or why there are none."""
        if "ids" in self.collected:
            return self.collected["ids"]
        parent = Path(tempfile.mkdtemp(prefix="loopproof-collect-"))
        try:
            tree = parent / "tree"
            tree.mkdir()
            ini = f"loopproof-{secrets.token_hex(8)}.ini"
            lay(tree, self.laid, {ini: INI})
            job = {"args": _args(tree, ini, self._files(), True), "collect": True,
                   "path": _path(tree, self._files())}
            box = candidate_box(confine, self.hidden_files(), tree)
            ran = run_judged((self.python, "-I", "-c", HARNESS), tree, timeout_s, box,
                             json.dumps(job).encode(), ENV)
        finally:
            shutil.rmtree(parent, ignore_errors=True)
        if ran.result is None:
            return f"cannot start: {ran.problem}"
        rows = []
        for line in ran.result.stdout.splitlines():
            try:
                rows.append(strict_json(line))
            except NotStrict:
                return "the collection run wrote something else than its report"
        bad = [r["value"] for r in rows if r.get("case") == 1]
        ids = [r["value"] for r in rows if r.get("case") == 0]
        if bad or len(ids) != 1 or not ids[0]:
            said = ran.result.stream("stderr").text().strip().splitlines()
            why = bad[0] if bad else (f"no test collected ({said[-1][:200]})" if said
                                      else "no test collected")
            return f"the pinned tests do not collect on their own: {why}"
        self.collected["ids"] = list(ids[0])
        return self.collected["ids"]

    def run(self, snapshot: Path, timeout_s: float, confine: Confinement | None
            ) -> tuple[str, str, dict[str, Any]]:
        start = time.monotonic()
        ids = self.test_ids(timeout_s, confine)
        if isinstance(ids, str):
            return ERROR, f"pytest: {ids}", {"error": "cannot collect"}
        timeout_s -= time.monotonic() - start  # the first judgement also paid for the collection
        if timeout_s <= 0:
            return ERROR, "pytest: the collection of the pinned tests took the gate's whole " \
                          "time", {"error": "timeout"}
        name = secrets.token_hex(6)
        canary = f"test_lp_{name}.py"
        ini = f"loopproof-{name}.ini"
        must_pass = f"{canary}::test_{name}_must_pass"
        must_fail = f"{canary}::test_{name}_must_fail"
        with scratch_copy(snapshot) as tree:
            lay(tree, self.laid, {ini: INI, canary: CANARY.format(name=name)})
            # the canaries are collected with the pinned tests, after the judged code's import
            job = {"args": _args(tree, ini, [*self._files(), canary], False), "collect": False,
                   "path": _path(tree, self._files())}
            box = candidate_box(confine, self.hidden_files(), tree)
            ran = run_judged((self.python, "-I", "-c", HARNESS), tree, timeout_s, box,
                             json.dumps(job).encode(), ENV)
        if ran.result is None:
            return ERROR, f"pytest: cannot start: {ran.problem}", {"error": "cannot start"}
        res = ran.result
        canaries = {must_pass: "passed", must_fail: "failed"}
        stream = read_stream(res.stdout, [*ids, *canaries])
        notes = [f"results refused whole: {stream.garbled}"] if stream.garbled else []
        if res.killed:
            notes.append(f"pytest was killed ({res.killed}) after {timeout_s:g} s")
        reports = {k: stream.reports.get(k, NoResult("not reported")) for k in ids}
        reports.update({k: stream.reports[k] for k in canaries if k in stream.reports})
        return decide("pytest", dict.fromkeys(ids, "passed"), reports,
                      {**{k: k for k in ids}, must_pass: "the must-pass canary",
                       must_fail: "the must-fail canary"},
                      canaries=canaries, note="; ".join(notes), facts=stream_facts(res))
