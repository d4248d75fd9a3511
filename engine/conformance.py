"""Run the admission layer's conformance cases: `python -m engine.conformance --json`.

The cases live in `tests/conformance/cases.py` (one source of truth, also run by pytest); this
module loads them from the source tree, runs each in its own temporary folder, and prints
`{"cases": n, "passed": n, "failed": [ids]}`. Exit 0 when every case passes, 1 otherwise, 2 when
the cases cannot be found (an installed copy without the source tree).

`--markdown` prints CASES.md (obligation, injected fault, expected outcome per case);
`--case CF001` runs one case; `--verbose` adds each failure's message to the JSON.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

CASES_DIR = Path(__file__).resolve().parents[1] / "tests" / "conformance"
PACKAGE = "loopproof_conformance"


def load_cases() -> dict[str, Any]:
    """The registered cases, by id, loaded from `tests/conformance/cases.py`."""
    init = CASES_DIR / "__init__.py"
    if not init.exists():
        raise FileNotFoundError(f"{CASES_DIR}: conformance cases not found; run from a source "
                                f"checkout (pip install -e .)")
    if PACKAGE not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            PACKAGE, init, submodule_search_locations=[str(CASES_DIR)])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[PACKAGE] = module
        spec.loader.exec_module(module)
    return dict(importlib.import_module(f"{PACKAGE}.cases").CASES)


def run_case(c: Any) -> str | None:
    """Run one case in a fresh temporary folder: None when it passes, else the failure text."""
    with tempfile.TemporaryDirectory(prefix=f"{c.id}-") as tmp:
        try:
            c.fn(Path(tmp))
        except Exception as exc:  # any exception is a failed case, reported, never hidden
            last = traceback.extract_tb(exc.__traceback__)[-1]
            return f"{type(exc).__name__}: {exc} (line {last.lineno})"
    return None


def markdown(cases: dict[str, Any]) -> str:
    lines = ["# Conformance cases",
             "",
             "Generated from `tests/conformance/cases.py` by `python -m engine.conformance "
             "--markdown`; a test checks that this file matches. Each case injects one fault "
             "into a real broker (gate processes, a hash-chained ledger on disk) and asserts "
             "the expected outcome; run them with `python -m engine.conformance --json`.",
             "",
             "The program under repair is `calc.py` (`add(a, b)`), judged by a *visible*, a "
             "*challenge* and a *hidden* suite (see `tests/conformance/lab.py`).",
             ""]
    for c in cases.values():
        lines += [f"## {c.id} — {c.title}", "",
                  f"- **Obligation**: {c.obligation}",
                  f"- **Injected fault**: {c.fault}",
                  f"- **Expected outcome**: {c.expected}",
                  ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.conformance",
                                     description="run the admission layer's conformance cases")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--case", action="append", default=[], help="run only this case id")
    parser.add_argument("--markdown", action="store_true", help="print CASES.md and exit")
    parser.add_argument("--verbose", action="store_true", help="include failure messages")
    args = parser.parse_args(argv)
    try:
        cases = load_cases()
    except FileNotFoundError as exc:
        print(f"engine.conformance: {exc}", file=sys.stderr)
        return 2
    if args.markdown:
        print(markdown(cases), end="")
        return 0
    unknown = [cid for cid in args.case if cid not in cases]
    if unknown:
        print(f"engine.conformance: --case: unknown ids {unknown}; fix: use one of "
              f"{min(cases)}..{max(cases)}", file=sys.stderr)
        return 2
    chosen = [cases[cid] for cid in (args.case or list(cases))]
    failures: dict[str, str] = {}
    for c in chosen:
        why = run_case(c)
        if why is not None:
            failures[c.id] = why
        if not args.json:
            print(f"{c.id} {'ok  ' if why is None else 'FAIL'} {c.title}"
                  + (f"\n      {why}" if why else ""))
    summary: dict[str, Any] = {"cases": len(chosen), "passed": len(chosen) - len(failures),
                               "failed": sorted(failures)}
    if args.verbose:
        summary["messages"] = failures
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    else:
        print(f"{summary['passed']}/{summary['cases']} conformance cases passed")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
