"""The `pytest` harness: runs pytest inside the candidate's sandbox with a pinned configuration
and a pinned reporting plugin. Standard library and pytest only.

The engine starts it as `python -I -c <this file's text>` in a scratch copy of the judged tree
with the pinned tests laid over it, and writes the job on stdin (built by
engine/run/judge/pytest_gate.py): `args` (pytest's arguments: the pinned configuration file and
rootdir, `-p no:cacheprovider`, `--import-mode=importlib`), `collect` (a collection of the
pinned tests alone), `code` (each judged import name and its place in the tree), `packages` (the
laid test packages, e.g. `tests`, by name), `path` (laid folders that are no package),
`conftests` (the pinned conftest.py files and their sha256), `plugins`, `select`, `keep`,
`test_timeout`, `stop_at_failure` (the audit's runs: after the first test that does not pass (the
canaries aside), the tests left are cut before they start and
report nothing), `stub` (the declared judged names, for a collection), `tools` (the judged
code is not declared: a collection names the test tooling) and `pycache` (a collection: where
pytest keeps its rewritten pinned test modules, for the engine to lay in each run). It keeps a private copy of stdout
as the results channel, points fd 1 at stderr, and runs `pytest.main(args, plugins=[Report(...)])`.

Where imports resolve: a finder first on `sys.meta_path` maps each judged name (`code`) to its
place in the scratch tree, ahead of any installed copy (a copy already imported at start-up, by
a `.pth` file of the installation, is dropped first), and each laid test package to its pinned
copy (`from tests.base import ...` is the pinned tests/base.py). The laid folders that are no
package come first on `sys.path` (their helper modules, as pytest's rootdir insertion gives
them). The tree's root is not on `sys.path` at all: no other file of the judged tree stands in
for a module the standard library or site-packages hold (a judged `difflib.py` is not the
difflib a pinned test imports), nor for one nothing holds (the pinned conftest's optional
`try: import fastjson`, which would otherwise run a module of the tree before any test). The
environment has no PYTEST_* variable but PYTEST_DISABLE_PLUGIN_AUTOLOAD=1: the plugins that
load are the pinned `plugins` (installed distributions or entry point names of group pytest11,
passed as `-p NAME`), none else. The only conftest.py files that load are the pinned ones,
byte for byte (the engine removed every other from the tree; one written there while the tests
run is refused here).

Before any pinned file or judged code runs, the objects that exist (the harness's, pytest's and
its plugins') are frozen out of the garbage collector (`gc.freeze`): collections, pytest's own at
its end among them, skip what lives as long as the process anyway. A pinned test sees the same
objects but for `gc.get_objects()` and `gc.get_referrers()`, which do not list those.

Each test's outcome (setup, call and teardown together: "passed", "failed", "skipped",
"xfailed", "xpassed", "error", "timeout") is written as `{"case": NODEID, "value": OUTCOME}`
when the test ends. A test that runs past `test_timeout` seconds gets SIGALRM (it fails, and
the next test runs); one that does not end on it (a hang the signal cannot break) is reported
"timeout" by a watchdog thread, which then ends the process (the tests left are not reported).
The integer cases are the harness's own (engine/run/judge/wire.py): with `collect`,
`{"case": 0, "value": [IDS]}` (in lists of at most about `MAX_REPORT` bytes, as many lines as
it takes; a module the tests import that is not installed is given as a stub, the judged tree
not being there: any, or with `stub` those under the judged names), `{"case": 3, "value":
[IDS]}` (the same way), those of them the pinned tests' own skip, skipif and xfail marks excuse
(their conditions evaluated there, where no judged code runs), with `tools`, `{"case": 4,
"value": [NAMES]}` (`tool_names`: what a default judged package may not be named), and `{"case": 1, "value": PROBLEM}` for what keeps the pinned tests from
collecting; after a run, `{"case": 2, "value": {"code": {NAME: FILE|null},
"modules": {MODULE: FILE}, "outside": {MODULE: FILE}}}`: the file each judged name was loaded
from (null: never imported; for a name whose import failed, the place it was sought), the
modules loaded from the scratch tree (the first `MAX_MODULES`, in at most `MAX_REPORT` bytes:
one line), and the modules loaded from an installed copy of a judged name, whatever they are
called (the first 50: an `__init__.py` that points `__path__` there, an alias of one).

Why one module: the engine sends this file's text whole as `python -I -c`, into the gate's
interpreter, where loopproof is not installed; a sibling module it imported would not be there.

The residual: the judged code runs in this process, so it can still defeat what is decided
here (an object equal to everything inside a test's `assert`, a hook that rewrites outcomes
selectively, a forged report of what was imported). The engine's canaries catch a report
forged wholesale; nothing here can catch one forged with care. The `calls` and `program` kinds
have no such residual.
"""

