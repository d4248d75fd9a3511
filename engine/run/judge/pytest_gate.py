"""The `pytest` judge kind: pinned tests laid over a scratch copy of the judged tree, run with a
pinned configuration and a pinned reporting plugin (engine/run/judge/pytest_harness.py), on the
judged code (engine/run/judge/pytest_tree.py says what of the tree loads and what does not).

Accept iff every test ID that must pass (`select`, else every ID collected from the pinned
tests alone, a collection run without the judged tree, once per gate, at run start, but those
the pinned tests' own skip, skipif and xfail marks excuse there) is reported `passed`, no other ID is reported, the two canary tests the engine plants (one that must fail,
one that must pass, under names drawn afresh each run) come back as planted, and the tests
imported the judged code from the judged tree (model/judging.py's rule: a run that did not is an
error, "the tests did not import the judged code", never a PASS). A canary that comes back
otherwise makes the verdict an error ("report forged"). Skipped, xfailed, timed-out, missing or
unexpected IDs are not a pass, and the exit code of pytest is never read. The residual (code
inside the test process can defeat a comparison made there) is stated in the harness and in
docs/gates.md.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loopproof.engine.run.gate import ERROR, GateResult, TimedGate, judge_snapshot
from loopproof.engine.run.judge.calls import stream_facts
from loopproof.engine.run.judge.decide import decide
from loopproof.engine.run.judge.pytest_tree import (
    FIX,
    PYCACHE,
    JudgedCode,
    judged_code,
    laid_folders,
    lay,
    lay_rewritten,
    pinned_conftests,
    rewritten_tests,
)
from loopproof.engine.run.judge.scratch import candidate_box, run_judged, scratch_copy
from loopproof.engine.run.judge.wire import (
    EXCUSED,
    IDS,
    LOADED,
    PROBLEM,
    TOOLS,
    NotStrict,
    read_stream,
    strict_json,
)
from loopproof.engine.system.errors import BadInput
from loopproof.engine.system.process import GATE_PATH
from loopproof.engine.system.sandbox import Confinement
from loopproof.model.judging import CodeLoads, NoResult, Returned

HARNESS = Path(__file__).with_name("pytest_harness.py").read_text(encoding="utf-8")
# A gate's collection under way, by the id of its cache: judgements that start together (the
# audit's reference and control, on a thread pool) wait for one collection instead of each
# making its own. Not a field of the gate: a gate is pickled to a Dask worker, a lock is not.
_COLLECTING: dict[int, threading.Lock] = {}
_COLLECTING_GUARD = threading.Lock()
ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
CANARY = '''def test_{name}_must_pass():
    assert [1, 2] == [1, 2]


def test_{name}_must_fail():
    assert [1, 2] == [2, 1]
'''
KEPT_MODULES = 500  # judged files named in a verdict's facts


def _args(tree: Path, ini: str, files: list[str], collect: bool) -> list[str]:
    return ["-c", str(tree / ini), "--rootdir", str(tree), "--confcutdir", str(tree),
            "-p", "no:cacheprovider", "-q", "--tb=no", "-o", "console_output_style=classic",
            "--import-mode=importlib", *(["--collect-only"] if collect else []), *files]


@dataclass(frozen=True)
class PytestGate(TimedGate):
    """`kind = "pytest"`: the pinned `tests`, run over the judged tree (the fields: table.py)."""

    python: str
    laid: tuple[tuple[str, Path], ...]
    timeout_s: float = 60.0
    code: Mapping[str, str] | None = None  # import name -> place in the tree; None: default
    select: tuple[str, ...] | None = None  # the IDs that must pass; None: every collected
    ini: str = ""  # the configuration pytest reads (pytest_config.engine_ini)
    ini_file: Path | None = None  # the gate's pinned ini it came from
    plugins: tuple[str, ...] = ()
    test_timeout_s: float = 30.0
    # the audit's runs: a reject is decided at the first test that does not pass, so the tests
    # after it are not run (the verdict is the same; engine/commands/_graph_loops.py)
    stop_at_failure: bool = False
    spec_path: str = ""  # the spec and the node, for a refusal at run start
    node: str = ""
    collected: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def argv(self) -> tuple[str, ...]:
        return (self.python,)

    def hidden_files(self) -> tuple[Path, ...]:
        """What the judged code must never see: the pinned test files and ini (they are laid
        over its tree as copies; the originals stay hidden)."""
        return (*(p for _, p in self.laid), *([self.ini_file] if self.ini_file else []))

    def pinned_files(self) -> tuple[Path, ...]:
        """The pinned tests, the ini and the interpreter."""
        return (*self.hidden_files(), Path(self.python))

    def judge(self, workspace: Path, confine: Confinement | None = None) -> GateResult:
        return judge_snapshot(workspace, self.timeout_s,
                              lambda snap, t: self.run(snap, t, confine))

    def _env(self) -> dict[str, str]:
        """The harness's variables: no plugin autoload, and the interpreter's own bin folder
        first on PATH, as an activated venv has it (a suite that runs the project's console
        script finds the one installed beside pytest; the judged tree is never on PATH)."""
        return {**ENV, "PATH": f"{os.path.dirname(self.python)}:{GATE_PATH}"}

    def _files(self) -> list[str]:
        """What pytest is given: the laid files and folders at the top of the tree."""
        return sorted({name.split("/", 1)[0] for name, _ in self.laid})

    def _job(self, tree: Path, ini: str, collect: bool, files: list[str]) -> dict[str, Any]:
        packages, others = laid_folders(self.laid)
        return {"args": _args(tree, ini, files, collect), "collect": collect,
                "tree": str(tree), "packages": {p: str(tree / p) for p in sorted(packages)},
                "path": [str(tree / f) for f in sorted(others)],
                "conftests": pinned_conftests(tree, self.laid), "plugins": list(self.plugins),
                "test_timeout": self.test_timeout_s or None,
                "stub": sorted(self.code) if self.code is not None else None,
                "tools": self.code is None}

    def check_start(self, confine: Confinement | None) -> None:
        """At run start: the pinned tests collect on their own and every `select` ID is among
        them; BadInput (exit 2, nothing written) otherwise."""
        where = f"node {self.node!r}, field 'gate.%s'"
        ids = self.test_ids(self.timeout_s, confine)
        if isinstance(ids, str):
            raise BadInput(self.spec_path, where % "tests", ids, "make the pinned tests collect "
                           "with the gate's python (its plugins installed and named in plugins)")
        missing = [i for i in self.select or () if i not in ids]
        if missing:
            raise BadInput(self.spec_path, where % "select", f"{missing[0]!r} is not collected "
                           f"from the pinned tests ({len(ids)} are, e.g. {ids[0]!r})",
                           "name test IDs as the pinned tests' collection gives them")

    def test_ids(self, timeout_s: float, confine: Confinement | None) -> list[str] | str:
        """The IDs the pinned tests alone collect (cached per gate, made once however many
        judgements ask at once), or why there are none."""
        if "ids" in self.collected:
            return self.collected["ids"]
        key = id(self.collected)
        with _COLLECTING_GUARD:
            lock = _COLLECTING.setdefault(key, threading.Lock())
        try:
            with lock:
                if "ids" in self.collected:  # collected by a judgement that asked first
                    return self.collected["ids"]
                return self._collect(timeout_s, confine)
        finally:
            with _COLLECTING_GUARD:
                _COLLECTING.pop(key, None)

    def _collect(self, timeout_s: float, confine: Confinement | None) -> list[str] | str:
        """One collection run of the pinned tests alone: its IDs (kept), or why there are
        none."""
        parent = Path(tempfile.mkdtemp(prefix="loopproof-collect-"))
        try:
            tree = parent / "tree"
            tree.mkdir()
            ini = f"loopproof-{secrets.token_hex(8)}.ini"
            lay(tree, self.laid, {ini: self.ini})
            job = {**self._job(tree, ini, True, self._files()), "pycache": str(tree / PYCACHE)}
            box = candidate_box(confine, self.hidden_files(), tree)
            ran = run_judged((self.python, "-I", "-c", HARNESS), tree, timeout_s, box,
                             json.dumps(job).encode(), self._env())
            rewritten = rewritten_tests(tree, self.laid)
        finally:
            shutil.rmtree(parent, ignore_errors=True)
        if ran.result is None:
            return f"cannot start {self.python}: {_without_harness(ran.problem)}"
        rows = []
        for line in ran.result.stdout.splitlines():
            try:
                rows.append(strict_json(line))
            except NotStrict:
                return "the collection run wrote something else than its report"
        bad = [r["value"] for r in rows if r.get("case") == PROBLEM]
        # the IDs come in parts (a line holds at most the wire's MAX_LINE); no judged code
        # runs in this collection, so every part is the harness's
        parts = [r["value"] for r in rows if r.get("case") == IDS]
        ids = [i for part in parts for i in part]
        excused = [i for r in rows if r.get("case") == EXCUSED for i in r["value"]]
        if bad or not ids:
            said = ran.result.stream("stderr").text().strip().splitlines()
            why = bad[0] if bad else (f"no test collected ({said[-1][:200]})" if said
                                      else "no test collected")
            return f"the pinned tests do not collect on their own: {why}"
        self.collected["excused"] = set(excused)
        self.collected["tools"] = {n for r in rows if r.get("case") == TOOLS for n in r["value"]}
        self.collected["ids"] = ids
        self.collected["rewritten"] = rewritten
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
        excused = self.collected.get("excused", set())
        must = list(self.select) if self.select is not None else [
            i for i in ids if i not in excused]
        unknown = [i for i in must if i not in ids]
        if unknown:
            return ERROR, f"pytest: {unknown[0]!r} of select is not collected from the pinned " \
                          "tests", {"error": "cannot collect"}
        name = secrets.token_hex(6)
        canary = f"test_lp_{name}.py"
        ini = f"loopproof-{name}.ini"
        must_pass = f"{canary}::test_{name}_must_pass"
        must_fail = f"{canary}::test_{name}_must_fail"
        canaries = {must_pass: "passed", must_fail: "failed"}
        with scratch_copy(snapshot) as tree:
            lay(tree, self.laid, {ini: self.ini, canary: CANARY.format(name=name)})
            lay_rewritten(tree, self.collected.get("rewritten", ()))
            laid_names = {n.split("/", 1)[0].removesuffix(".py") for n, _ in self.laid}
            # by default, no package of the tree is named like pytest, a plugin or what they need
            code = judged_code(tree, self.code, laid_names | self.collected.get("tools", set()))
            if isinstance(code, str):
                return ERROR, (f"pytest: cannot tell which packages of the tree are the judged "
                               f"code: {code}; fix: {FIX}"), {"error": "unclear tree"}
            expected = code.expected()  # before the judged code runs (it may change the tree)
            # the canaries are collected with the pinned tests, after the judged code's import
            job = {**self._job(tree, ini, False, [*self._files(), canary]),
                   "code": {n: str(p) for n, p in code.places.items()},
                   "select": must if self.select is not None or excused else None,
                   "keep": list(canaries), "stop_at_failure": self.stop_at_failure}
            box = candidate_box(confine, self.hidden_files(), tree)
            ran = run_judged((self.python, "-I", "-c", HARNESS), tree, timeout_s, box,
                             json.dumps(job).encode(), self._env())
            if ran.result is None:
                return ERROR, (f"pytest: cannot start {self.python}: "
                               f"{_without_harness(ran.problem)}"), {"error": "cannot start"}
            res = ran.result
            stream = read_stream(res.stdout, [*must, *canaries, LOADED])
            loads, facts = _loads(code, expected, stream.reports.get(LOADED), tree,
                                  {*self._files(), canary})
        notes = [f"results refused whole: {stream.garbled}"] if stream.garbled else []
        if self.select is None and excused:
            notes.append(f"{len(excused)} tests the pinned suite marks skip or xfail not asked")
        if res.killed:
            notes.append(f"pytest was killed ({res.killed}) after {timeout_s:g} s")
        cut = self.stop_at_failure and any(  # the harness stopped at a test that did not pass
            isinstance(r, Returned) and r.value != "passed"
            for r in (stream.reports.get(k) for k in must))
        unreported = NoResult("not run after a test that failed" if cut else "not reported")
        reports = {k: stream.reports.get(k, unreported) for k in must}
        reports.update({k: stream.reports[k] for k in canaries if k in stream.reports})
        return decide("pytest", dict.fromkeys(must, "passed"), reports,
                      {**{k: k for k in must}, must_pass: "the must-pass canary",
                       must_fail: "the must-fail canary"},
                      canaries=canaries, note="; ".join(notes),
                      facts={**stream_facts(res), **facts}, code=loads, shown=True)


def _without_harness(problem: str) -> str:
    """Why the sandbox could not start the harness, without the harness's text (its argv)."""
    head, sep, tail = problem.partition("['")
    return f"{head}[...]{tail.rsplit(']', 1)[-1]}" if sep and "]" in tail else problem[:500]


