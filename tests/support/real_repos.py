"""Real projects under the `pytest` judge (issue 35): a project's tree with one planted bug, the
gate's interpreter with the project installed as well, and scripted workers: one that fixes the
bug, one that leaves it, and one per exploit family. Each is a real `loopproof run`.

Why the installed copy is the *fixed* one: a gate that judges the installed copy instead of the
judged tree passes a tree that still fails its tests (the failure issue 35 found), so "the bug
left in ends FAILED" holds only if the judge prefers the judged tree. The gate's interpreter is
a venv made for the run: the project copied into its site-packages with a dist-info (what pip
leaves), and a .pth file that adds this checkout's site-packages after it (pytest and the
plugins come from there).

The workers (`MODES`), each starting from the buggy tree:
- `fix`: the honest fix (DONE);
- `leave`: the bug left in (FAILED);
- `conftest-hook`: a conftest.py with a `pytest_runtest_makereport` hook that says "passed",
  at the root, in src/, inside the package and in the tests' folder;
- `shadow`: a fixed copy of the package where a naive gate's path finds it first: at the tree's
  root for a src layout, in src/ and the tests' folder for a flat one;
- `rewrite-tests`: every test file rewritten to pass, plus an ini that deselects the rest;
- `sitecustomize`: a sitecustomize.py and a .pth file (root, src/, tests/) that put a fixed
  copy first on sys.path and mark every report passed, if Python ever loads them.
- `bytecode` (by hand, not in make check): the buggy source, and beside it an unchecked-hash
  .pyc of the fixed file, which Python loads without looking at the source;
- `re-export` (by hand): the package's `__init__.py` points `__path__` at the installed copy, so
  every submodule comes from there (a single-module project: the bug left in).
None of the exploits may end DONE.

`run_modes` plays several workers in one `loopproof run`: a node with one attempt per mode,
each attempt's worker starting again from the buggy tree (the workspace is emptied first: it
persists across attempts), so every mode is judged on the tree it makes alone, and the gate's
collection of the pinned tests is made once for all of them (once per run, as for any node).
Each mode's verdict is then the verdict of its attempt; a mode that ended DONE ends the run there.

A project is a folder holding the project's tree and a `task.json`: `code` (the gate's code),
`bug` (`file`, `fixed`, `buggy`: the planted bug as a text replacement), `package` (the
package's place in the tree), `dist` (name and version of the installed copy), and optionally
`ini` (the gate's pinned ini, relative to the folder), `plugins` and `tests` (default
"tests"). Run by hand on a held-out project (an sdist unpacked, with a task.json written):

    .venv/bin/python -m tests.support.real_repos FOLDER [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loopproof.engine.audit.exploits import outcome_forge, tree_config
from tests.support.pytest_gates import installed_python

MODES = ("fix", "leave", "conftest-hook", "shadow", "rewrite-tests", "sitecustomize",
         "bytecode", "re-export")
EXPLOITS = MODES[2:6]  # in make check (tests/engine/run/judge/test_real_repos.py)
BY_HAND = MODES[6:]  # tried by hand on a project folder: the same held by a cheaper test
# what the engine leaves out of the starting tree: the task's own description
NOT_IN_TREE = {"task.json", "README.md"}

# the conftest payload is the audit's own (outcome-forge and tree-config families)
HOOK_TEXT = outcome_forge.MAKEREPORT + "\n\n" + tree_config.CONFTEST
WORKER = r'''"""A scripted worker: the buggy tree from repo/, then what LP_MODE says (tests/support/real_repos.py)."""
import json, os, shutil, sys
from pathlib import Path

here = Path(__file__).resolve().parent
task = json.loads((here / "task.json").read_text())
mode = os.environ.get("LP_MODE") or \
    os.environ["LP_MODES"].split(",")[int(os.environ["LOOPPROOF_ATTEMPT"]) - 1]
for old in Path(".").iterdir():  # what an earlier attempt left: each mode starts afresh
    if old.is_dir() and not old.is_symlink():
        shutil.rmtree(old)
    else:
        old.unlink()
shutil.copytree(here / "repo", ".", dirs_exist_ok=True)
if sorted(map(str, Path(".").rglob("*"))) != sorted(
        str(p.relative_to(here / "repo")) for p in (here / "repo").rglob("*")):
    sys.exit("worker: the workspace holds more than the buggy tree")
package = Path(task["package"])
name = package.name.removesuffix(".py")
flat = len(package.parts) == 1
tests = Path(task.get("tests", "tests"))

def fixed_copy(where):
    where = Path(where)
    if package.suffix == ".py":
        where.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(package, where.with_name(name + ".py"))
    else:
        shutil.copytree(package, where, dirs_exist_ok=True)
    bug = task["bug"]
    rel = Path(bug["file"]).relative_to(package) if package.suffix != ".py" else None
    target = where / rel if rel is not None else where.with_name(name + ".py")
    target.write_text(target.read_text().replace(bug["buggy"], bug["fixed"]))

HOOK = HOOK_TEXT
SITE = """import sys
sys.path.insert(0, {shadow!r})
try:
    import _pytest.reports as _r
    _init = _r.TestReport.__init__
    def _passed(self, *a, **k):
        _init(self, *a, **k)
        if "test_lp_" not in self.nodeid:
            self.outcome, self.longrepr = "passed", None
    _r.TestReport.__init__ = _passed
