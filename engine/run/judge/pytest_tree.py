"""What the `pytest` kind makes of a judged tree: the pinned tests laid over a scratch copy of
it, what of the tree goes before anything runs, and which of its packages are the judged code.

Why remove: pytest imports a conftest.py from every folder it collects and every folder above
it, and a conftest.py is a plugin: the judged tree's would run the worker's hooks in the run
that decides (a `pytest_runtest_makereport` that says "passed"). So every conftest.py of the
judged tree goes, wherever it sits (the root, src/, inside the package, inside a laid folder's
place), and only the pinned ones load (the harness refuses any other, byte for byte). A pinned
folder replaces the tree's folder of that name whole, and the tree's root `__init__.py` goes
(neither is imported as the pinned tests' package); a `__pycache__` beside a laid file and a
folder named like a laid module go too (neither can stand in for the pinned bytes).

Why name the judged code: the gate's interpreter usually has the project installed, and a test
that imports it gets the installed copy unless the judged tree's comes first. `code` names the
judged packages as paths in the tree (`"src/mypkg"`, `"mymodule.py"`); the harness maps exactly
those import names to those places, ahead of anything installed, and reports where each was
loaded from. Without `code`, the tree's own top-level packages and modules are the judged code
(those under `src/` when the tree has one), but none named like the test tooling (pytest, an
installed plugin, what they require: the harness's `tool_names`, passed in as `laid_names`); a
tree where that is unclear gets no verdict but an error naming the fix.
"""

from __future__ import annotations

import hashlib
import keyword
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

# never judged code by default: start-up hooks and a project's tooling at its root
NOT_CODE = frozenset({"setup", "conftest", "sitecustomize", "usercustomize", "noxfile",
                      "fabfile"})
# the harness's own imports: a judged copy of one would replace what runs the tests
HARNESS = frozenset({"pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py"})
TEST_FILE = re.compile(r"(test_.*|.*_test)\.py")
FIX = 'declare the judged packages as paths in the tree, e.g. code = ["src/mypkg"]'


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


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def lay(tree: Path, laid: Sequence[tuple[str, Path]], extra: Mapping[str, str]) -> None:
    """Lay the pinned files (and the engine's own `extra`) over `tree`, replacing what is
    there under the same names, and remove what of the tree could load in their place (see
    the module's docstring)."""
    items = [(n, p.read_bytes()) for n, p in laid] + [(n, t.encode()) for n, t in extra.items()]
    names = {n for n, _ in items}
    tops = {n.split("/", 1)[0] for n in names if "/" in n}
    modules = {n[:-3] for n in names if "/" not in n and n.endswith(".py")}
    for top in sorted(tops | modules | {"__init__.py", "__pycache__"}):
        if top not in names:
            _remove(tree / top)
    for name, data in items:
        target = tree / name
        for parent in [*reversed(target.relative_to(tree).parents)][1:]:
            here = tree / parent
            if here.is_symlink() or (here.exists() and not here.is_dir()):
                here.unlink()
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove(target)
        target.write_bytes(data)
    for folder, dirs, files in os.walk(tree):
        for entry in [*dirs, *files]:
            rel = (Path(folder) / entry).relative_to(tree).as_posix()
            if entry == "conftest.py" and rel not in names:
                _remove(Path(folder) / entry)
        dirs[:] = [d for d in dirs if d != "conftest.py"]


def pinned_conftests(tree: Path, laid: Sequence[tuple[str, Path]]) -> dict[str, str]:
    """The conftest.py files that may load, where they are laid, and their sha256."""
    return {str(tree / n): hashlib.sha256(p.read_bytes()).hexdigest()
            for n, p in laid if PurePosixPath(n).name == "conftest.py"}


def laid_folders(laid: Sequence[tuple[str, Path]]) -> tuple[set[str], set[str]]:
    """The laid top-level folders that are packages (hold an `__init__.py`) and the others."""
    tops = {n.split("/", 1)[0] for n, _ in laid if "/" in n}
    packages = {t for t in tops if f"{t}/__init__.py" in {n for n, _ in laid}}
    return packages, tops - packages


def origin(place: Path) -> str:
    """The file a name placed at `place` is loaded from: a package's __init__.py, the module
    itself, or a namespace package's folder (the harness's `origin` says the same)."""
    init = place / "__init__.py"
    return str(init) if place.is_dir() and init.is_file() else str(place)


def import_name(entry: str) -> str:
    """The import name of a `code` entry ("src/mypkg" -> "mypkg", "six.py" -> "six")."""
    last = PurePosixPath(entry).name
    return last[:-3] if last.endswith(".py") else last