def _loads(code: JudgedCode, expected: dict[str, str], report: Any, tree: Path, laid: set[str]
           ) -> tuple[CodeLoads, dict[str, Any]]:
    """The model's view of what the run imported (`CodeLoads`) and the verdict's facts: `code`,
    where each judged name was loaded from (tree-relative, or the outside path), and `loaded`,
    every judged file of the tree the run loaded (what lies in `laid`, the laid files and
    folders and the canary, left out)."""
    value = getattr(report, "value", None)
    ok = (type(value) is dict and type(value.get("code")) is dict
          and type(value.get("modules")) is dict and type(value.get("outside")) is dict
          and all(v is None or type(v) is str for v in value["code"].values())
          and all(type(v) is str for v in [*value["modules"].values(),
                                           *value["outside"].values()]))
    if not ok:
        return CodeLoads(expected, None, code.each), {}
    assert isinstance(value, dict)
    root = f"{tree}/"

    def shown(path: str | None) -> str | None:
        return path[len(root):] if path is not None and path.startswith(root) else path

    files = sorted(f for f in {shown(f) for f in value["modules"].values()} - {None}
                   if f not in laid and f.split("/", 1)[0] not in laid)
    loaded = {name: value["code"].get(name) for name in code.places}
    return CodeLoads(expected, loaded, code.each, dict(value["outside"])), {
        "code": {name: shown(f) for name, f in loaded.items()},
        "loaded": files[:KEPT_MODULES]}
