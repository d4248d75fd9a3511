"""Resolve a command's program (argv[0]) to one absolute file, once, at run start.

Why: a program named by its bare name ("python3") is looked up on PATH every time it starts, so
whoever can put a file earlier on PATH, or change what a version manager picks, chooses the
gate's interpreter. A relative PATH entry ("bin", "./node_modules/.bin") is looked up in the
gate's working directory, the worker's tree. pyenv's and asdf's shims choose the interpreter
from a `.python-version` / `.tool-versions` file in the working directory, again the worker's.

So the engine resolves every program once, before any worker runs: on the engine's PATH with
relative entries dropped; and a Python launcher (a program called python, python3, python3.12)
is asked, in the spec's folder, which interpreter it really is (`sys.executable`), so a shim is
replaced by the interpreter it picks for the operator. The absolute path is what runs and what
the run pins (its bytes are hashed like a gate file; a change stops the run, exit 5).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?")
ASK = "import sys; print(sys.executable)"


class ProgramNotFound(LookupError):
    """The program is not an existing file and not on PATH."""


def absolute_path_entries(path: str | None = None) -> str:
    """PATH (the engine's by default) without relative entries: those name a folder relative to
    whatever the working directory is when a command starts."""
    raw = os.environ.get("PATH", os.defpath) if path is None else path
    return os.pathsep.join(p for p in raw.split(os.pathsep) if p and os.path.isabs(p))


def resolve(program: str, spec_dir: Path, *, path: str | None = None) -> str:
    """The absolute path `program` names: itself when absolute, else found on the absolute
    entries of PATH; a Python launcher is replaced by the interpreter it starts."""
    if os.path.isabs(program):
        found = program if os.path.isfile(program) else None
    else:
        found = shutil.which(program, path=absolute_path_entries(path))
    if found is None:
        raise ProgramNotFound(program)
    found = os.path.abspath(found)
    if PYTHON_NAME.fullmatch(os.path.basename(found)) and not _elf(found):
        found = _interpreter(found, spec_dir) or found
    return found


def _elf(path: str) -> bool:
    """A compiled program (not a script or shim)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def _interpreter(launcher: str, spec_dir: Path) -> str | None:
    """Ask a Python launcher (a shim, a wrapper script) which interpreter it starts, in the
    spec's folder (the operator's version files apply, the worker's never)."""
    try:
        res = subprocess.run([launcher, "-c", ASK], cwd=spec_dir, capture_output=True,
                             timeout=30, env=dict(os.environ))
    except (OSError, subprocess.SubprocessError):
        return None
    out = res.stdout.decode("utf-8", "replace").strip()
    if res.returncode == 0 and os.path.isabs(out) and os.path.isfile(out):
        return out
    return None


def installed(program: str) -> bool:
    """A program of an installation (in a bin/ or sbin/ folder: an interpreter, a system tool),
    which workers may run too; any other program (a gate's own script) is one of its files."""
    return Path(program).parent.name in ("bin", "sbin")


def shebang(path: str) -> str | None:
    """The interpreter a script's `#!` line names, as written: its absolute path, or the name
    `/usr/bin/env` is asked to find (`#!/usr/bin/env python3`, `#!/usr/bin/env -S python3 -u`).
    None for a compiled program, an unreadable file or no `#!` line."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(512)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    words = line.split()
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        return names[0] if names else None
    return words[0]


def interpreters(program: str, spec_dir: Path, *, path: str | None = None,
                 depth: int = 4) -> list[tuple[str, str]]:
    """(as written, absolute) for the interpreter a script names in its `#!` line, and the one
    that interpreter names if it is a script too (a wrapper), resolved like argv[0]. Raises
    `ProgramNotFound` with the interpreter's name when one does not exist."""
    out: list[tuple[str, str]] = []
    current = program
    for _ in range(depth):
        named = shebang(current)
        if named is None:
            break
        found = resolve(named, spec_dir, path=path)  # ProgramNotFound(named) if missing
        out.append((named, found))
        current = found
    return out
