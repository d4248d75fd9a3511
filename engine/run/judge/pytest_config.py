"""The `pytest` kind's configuration file: the engine's own, or a gate's pinned `ini`, checked.

Why checked: the configuration decides what pytest loads before any test runs. A gate may give
a pytest.ini (`ini = "pytest.ini"`, a gate file: pinned, hidden from the judged code) for what
its suite needs (markers, filterwarnings, xfail_strict, python_files, ...), and it is written
into the scratch copy as the one configuration pytest reads (`-c`, with the rootdir pinned): the
tree's own pytest.ini, pyproject.toml, setup.cfg and tox.ini are never read. What it may not
hold is what loads code or moves where code comes from: `pythonpath` (folders of the judged
tree ahead on sys.path), `consider_namespace_packages`, and in `addopts` any option but those
in `FLAGS`/`WITH_VALUE` below (no `-p NAME` but `-p no:NAME`, no `--pyargs`, `-o`, `-c`,
`--rootdir`, `--confcutdir`, `--import-mode`). Plugins are the gate's `plugins` field, nothing
else.
"""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

# what the engine's configuration holds where a gate's ini does not say otherwise
DEFAULTS = {"addopts": "", "xfail_strict": "false", "python_files": "test_*.py *_test.py"}
REFUSED = {
    "pythonpath": "puts folders of the judged tree ahead on sys.path (the judged code is "
                  "`code`)",
    "consider_namespace_packages": "changes which package a test module belongs to",
}
FLAGS = frozenset({
    "-q", "--quiet", "-v", "--verbose", "-vv", "-vvv", "-l", "--showlocals", "-s",
    "--strict-markers", "--strict-config", "--strict", "-x", "--exitfirst", "--runxfail",
    "--doctest-modules", "--doctest-continue-on-failure", "--disable-warnings",
    "--disable-pytest-warnings", "--no-header", "--no-summary", "--full-trace",
})
WITH_VALUE = frozenset({
    "-W", "--pythonwarnings", "--tb", "-r", "--durations", "--durations-min", "--color",
    "--maxfail", "-m", "-k", "--doctest-glob", "--doctest-report", "-p", "--capture",
    "--log-level", "--log-cli-level", "--log-format", "--log-date-format",
})


def check_addopts(value: str) -> None:
    """ValueError naming the first option of `addopts` that could load code."""
    try:
        tokens = shlex.split(value)
    except ValueError as exc:
        raise ValueError(f"addopts cannot be split into options ({exc})") from None
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        opt, eq, attached = tok.partition("=") if tok.startswith("--") else (tok, "", "")
        if not eq and not tok.startswith("--") and tok[:2] in WITH_VALUE and len(tok) > 2:
            opt, attached, eq = tok[:2], tok[2:], "="  # -rA, -Werror, -pno:x
        if opt in FLAGS and not eq:
            i += 1
            continue
        if opt not in WITH_VALUE:
            raise ValueError(f"addopts holds {tok!r}, which is not an option the judge passes "
                             "on (only options that load no code: -q, -v, -r, --tb, -W, "
                             "--strict-markers, -m, -k, -p no:NAME, ...)")
        if not eq:
            if i + 1 >= len(tokens):
                raise ValueError(f"addopts ends with {tok!r}, which takes a value")
            attached, i = tokens[i + 1], i + 1
        if opt == "-p" and not attached.startswith("no:"):
            raise ValueError(f"addopts loads the plugin {attached!r} (-p): name it in plugins")
        i += 1


def _render(key: str, value: str) -> str:
    lines = value.split("\n")
    return f"{key} = {lines[0]}" + "".join(f"\n    {ln}" for ln in lines[1:] if ln.strip())


def engine_ini(path: Path | None) -> str:
    """The configuration pytest reads: the engine's, with a gate's `ini` (checked) over it.
    ValueError says what in the file is wrong."""
    keys = dict(DEFAULTS)
    if path is not None:
        parser = configparser.ConfigParser(interpolation=None, strict=True,
                                           comment_prefixes=("#", ";"),
                                           inline_comment_prefixes=None)
        parser.optionxform = str  # type: ignore[assignment, method-assign]  # keys as written
        try:
            parser.read_string(path.read_text(encoding="utf-8"), str(path))
        except (OSError, UnicodeDecodeError, configparser.Error) as exc:
            raise ValueError(f"is not a readable pytest.ini: {str(exc).splitlines()[0]}"
                             ) from None
        if not parser.has_section("pytest"):
            raise ValueError("has no [pytest] section")
        for key, value in parser.items("pytest"):
            if key in REFUSED:
                raise ValueError(f"sets {key!r}, which {REFUSED[key]}")
            if key == "addopts":
                check_addopts(value)
            keys[key] = value.strip()
    return "[pytest]\n" + "".join(_render(k, v) + "\n" for k, v in keys.items())
