"""The `pytest` judge kind red-teamed as a hostile worker would (issue 35): trees that fail the
pinned tests and try to end accepted without the judged code defeating a comparison in the
test's process (that is the residual docs/gates.md states), and honest trees the gate must not
reject. Each test says what the attack did before its fix.
"""

from __future__ import annotations

import importlib.machinery
import py_compile
from pathlib import Path

import pytest

from loopproof.engine.run.gate import GateResult
from loopproof.engine.run.judge.scratch import scratch_copy
from loopproof.model.judging import CodeLoads, not_imported
from tests.support.pytest_gates import Gate, installed_python

TEST_ADD = '''from mypkg.calc import add


def test_add():
    assert add(1, 2) == 3
'''
RIGHT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"


def tree(calc: str) -> dict[str, str]:
    return {"src/mypkg/__init__.py": "", "src/mypkg/calc.py": calc}


# a pytest hook that says "passed" for every test but the engine's canaries (test_lp_*.py),
# injected into the pinned conftest that imported this module
STAND_IN = '''import sys

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if "test_lp_" not in item.nodeid:
        outcome.get_result().outcome = "passed"


sys.modules["tests.conftest"].pytest_runtest_makereport = pytest_runtest_makereport
'''


# tests of an optional dependency that is not installed: skipped at import, or by a mark
TEST_OPTIONAL = '''import pytest

from tests.conftest import json

lp_not_installed = pytest.importorskip("lp_not_installed")


def test_optional():
    assert lp_not_installed.speed_up(json) is not None
'''
TEST_MARKED = '''import pytest

from tests.conftest import json


@pytest.mark.skipif(json.__name__ != "lp_fastjson", reason="no lp_fastjson")
def test_marked():
    assert json.dumps(1) == "1"


def test_plain():
    assert json.dumps(1) == "1"
'''


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Gate:
    """A tests package whose conftest tries an optional speed-up it falls back from, as real
    suites do (`try: import simplejson as json`), tests skipped without it, and one test of the
    judged code."""
    return Gate(tmp_path_factory.mktemp("suite"), {
        "tests/__init__.py": "",
        "tests/conftest.py": "try:\n    import lp_fastjson as json\nexcept ImportError:\n"
                             "    import json\n",
        "tests/test_add.py": TEST_ADD, "tests/test_optional.py": TEST_OPTIONAL,
        "tests/test_marked.py": TEST_MARKED})


def rejected(result: GateResult) -> bool:
    return result.verdict == "reject" and "tests/test_add.py::test_add" in result.detail


def test_an_honest_tree_passes_and_a_wrong_one_fails(suite: Gate) -> None:
    """The suite skips what needs an optional module that is not installed, at import
    (`pytest.importorskip`) or by a mark whose condition asks for it. Before the fix the
    collection of the pinned tests alone gave every missing module a stub, so neither skip held
    there, the skipped tests were asked, and the right tree was rejected
    ("tests/test_optional.py::test_optional (not reported), tests/test_marked.py::test_marked
    (skipped)"). With `code` declared, only the judged names get a stub: a missing module is
    missing in both runs alike."""
    result = suite.judge("right", tree(RIGHT))
    assert result.verdict == "accept", result.detail
    assert result.facts["cases"] == 2  # test_add and test_plain
    assert rejected(suite.judge("wrong", tree(WRONG)))