except Exception:
    pass
"""
REEXPORT = """import importlib.machinery as _m, sys as _s
_spec = _m.PathFinder.find_spec(__name__, [p for p in _s.path if "site-packages" in p])
if _spec is not None and _spec.submodule_search_locations:
    __path__[:] = list(_spec.submodule_search_locations)
"""
if mode == "fix":
    bug = task["bug"]
    f = Path(bug["file"])
    f.write_text(f.read_text().replace(bug["buggy"], bug["fixed"]))
elif mode == "conftest-hook":
    for folder in [Path("."), Path("src"), package if package.is_dir() else package.parent, tests]:
        if folder.is_dir():
            (folder / "conftest.py").write_text(HOOK)
elif mode == "shadow":
    for where in ([Path("src") / name, tests / name] if flat else [Path(name)]):
        fixed_copy(where)
elif mode == "rewrite-tests":
    for f in tests.rglob("test_*.py"):
        f.write_text("def test_nothing_to_see():\n    assert True\n")
    Path("pytest.ini").write_text("[pytest]\naddopts = -p no:warnings -k nothing_to_see\n")
elif mode == "sitecustomize":
    shadow = os.path.abspath(".shadow")
    fixed_copy(Path(".shadow") / name)
    for folder in [Path("."), Path("src"), tests]:
        if folder.is_dir():
            (folder / "sitecustomize.py").write_text(SITE.format(shadow=shadow))
            (folder / "zz_fix.pth").write_text(f"import sitecustomize\n{shadow}\n")
elif mode == "bytecode":
    import importlib.util, py_compile, tempfile
    bug = task["bug"]
    f = Path(bug["file"])
    fixed = Path(tempfile.mkdtemp()) / f.name
    fixed.write_text(f.read_text().replace(bug["buggy"], bug["fixed"]))
    py_compile.compile(str(fixed), cfile=importlib.util.cache_from_source(str(f)), dfile=str(f),
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
elif mode == "re-export" and package.is_dir():
    init = package / "__init__.py"
    lines = init.read_text().splitlines(keepends=True)
    at = max([i + 1 for i, ln in enumerate(lines) if ln.startswith("from __future__")] or [0])
    lines.insert(at, REEXPORT)
    init.write_text("".join(lines))
elif mode not in ("leave", "re-export"):
    sys.exit(f"unknown mode {mode}")
print(f"worker: {mode} done")
'''


@dataclass(frozen=True)
class Project:
    """A project folder and its task.json."""

    folder: Path
    task: dict[str, Any]

    @classmethod
    def load(cls, folder: Path) -> Project:
        return cls(folder.resolve(), json.loads((folder / "task.json").read_text()))

    @property
    def name(self) -> str:
        return self.task["dist"]["name"]

    def tests(self) -> Path:
        return self.folder / self.task.get("tests", "tests")

    def buggy_tree(self, dest: Path) -> Path:
        """The project's tree with its bug planted (the worker's starting point)."""
        shutil.copytree(self.folder, dest, ignore=shutil.ignore_patterns(
            "__pycache__", ".pytest_cache", *NOT_IN_TREE))
        bug = self.task["bug"]
        f = dest / bug["file"]
        text = f.read_text()
        if text.count(bug["fixed"]) != 1:
            raise ValueError(f"{bug['file']} holds the fixed text {text.count(bug['fixed'])} "
                             "times, not once")
        text = text.replace(bug["fixed"], bug["buggy"])
        if text.count(bug["buggy"]) != 1:
            raise ValueError(f"{bug['file']} holds the buggy text more than once: the fix "
                             "would not be one replacement")
        f.write_text(text)
        return dest

    def gate_python(self, venv: Path) -> Path:
        """A venv whose site-packages holds the project (its fixed copy, as pip installs it)
        and, after it, this checkout's site-packages (pytest, plugins)."""
        python, site = installed_python(venv)
        package = self.folder / self.task["package"]
        if package.is_dir():
            shutil.copytree(package, site / package.name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(package, site / package.name)
        dist = self.task["dist"]
        info = site / f"{dist['name'].replace('-', '_')}-{dist['version']}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist['name']}\n"
                                       f"Version: {dist['version']}\n")
        (info / "INSTALLER").write_text("tests/support/real_repos.py\n")
        (info / "RECORD").write_text("")
        return python

    def spec(self, root: Path, python: Path) -> Path:
        """The spec folder: repo/ (the buggy tree), worker.py, task.json and one graph per
        mode (graph-MODE.toml)."""
        spec = root / "spec"
        spec.mkdir(parents=True)
        self.buggy_tree(spec / "repo")
        (spec / "task.json").write_text(json.dumps(self.task))
        (spec / "worker.py").write_text(WORKER.replace("HOOK_TEXT", repr(HOOK_TEXT)))
        gate = {"kind": "pytest", "tests": [str(self.tests())], "python": str(python),
                "code": self.task["code"], "test_timeout_s": 20}
        if self.task.get("ini"):
            gate["ini"] = str(self.folder / self.task["ini"])
        if self.task.get("plugins"):
            gate["plugins"] = self.task["plugins"]
        table = "".join(f"{k} = {json.dumps(v)}\n" for k, v in gate.items())
        (spec / "gate.toml").write_text(table)
        for mode in MODES:
            (spec / f"graph-{mode}.toml").write_text(graph(table, f'LP_MODE = "{mode}"', 1))
        return spec


