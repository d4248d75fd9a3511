"""Run the admission layer's conformance cases: `python -m loopproof.engine.admission.conformance --json`.

The cases live in `engine/admission/conformance/cases/` (one source of truth, also run by pytest); this
module runs each in its own temporary folder and prints `{"cases": n, "passed": n, "failed": [ids]}`.
Exit 0 when every case passes, 1 otherwise, 2 for an unknown case id.

`--markdown` prints docs/conformance.md (obligation, injected fault, expected outcome per case);
`--case CF001` runs one case; `--verbose` adds each failure's message to the JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

from loopproof.engine.system.exits import Exit


def load_cases() -> dict[str, Any]:
    """The registered cases, by id (engine/admission/conformance/cases/)."""
    from loopproof.engine.admission.conformance.cases import CASES

    return dict(CASES)


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
             "Generated from `engine/admission/conformance/cases/` by `python -m loopproof.engine.admission.conformance "
             "--markdown`; a test checks that this file matches. Each case injects one fault "
             "into a real broker (gate processes, a hash-chained ledger on disk) and asserts "
             "the expected outcome; run them with `python -m loopproof.engine.admission.conformance --json`.",
             "",
             "The program under repair is `calc.py` (`add(a, b)`), judged by a *visible*, a "
             "*challenge* and a *hidden* suite (see `engine/admission/conformance/lab.py`).",
             ""]
    for c in cases.values():
        lines += [f"## {c.id} — {c.title}", "",
                  f"- **Obligation**: {c.obligation}",
                  f"- **Injected fault**: {c.fault}",
                  f"- **Expected outcome**: {c.expected}",
                  ""]
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options, shared by `python -m loopproof.engine.admission.conformance` and `loopproof conformance`."""
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--case", action="append", default=[], help="run only this case id")
    parser.add_argument("--markdown", action="store_true", help="print docs/conformance.md and exit")
    parser.add_argument("--verbose", action="store_true", help="include failure messages")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loopproof.engine.admission.conformance",
                                     description="run the admission layer's conformance cases")
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run the chosen cases and print the summary; 0 all passed, 1 a failure, 2 an unknown id."""
    cases = load_cases()
    if args.markdown:
        print(markdown(cases), end="")
        return Exit.OK
    unknown = [cid for cid in args.case if cid not in cases]
    if unknown:
        print(f"conformance: --case: unknown ids {unknown}; fix: use one of "
              f"{min(cases)}..{max(cases)}", file=sys.stderr)
        return Exit.BAD_INPUT
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
    return Exit.CHECK_FAILED if failures else Exit.OK


if __name__ == "__main__":
    sys.exit(main())