def test_bytecode_in_the_tree_is_not_what_runs(suite: Gate) -> None:
    """The tree's source is wrong; beside it, an unchecked-hash .pyc compiled from the right
    source (Python loads one without looking at the source), and a sourceless `calc.pyc` in
    another tree. Before the fix both were accepted ("all 1 cases match"): the tests judged
    bytecode that no reader of the tree, nor the audit's mutants, ever see."""
    hashed = suite.root / "hashed"
    for rel, text in tree(RIGHT).items():
        (hashed / rel).parent.mkdir(parents=True, exist_ok=True)
        (hashed / rel).write_text(text)
    py_compile.compile(str(hashed / "src/mypkg/calc.py"), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    (hashed / "src/mypkg/calc.py").write_text(WRONG)
    assert rejected(suite.gate.judge(hashed, suite.box))
    sourceless = suite.root / "sourceless"
    (sourceless / "src/mypkg").mkdir(parents=True)
    (sourceless / "src/mypkg/__init__.py").write_text("")
    (sourceless / "right.py").write_text(RIGHT)
    py_compile.compile(str(sourceless / "right.py"), str(sourceless / "src/mypkg/calc.pyc"),
                       doraise=True)
    (sourceless / "right.py").unlink()
    assert rejected(suite.gate.judge(sourceless, suite.box))


def test_an_extension_module_beside_a_source_is_not_what_runs(tmp_path: Path) -> None:
    """A compiled `calc.cpython-311-x86_64-linux-gnu.so` beside a wrong `calc.py` is what
    Python imports (extension loaders come first): by hand, with one built by gcc from a right
    `add`, the wrong tree was accepted before the fix ("all 1 cases match", loaded
    `src/mypkg/calc.cpython-311-x86_64-linux-gnu.so`). Here, without a compiler, the copy the
    judged code runs in: no extension module beside a source of its name, no bytecode; an
    extension with no source beside it (a project's C code) stays."""
    snap = tmp_path / "snap" / "src" / "mypkg"
    snap.mkdir(parents=True)
    names = ["calc.py", "__init__.py", "_speedups.abi3.so", "mod.pyc", "__pycache__/calc.pyc",
             *(f"calc{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES),
             "__init__.cpython-311-x86_64-linux-gnu.so"]
    for name in names:
        (snap / name).parent.mkdir(exist_ok=True)
        (snap / name).write_bytes(b"\x7fELF")
    with scratch_copy(tmp_path / "snap") as tree:
        kept = sorted(p.name for p in (tree / "src" / "mypkg").iterdir())
    assert kept == ["__init__.py", "_speedups.abi3.so", "calc.py"]


def test_a_module_of_the_tree_is_no_stand_in_for_one_that_is_not_installed(suite: Gate) -> None:
    """The pinned conftest's optional `import lp_fastjson` (not installed) found the tree's
    `lp_fastjson.py` at its root (the root was last on sys.path), a module that is not the
    judged code, which hooked the report before any test ran: before the fix the wrong tree
    was accepted ("all 1 cases match")."""
    assert rejected(suite.judge("stand-in", {**tree(WRONG), "lp_fastjson.py": STAND_IN}))


# the results channel: the harness's private copy of fd 1, found among the open descriptors
FORGE_FD = '''import json
import os

for fd in map(int, os.listdir("/proc/self/fd")):
    try:
        os.write(fd, json.dumps({"case": "tests/test_add.py::test_add", "value": "passed"})
                 .encode() + b"\\n")
    except OSError:
        pass
'''
CARELESS = {
    "exit-at-import": {"src/mypkg/__init__.py": "import os\nos._exit(0)\n"},
    "forged-line-on-every-fd": {"src/mypkg/__init__.py": FORGE_FD},
    # the hook, in every module a test run imports at start-up, named like it, at the root
    "named-like-the-tooling": {f"{name}.py": STAND_IN for name in (
        "pytest", "_pytest", "pluggy", "py", "hypothesis", "json", "os", "unittest", "tests",
        "sitecustomize", "usercustomize", "conftest")},
}


@pytest.mark.parametrize("payload", sorted(CARELESS))
def test_a_careless_payload_in_the_judged_code_is_not_a_pass(suite: Gate, payload: str) -> None:
    """The judged package, imported by the tests, ends the process at import, or writes a
    "passed" line for the pinned test on every descriptor it has (the results channel among
    them): no report, or the same case twice, is never a pass. Or the tree's root holds a
    report hook named like pytest, its plugins, the standard library or the tests: none
    loads."""
    result = suite.judge(f"careless-{payload}", {**tree(WRONG), **CARELESS[payload]})
    assert result.verdict in ("reject", "error"), result.detail


def test_a_right_tree_that_prints_a_lot_passes(suite: Gate) -> None:
    """Not an attack: 40 MB on stdout (the gate keeps 16 MB of a stream) is no failure."""
    loud = "import sys\nsys.stdout.write('x' * (40 << 20))\n"
    result = suite.judge("loud", {**tree(RIGHT), "src/mypkg/__init__.py": loud})
    assert result.verdict == "accept", result.detail


def test_a_large_suite_is_judged(tmp_path) -> None:
    """Not an attack: a real suite of thousands of parametrised tests has megabytes of IDs (about
    1.2 MB of them here, from 30 tests). Before the fix the collection sent all IDs on one
    line, past the wire's 1 MiB a line, and the gate could not start ("the collection run wrote
    something else than its report")."""
    many = ("import pytest\n\nfrom mypkg.calc import add\n\n\n@pytest.mark.parametrize('i', "
            "range(30), ids=lambda i: f'{i:04d}' + 'x' * 40000)\ndef test_many(i):\n"
            "    assert add(i, 1) == i + 1\n")
    gate = Gate(tmp_path, {"tests/test_many.py": many})
    result = gate.judge("right", tree(RIGHT))
    assert result.verdict == "accept", result.detail
    assert result.facts["cases"] == 30


def test_a_tree_that_loads_many_modules_is_judged(suite: Gate) -> None:
    """Not an attack: a judged package that loads thousands of modules with long paths (as a
    large project does; registered here without their files, to be quick). Before the fix the
    report of what was loaded exceeded the wire's 1 MiB a line and the right tree was rejected
    ("results refused whole: ... longer than 1048576 bytes")."""
    many = ("import sys, types\n\nfor i in range(6000):\n"
            "    m = types.ModuleType(f'mypkg.m{i:05d}' + 'y' * 100)\n"
            "    m.__file__ = __file__[:-len('__init__.py')] + m.__name__ + '.py'\n"
            "    sys.modules[m.__name__] = m\n")
    result = suite.judge("many-modules", {**tree(RIGHT), "src/mypkg/__init__.py": many})
    assert result.verdict == "accept", result.detail
    assert result.facts["code"] == {"mypkg": "src/mypkg/__init__.py"}


def test_a_tree_package_is_no_stand_in_for_an_installed_test_dependency(tmp_path) -> None:
    """Without `code`, the tree's top-level packages are the judged code, placed ahead of
    anything installed. A tree that ships its own `hypothesis/` (whose `given` makes a property
    test a no-op) stood in for the installed hypothesis the pinned test imports: before the fix
    the wrong tree was accepted ("all 1 cases match"). The default now leaves out the names of
    pytest, the installed pytest plugins and what they depend on."""
    prop = ("from hypothesis import given, strategies as st\n\nfrom calc import add\n\n\n"
            "@given(st.integers())\ndef test_add_one(x):\n    assert add(x, 1) == x + 1\n")
    gate = Gate(tmp_path, {"tests/test_prop.py": prop}, table="")
    right = gate.judge("right", {"calc.py": RIGHT})
    assert right.verdict == "accept", right.detail
    fake = ("import types\n\n\ndef given(*a, **k):\n    return lambda f: (lambda: None)\n\n\n"
            "strategies = types.SimpleNamespace(integers=lambda: None)\n")
    result = gate.judge("stand-in", {"calc.py": WRONG, "hypothesis/__init__.py": fake})
    assert result.verdict == "reject", result.detail
    assert result.facts["code"] == {"calc": "calc.py"}


# the judged package's __init__.py points its __path__ at the installed copy's folder: every
# submodule (mypkg.calc) then comes from the installation, the package itself from the tree
REEXPORT = '''import importlib.machinery
import sys

_spec = importlib.machinery.PathFinder.find_spec(
    __name__, [p for p in sys.path if "site-packages" in p])
__path__[:] = list(_spec.submodule_search_locations)
'''


def test_a_package_that_re_exports_the_installed_copy_is_not_judged(tmp_path: Path) -> None:
    """The gate's interpreter has the (right) project installed, as it usually does. The
    tree's calc.py is wrong, and its `__init__.py` sends every submodule import to the
    installed copy. Before the fix: accepted ("all 1 cases match"; `mypkg` itself was loaded
    from the tree, which was all the vacuity rule asked). Now any module loaded from an
    installed copy of the judged code makes the run vacuous (model/judging.py); a first version of the fix, any module under a judged name loaded from outside the tree,
    rejected the honest alias below ("mypkg.json was imported from .../json/__init__.py")."""
    python, _ = installed_python(tmp_path / "venv", {"mypkg/__init__.py": "",
                                                     "mypkg/calc.py": RIGHT})
    gate = Gate(tmp_path, {"tests/test_add.py": TEST_ADD}, python=str(python))
    # an honest package may alias installed modules under its name (requests.packages does
    # `sys.modules["requests.packages.urllib3"] = urllib3`): that is no installed copy of it
    alias = "import json\nimport sys\n\nsys.modules[__name__ + '.json'] = json\n"
    right = gate.judge("right", {**tree(RIGHT), "src/mypkg/__init__.py": alias})
    assert right.verdict == "accept", right.detail
    result = gate.judge("re-export", {**tree(WRONG), "src/mypkg/__init__.py": REEXPORT})
    assert result.verdict == "error", result.detail
    assert "did not import the judged code: mypkg.calc was imported from" in result.detail
    assert "an installed copy of the judged code" in result.detail
    assert not_imported(CodeLoads({"m": "m/__init__.py"}, {"m": "m/__init__.py"}, True,
                                  {"m.calc": "/site/m/calc.py"}))
    # the residual's extent (docs/gates.md): a module of the tree that runs the installed
    # copy's source as its own is the judged code; the load report sees the tree's file
    run_installed = ("import sys\n\nfor _p in sys.path:\n    if 'site-packages' in _p:\n"
                     "        try:\n            exec(open(_p + '/mypkg/calc.py').read())\n"
                     "            break\n        except OSError:\n            pass\n")
    result = gate.judge("exec-installed", tree(run_installed))
    assert result.verdict == "accept", result.detail