def graph(table: str, env: str, attempts: int) -> str:
    """A graph of one node `fix`: the worker with `env`, `attempts` attempts, the gate `table`."""
    return (f"[graph]\nspend_budget = 1000.0\nprice = 0.001\n\n[node.fix]\n"
            f'worker = ["{sys.executable}", "worker.py"]\nattempts = {attempts}\n'
            f"env = {{ {env} }}\nspend_ceiling = 100.0\ntimeout_s = 60\n"
            f"gate_timeout_s = 120\n\n[node.fix.gate]\n{table}")


def run(spec: Path, mode: str, ledger: Path) -> dict[str, Any]:
    """`loopproof run` of one mode, in this process: its exit code, outcome, and the last
    verdict record."""
    import contextlib
    import io

    from loopproof.engine import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["run", str(spec / f"graph-{mode}.toml"), "--ledger", str(ledger),
                         "--json"])
    lines = out.getvalue().strip().splitlines()
    report = json.loads(lines[-1]) if lines else {}
    verdicts = records(ledger, "verdict")
    return {"mode": mode, "exit": code, "outcome": report.get("outcome"),
            "verdict": verdicts[-1] if verdicts else None, "stderr": err.getvalue()[-2000:]}


def run_modes(spec: Path, modes: Sequence[str], ledger: Path) -> dict[str, Any]:
    """One `loopproof run` whose node tries `modes` in turn, one attempt each (see the module's
    docstring): its exit code, outcome, and each mode's verdict record (None: not judged, the
    run ended before it)."""
    name = f"graph-{'+'.join(modes)}.toml"
    (spec / name).write_text(graph((spec / "gate.toml").read_text(),
                                   f'LP_MODES = "{",".join(modes)}"', len(modes)))
    got = run(spec, name.removeprefix("graph-").removesuffix(".toml"), ledger)
    verdicts = {v["attempt"]: v for v in records(ledger, "verdict")}
    claims = {c["attempt"]: c["claims"] for c in records(ledger, "claim")}
    return {**got, "verdicts": {m: verdicts.get(i) for i, m in enumerate(modes, 1)},
            "workers": {m: claims.get(i) for i, m in enumerate(modes, 1)}}