import gc
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import signal
import sys
import threading
import time
import types

IDS, PROBLEM, LOADED, EXCUSED, TOOLS = 0, 1, 2, 3, 4  # its own cases (judge/wire.py)
MAX_MODULES = 5000  # modules named in the load report
MAX_REPORT = 1 << 19  # bytes of paths and names in one line (the wire takes 1 MiB a line)


def chunks(ids):
    """`ids` in lists of at most about MAX_REPORT bytes each (at least one list)."""
    out, size = [[]], 0
    for i in ids:
        if out[-1] and size + len(i) > MAX_REPORT:
            out.append([])
            size = 0
        out[-1].append(i)
        size += len(i) + 4
    return out


def stubs(names):
    """A finder, last in line, that makes a module no other finder has a stub: any (`names`
    None, the judged code not declared) or those under the judged names `names` (the others
    are missing in a judged run too, where nothing of the tree but the judged code imports)."""

    class Stub:
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Stub()

        def __call__(self, *args, **kwargs):
            return Stub()

        def __iter__(self):
            return iter(())

        def __mro_entries__(self, bases):  # `class T(stubbed.Base)` at a test module's top
            return (object,)

    class StubModule(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Stub()

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if names is not None and name.partition(".")[0] not in names:
                return None
            return importlib.machinery.ModuleSpec(name, self, is_package=True)

        def create_module(self, spec):
            module = StubModule(spec.name)
            module.__path__ = []
            return module

        def exec_module(self, module):
            pass

    sys.meta_path.append(Finder())


def origin(place):
    """The file a name placed at `place` is loaded from: a package's __init__.py, the module
    itself, or a namespace package's folder (engine/run/judge/pytest_tree.py says the same)."""
    init = os.path.join(place, "__init__.py")
    return init if os.path.isdir(place) and os.path.isfile(init) else place


class Placed(importlib.abc.MetaPathFinder):
    """First on sys.meta_path: each name of `places` is the file or folder given, whatever is
    installed; `sought` records where each was looked for."""

    def __init__(self, places):
        self.places = places
        self.sought = {}

    def find_spec(self, name, path=None, target=None):
        place = self.places.get(name)
        if place is None:
            return None
        self.sought.setdefault(name, origin(place))
        if os.path.isdir(place):
            init = os.path.join(place, "__init__.py")
            if os.path.isfile(init):
                return importlib.util.spec_from_file_location(
                    name, init, submodule_search_locations=[place])
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [place]
            return spec
        if os.path.isfile(place):
            return importlib.util.spec_from_file_location(name, place)
        raise ModuleNotFoundError(f"the judged tree has no {place}", name=name)


def loaded_file(module):
    f = getattr(module, "__file__", None)
    if type(f) is str:
        return f
    path = getattr(module, "__path__", None)
    try:
        first = next(iter(path)) if path is not None else None
    except Exception:
        return None
    return first if type(first) is str else None


def installed_copies(code, path, tree):
    """Where the import system finds each judged name on `path` without the judged tree (an
    installed copy): a package's folder (with a trailing slash) or a module's file."""
    out = []
    for name in code:
        try:
            spec = importlib.machinery.PathFinder.find_spec(
                name, [p for p in path if not p.startswith(tree)])
        except Exception:
            spec = None
        if spec is None:
            continue
        for place in [*(spec.submodule_search_locations or []), spec.origin]:
            if type(place) is str and os.path.isabs(place):
                out.append(os.path.join(place, "") if os.path.isdir(place) else place)
    return out


def plugin_args(names):
    """`-p NAME` for every pytest11 entry point of the distributions (or entry point names)
    `names`; the names nothing installed answers to."""
    from importlib.metadata import entry_points

    def norm(n):
        return re.sub(r"[-_.]+", "-", n).lower()

    eps = list(entry_points(group="pytest11"))
    args, missing = [], []
    for want in names:
        found = [ep for ep in eps if ep.name == want
                 or (ep.dist is not None and norm(ep.dist.name) == norm(want))]
        if not found:
            missing.append(want)
        for ep in found:
            args += ["-p", ep.name]
    return args, missing


def tool_names():
    """The top-level import names of pytest, of every installed distribution with a pytest11
    entry point (a plugin), and of what they require, transitively: the test tooling, which no
    package of the judged tree stands in for unless `code` declares it."""
    from importlib.metadata import PackageNotFoundError, distribution, entry_points

    from packaging.requirements import InvalidRequirement, Requirement

    def norm(n):
        return re.sub(r"[-_.]+", "-", n).lower()

    def installed(key):
        """The first distribution of that (normalized) name on sys.path, looked up by name:
        not every installed one's metadata read to find a handful."""
        try:
            return distribution(key)
        except PackageNotFoundError:
            return None

    todo = ["pytest", *(norm(ep.dist.name) for ep in entry_points(group="pytest11")
                        if ep.dist is not None)]
    seen, names = set(), set()
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        d = installed(key)
        if d is None:
            continue
        top = d.read_text("top_level.txt")
        if top:
            names.update(n.strip() for n in top.split() if n.strip())
        for f in d.files or ():
            first = f.parts[0] if f.parts else ""
            if first.endswith(".py") or (len(f.parts) > 1 and f.name == "__init__.py"):
                names.add(first.removesuffix(".py"))
        for r in d.requires or ():
            try:
                req = Requirement(r)
            except InvalidRequirement:
                continue
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(norm(req.name))
    return sorted(n for n in names if n.isidentifier())


def excused(item):
    """Does the pinned test's own skip, skipif or xfail mark hold (here, at the collection of
    the pinned tests alone)?"""
    try:
        from _pytest.skipping import evaluate_skip_marks, evaluate_xfail_marks

        return evaluate_skip_marks(item) is not None or evaluate_xfail_marks(item) is not None
    except BaseException:  # a condition that cannot be evaluated excuses nothing
        return False


def guard_conftests(pinned):
    """Refuse any conftest.py pytest would import that is not pinned, byte for byte."""
    from _pytest.config import PytestPluginManager

    load = PytestPluginManager._importconftest

    def guarded(self, conftestpath, *args, **kwargs):
        want = pinned.get(str(conftestpath))
        try:
            with open(conftestpath, "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            got = None
        if want is None or got != want:
            raise ImportError(f"{conftestpath} is not a pinned conftest.py: not loaded")
        return load(self, conftestpath, *args, **kwargs)

    PytestPluginManager._importconftest = guarded


def rewritten_pycs_move():
    """Does this pytest read its cached rewrite of a module moved with its source as if it had
    been compiled there (`co_filename` set to where the source is now)? Else a test's frames
    would name the collection's folder, and a test reading its own file would not find it.
    (And does it decide where to write a rewrite before it reads one, as `keep_rewrites`
    needs?)"""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return False
    return (callable(getattr(rewrite, "_fix_code_filename", None))
            and callable(getattr(rewrite, "_read_pyc", None))
            and callable(getattr(getattr(rewrite, "AssertionRewritingHook", None),
                                 "exec_module", None)))


def keep_rewrites(cache):
    """A collection, where no judged code runs: pytest keeps its rewrite of each pinned module
    it rewrites (the test modules, the conftest files) under `cache`, never beside an installed
    module, for the engine to lay beside the pinned tests of each run, which then skip the
    rewrite. Only those go there: bytecode is written while pytest's rewriting import decides
    where (it reads `sys.dont_write_bytecode` and `sys.pycache_prefix` first, then looks for a
    cached rewrite), and never else. So every other module (pytest's plugins, the standard
    library, what the tests import) is read from its own bytecode as in a run: with a prefix set
    for the whole collection each was compiled from source again, about half its time."""
    from _pytest.assertion import rewrite

    hook, read_pyc = rewrite.AssertionRewritingHook, rewrite._read_pyc
    exec_module = hook.exec_module

    def off():
        sys.dont_write_bytecode = True
        sys.pycache_prefix = None

    def kept(self, module):
        sys.dont_write_bytecode = False
        sys.pycache_prefix = cache
        try:
            return exec_module(self, module)
        finally:
            off()

    def read(*args, **kwargs):
        off()  # where to write is decided: what the module imports is compiled as in a run
        return read_pyc(*args, **kwargs)

    hook.exec_module = kept
    rewrite._read_pyc = read


def main():
    job = json.loads(sys.stdin.buffer.read())
    results = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    sys.stdin = open(os.devnull)  # noqa: SIM115 (the process's stdin, open until it ends)
    sys.dont_write_bytecode = True
    if job.get("pycache") and rewritten_pycs_move():
        keep_rewrites(job["pycache"])
    dumps = json.dumps
    lock = threading.Lock()
    sent = set()

    def send(case, value):
        with lock:  # the watchdog may report a hung test while the main thread is stuck
            if type(case) is str:
                if case in sent:
                    return
                sent.add(case)
            results.write(dumps({"case": case, "value": value}, separators=(",", ":"))
                          .encode("utf-8") + b"\n")

    import pytest

    collect, select = job["collect"], job.get("select")
    keep = set(select or ()) | set(job.get("keep") or ())
    canaries = set(job.get("keep") or ())
    stop = bool(job.get("stop_at_failure")) and not collect
    limit = job.get("test_timeout")
    timed_out = set()
    running = {"id": None, "deadline": None}

    class Timeout(BaseException):
        """Raised in a test that ran past its time (a BaseException: `except Exception` in the
        test does not swallow it)."""

    class Report:
        def __init__(self):
            self.outcome = {}
            self.failed = False  # with `stop`: a test that counts did not pass
            self.cut = set()

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_setup(self, item):
            # `stop` (the audit's runs): once a counted test did not pass, the verdict is a
            # reject whatever follows (a canary matters to an accept only); the tests left are
            # cut before their fixtures (a skip here keeps pytest's setup and teardown in step)
            # and report nothing
            if self.failed:
                self.cut.add(item.nodeid)
                pytest.skip("not run: a test before it did not pass")

        @pytest.hookimpl(tryfirst=True)
        def pytest_load_initial_conftests(self, early_config, parser, args):
            # pytest has put its assertion-rewriting hook first on sys.meta_path by now; it
            # looks a module up on sys.path itself (an installed copy of a judged package the
            # suite marks for rewriting): the judged names' finder goes first again
            if placed in sys.meta_path:
                sys.meta_path.remove(placed)
            sys.meta_path.insert(0, placed)
            # what exists now is the harness's and pytest's (no pinned file and no judged
            # code has run yet): no collection scans it again, neither the automatic ones
            # nor pytest's own at its end, about a fifth of a small suite's run (CPython)
            if callable(getattr(gc, "freeze", None)):
                gc.freeze()

        def pytest_collection_finish(self, session):
            if collect:
                for part in chunks([item.nodeid for item in session.items]):
                    send(IDS, part)
                for part in chunks([item.nodeid for item in session.items if excused(item)]):
                    send(EXCUSED, part)
                if job.get("tools"):
                    send(TOOLS, tool_names())

        def pytest_collectreport(self, report):
            if collect and report.failed:
                send(PROBLEM, f"cannot collect {report.nodeid}")

        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, session, config, items):
            if collect or select is None:
                return
            chosen = [i for i in items if i.nodeid in keep]
            dropped = [i for i in items if i.nodeid not in keep]
            if dropped:
                config.hook.pytest_deselected(items=dropped)
            items[:] = chosen

        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_protocol(self, item, nextitem):
            if not limit:
                return (yield)
            running.update(id=item.nodeid, deadline=time.monotonic() + limit)
            signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                return (yield)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                running.update(id=None, deadline=None)

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
            got = self.outcome.pop(nodeid, "error")
            if nodeid in self.cut:
                return
            got = "timeout" if nodeid in timed_out else got
            send(nodeid, got)
            if stop and got != "passed" and nodeid not in canaries:  # (`select`: none else ran)
                self.failed = True

    if limit and not collect:
        def on_alarm(signum, frame):
            current = running["id"]
            if current is not None:
                timed_out.add(current)
                raise Timeout(f"{current} ran past {limit:g} s")

        def watchdog():
            grace = max(1.0, min(5.0, limit))
            while True:
                time.sleep(0.25)
                current, deadline = running["id"], running["deadline"]
                if current is not None and deadline is not None \
                        and time.monotonic() > deadline + grace:
                    send(current, "timeout")  # the signal did not end it: end the run here
                    os._exit(3)

        signal.signal(signal.SIGALRM, on_alarm)
        threading.Thread(target=watchdog, daemon=True).start()

    # no plugin named: no scan of the installed distributions' entry points
    args, missing = plugin_args(job["plugins"]) if job.get("plugins") else ([], [])
    if missing and collect:
        send(PROBLEM, f"plugin {missing[0]!r} is not installed for {sys.executable} (no "
                      "pytest11 entry point of that distribution or name)")
        return
    code = {} if collect else dict(job.get("code") or {})
    for name in code:  # an installed copy imported at start-up (a .pth file) goes
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]
    start_path = list(sys.path)  # before any judged code runs
    placed = Placed({**job.get("packages", {}), **code})
    sys.meta_path.insert(0, placed)
    sys.path[:0] = job.get("path", [])
    guard_conftests(job.get("conftests", {}))
    if collect:
        stubs(job.get("stub"))
    try:
        pytest.main([*job["args"], *args], plugins=[Report()])
    finally:
        if not collect:
            tree = os.path.join(job["tree"], "")
            modules, size = {}, 0
            for name, module in list(sys.modules.items()):
                f = loaded_file(module)
                if f is not None and f.startswith(tree) and len(modules) < MAX_MODULES \
                        and size + len(name) + len(f) < MAX_REPORT:
                    modules[name] = f
                    size += len(name) + len(f) + 8
            copies = installed_copies(code, start_path, tree)
            outside = {}  # modules loaded from an installed copy of the judged code
            for name, module in list(sys.modules.items()):
                f = loaded_file(module)
                if f is not None and len(outside) < 50 \
                        and any(f == c or f.startswith(c) for c in copies):
                    outside[name] = f
            send(LOADED, {"code": {name: loaded_file(sys.modules[name]) if name in sys.modules
                                   else placed.sought.get(name) for name in code},
                          "modules": modules, "outside": outside})


if __name__ == "__main__":
    main()