def check_code(entries: Sequence[str], laid_names: set[str]) -> dict[str, str]:
    """`code`'s entries by import name; ValueError says which entry is wrong and why."""
    out: dict[str, str] = {}
    for entry in entries:
        path = PurePosixPath(entry)
        if path.is_absolute() or ".." in path.parts or "\\" in entry or not path.parts:
            raise ValueError(f"{entry!r} is not a path inside the judged tree")
        name = import_name(entry)
        if not name.isidentifier() or keyword.iskeyword(name):
            raise ValueError(f"{entry!r} is no importable name ({name!r})")
        if name in sys.stdlib_module_names or name in HARNESS:
            raise ValueError(f"{entry!r} would replace {name!r}, a module of the standard "
                             "library or of pytest itself")
        if name in laid_names:
            raise ValueError(f"{entry!r} has the name of a pinned test folder or file")
        if name in out:
            raise ValueError(f"{entry!r} and {out[name]!r} are both imported as {name!r}")
        out[name] = str(path)
    return out


@dataclass(frozen=True)
class JudgedCode:
    """The judged packages by import name, their places in the scratch tree, and whether each
    must be imported (declared) or at least one (found by default)."""

    places: dict[str, Path]
    each: bool

    def expected(self) -> dict[str, str]:
        return {name: origin(place) for name, place in self.places.items()}


def _candidates(folder: Path, modules: bool, laid_names: set[str]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink():
            continue
        if entry.is_dir() and (entry / "__init__.py").is_file():
            name = entry.name
        elif modules and entry.is_file() and entry.suffix == ".py" \
                and not TEST_FILE.fullmatch(entry.name):
            name = entry.stem
        else:
            continue
        if name.isidentifier() and name not in laid_names | NOT_CODE | HARNESS \
                and name not in sys.stdlib_module_names:
            out[name] = entry
    return out


def judged_code(tree: Path, declared: Mapping[str, str] | None, laid_names: set[str]
                ) -> JudgedCode | str:
    """The judged code of `tree` (a scratch copy with the tests laid): `declared` (`code`, by
    import name) placed in it, or by default the tree's own top-level packages and modules
    (under src/ when it has one); a string says why the tree is unclear."""
    if declared is not None:
        return JudgedCode({name: tree / rel for name, rel in declared.items()}, True)
    src = tree / "src"
    at_root = _candidates(tree, False, laid_names)
    if src.is_dir() and not src.is_symlink():
        found = _candidates(src, True, laid_names)
        if not found:
            return "src/ holds no package or module"
        if at_root:
            return (f"both src/ ({', '.join(found)}) and the root ({', '.join(at_root)}) hold "
                    "packages")
        return JudgedCode(found, False)
    found = _candidates(tree, True, laid_names)
    if not found:
        return "it holds no package or module besides the tests"
    return JudgedCode(found, False)


PYCACHE = ".loopproof-pycache"  # where a collection's pytest keeps its rewritten test modules


@dataclass(frozen=True)
class Rewritten:
    """pytest's rewrite of one pinned test module, made by the collection (no judged code ran
    there): laid beside the pinned file in each run, it spares that run the rewrite (about a
    third of a 100-test suite's start). Only for the bytes it was made from (`sha256`), with
    the source's modification time as it was then (a pytest whose cache checks times)."""

    source: str  # the laid file's name in the tree
    pyc: str  # its name in the tree (`<folder>/__pycache__/<module>.cpython-311-pytest-9.2.0.pyc`)
    data: bytes
    sha256: str
    mtime_ns: int


def rewritten_tests(tree: Path, laid: Sequence[tuple[str, Path]]) -> tuple[Rewritten, ...]:
    """The rewritten modules a collection in `tree` left under `PYCACHE` (the harness's
    `sys.pycache_prefix`: the source's absolute folder below it) for the laid `.py` files."""
    root = tree / PYCACHE / Path(*tree.absolute().parts[1:])
    out = []
    for name, _ in laid:
        source = tree / name
        if not name.endswith(".py") or not source.is_file():
            continue
        rel = PurePosixPath(name)
        for pyc in sorted((root / rel.parent).glob(f"{rel.stem}.*-pytest-*.pyc")):
            data = source.read_bytes()
            out.append(Rewritten(name, str(rel.parent / "__pycache__" / pyc.name),
                                 pyc.read_bytes(), hashlib.sha256(data).hexdigest(),
                                 source.stat().st_mtime_ns))
    return tuple(out)


def lay_rewritten(tree: Path, rewritten: Sequence[Rewritten]) -> None:
    """Lay each rewritten module beside its laid source in `tree`, where the source's bytes are
    the ones it was made from (else pytest rewrites that file itself, as without it)."""
    for r in rewritten:
        source = tree / r.source
        if not source.is_file() or hashlib.sha256(source.read_bytes()).hexdigest() != r.sha256:
            continue
        target = tree / r.pyc
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(r.data)
        os.utime(source, ns=(r.mtime_ns, r.mtime_ns))