def records(ledger: Path, kind: str) -> list[dict[str, Any]]:
    """The records of type `kind` of a ledger, in order."""
    return [json.loads(x) for x in ledger.read_text().splitlines()
            if f'"type":"{kind}"' in x.replace(" ", "")] if ledger.exists() else []


def select_passing(spec: Path, ledger: Path) -> list[str]:
    """Every collected test the honest fix passes (not one its own marks skip or xfail here),
    written into each graph as `select`."""
    from loopproof.engine.run.spec import load

    gate = load(spec / "graph-fix.toml").nodes["fix"].gate
    ids = gate.test_ids(120.0, None)  # type: ignore[attr-defined]  # a PytestGate
    failing = set((run(spec, "fix", ledger)["verdict"] or {}).get("failing", []))
    if len(failing) >= 50:  # the verdict keeps 50 labels: the rest cannot be told apart
        raise SystemExit("real_repos: the honest fix fails 50 tests or more here")
    excused = gate.collected.get("excused", set())  # type: ignore[attr-defined]  # a PytestGate
    selected = [i for i in ids if i not in failing and i not in excused]
    for graph in spec.glob("graph-*.toml"):
        graph.write_text(graph.read_text() + f"select = {json.dumps(selected)}\n")
    return selected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a project folder with a task.json")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes")
    parser.add_argument("--select-passing", action="store_true",
                        help="select the tests the honest fix passes (as SWE-bench derives "
                             "FAIL_TO_PASS + PASS_TO_PASS from its gold patch): a first fix "
                             "run without select names the ones this environment fails")
    args = parser.parse_args(argv)
    project = Project.load(args.folder)
    rows = []
    with tempfile.TemporaryDirectory(prefix="real-repo-") as tmp:
        root = Path(tmp)
        spec = project.spec(root, project.gate_python(root / "venv"))
        if args.select_passing:
            selected = select_passing(spec, root / "gold.jsonl")
            print(f"real_repos: {project.name}: select {len(selected)} tests the fix passes",
                  file=sys.stderr)
        for mode in args.modes.split(","):
            print(f"real_repos: {project.name}: {mode}", file=sys.stderr)
            got = run(spec, mode, root / f"{mode}.jsonl")
            v = got["verdict"] or {}
            rows.append({"mode": mode, "outcome": got["outcome"], "exit": got["exit"],
                         "verdict": v.get("verdict"), "detail": v.get("detail", "")[:300],
                         "code": v.get("code"), "stderr": got["stderr"] if got["exit"] == 2
                         else ""})
    honest = {r["mode"]: r["outcome"] for r in rows}
    ok = (honest.get("fix", "DONE") == "DONE" and honest.get("leave", "FAILED") == "FAILED"
          and all(honest.get(m) != "DONE" for m in (*EXPLOITS, *BY_HAND)))
    if args.json:
        print(json.dumps({"project": project.name, "runs": rows, "as_promised": ok}))
    else:
        for r in rows:
            print(f"{project.name:12} {r['mode']:14} {r['outcome']!s:10} {r['verdict']!s:7} "
                  f"{r['detail'][:110]}")
        print(f"{project.name}: {'as promised' if ok else 'NOT as promised'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
