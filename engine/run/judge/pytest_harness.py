"""The `pytest` harness: runs pytest inside the candidate's sandbox with a pinned configuration
and a pinned reporting plugin. Standard library and pytest only.

The engine starts it as `python -I -c <this file's text>` in a scratch copy of the judged tree
with the pinned tests laid over it, and writes the job on stdin: `{"args": [...], "collect":
bool, "path": [...]}`. It keeps a private copy of stdout as the results channel, points fd 1 at
stderr, and runs `pytest.main(args, plugins=[Report(...)])`; the engine's args pin the
configuration file and the rootdir, turn off conftest files and the cache (`--noconftest`, `-p
no:cacheprovider`) and import the tests by path (`--import-mode=importlib`: pytest puts no test
folder first on sys.path); `path` (the laid folders, then the tree's root) is appended to
sys.path, after the standard library and site-packages, so no file of the judged tree stands in
for a module those hold (a judged `difflib.py` is not the difflib a pinned test imports). The
environment has no PYTEST_* variable but PYTEST_DISABLE_PLUGIN_AUTOLOAD=1, so no plugin of the
tree or of the installation is loaded.

Each test's outcome (setup, call and teardown together: "passed", "failed", "skipped",
"xfailed", "xpassed", "error") is written as `{"case": NODEID, "value": OUTCOME}` when the test
ends. With `collect`, it writes the collected test IDs once, `{"case": 0, "value": [IDS]}`, and
any module the tests import that is not installed is given as a stub (the judged tree is not
there: the IDs are those of the pinned tests alone).

The residual: the judged code runs in this process, so it can still defeat what is decided
here (an object equal to everything inside a test's `assert`, a hook that rewrites outcomes
selectively). The engine's canaries catch a report forged wholesale; nothing here can catch one
forged with care. The `calls` and `program` kinds have no such residual.
"""

import importlib.abc
import importlib.machinery
import json
import os
import sys
import types


def stubs():
    """A finder, last in line, that makes any module no other finder has a stub."""

    class Stub:
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Stub()

        def __call__(self, *args, **kwargs):
            return Stub()

        def __iter__(self):
            return iter(())

    class StubModule(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Stub()

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)

        def create_module(self, spec):
            module = StubModule(spec.name)
            module.__path__ = []
            return module

        def exec_module(self, module):
            pass

    sys.meta_path.append(Finder())


def main():
    job = json.loads(sys.stdin.buffer.read())
    results = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.stdin = open(os.devnull)  # noqa: SIM115 (the process's stdin, open until it ends)
    sys.dont_write_bytecode = True
    dumps = json.dumps

    def send(case, value):
        results.write(dumps({"case": case, "value": value}, separators=(",", ":"))
                      .encode("utf-8") + b"\n")

    import pytest

    class Report:
        def __init__(self):
            self.outcome = {}

        def pytest_collection_finish(self, session):
            if job["collect"]:
                send(0, [item.nodeid for item in session.items])

        def pytest_collectreport(self, report):
            if job["collect"] and report.failed:
                send(1, f"cannot collect {report.nodeid}")

        def pytest_runtest_logreport(self, report):
            was = self.outcome.get(report.nodeid, "passed")
            if hasattr(report, "wasxfail"):
                now = "xfailed" if report.skipped else "xpassed"
            elif report.failed:
                now = "failed" if report.when == "call" else "error"
            elif report.skipped:
                now = "skipped"
            else:
                now = "passed"
            self.outcome[report.nodeid] = now if was == "passed" else was

        def pytest_runtest_logfinish(self, nodeid, location):
            send(nodeid, self.outcome.pop(nodeid, "error"))

    # the laid folders and the tree's root, after the standard library and site-packages: a
    # judged `difflib.py` is not the difflib a pinned test imports (`--import-mode=importlib`:
    # pytest itself puts no test folder first either)
    sys.path.extend(job["path"])
    if job["collect"]:
        stubs()
    pytest.main(job["args"], plugins=[Report()])


if __name__ == "__main__":
    main()
