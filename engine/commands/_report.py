"""What `run` and `resume` print: one JSON object (--json) or a few plain lines, and messages
on stderr for a stop or a pinned-file change."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from loopproof.engine.run import progress as progress_mod
from loopproof.engine.run.runner import EXIT_PIN_CHANGED, EXIT_STOPPED, Runner
from loopproof.engine.system.limits import owner_of


@contextlib.contextmanager
def runner_progress(json_output: bool) -> Iterator[Any]:
    if not progress_mod.wanted(json_output):
        yield None
        return
    with progress_mod.LiveProgress() as live:
        yield live


UNSANDBOXED_WARNING = ("loopproof: warning: sandbox = \"none\": workers and gates run without a "
                       "sandbox; a worker can read the engine's environment and files, write "
                       "outside its workspace (code the gate's interpreter runs too), use the "
                       "network and leave processes behind (docs/threat-model.md)")


def add_dask_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dask", default=None, metavar="tcp://HOST:8786",
                        help="run every attempt's worker and gate on this Dask scheduler's "
                             "workers (the `cluster` extra; docs/scale.md); the budget and the "
                             "ledger stay here")


@contextlib.contextmanager
def on_cluster(address: str | None, ledger: Path) -> Iterator[Any]:
    """The Dask cluster `--dask` names (None without it), closed at the end, the run's folders
    on its hosts removed. Dask is imported only here, and only with `--dask`."""
    if address is None:
        yield None
        return
    from loopproof.engine.run.remote.cluster import connect  # the `cluster` extra

    cluster = connect(address)
    try:
        yield cluster
    finally:
        cluster.close(owner_of(Path(ledger).absolute()))


def warn_unsandboxed(sandbox: str) -> None:
    """Printed when a run (or a resume) starts with `sandbox = "none"`."""
    if sandbox == "none":
        print(UNSANDBOXED_WARNING, file=sys.stderr)


def finish(runner: Runner, code: int, json_output: bool) -> int:
    report = runner.report()
    report["exit"] = code
    if code == EXIT_PIN_CHANGED and runner.error:
        print(f"loopproof: run stopped: {runner.error}", file=sys.stderr)
    if code == EXIT_STOPPED:
        if runner.gate_stop is not None:
            print(f"loopproof: run stopped: {runner.gate_stop}; fix what made the gate fail "
                  f"(not its pinned files), then `loopproof resume --ledger "
                  f"{runner.ledger.path}`", file=sys.stderr)
        elif runner.stop_file.exists():
            print(f"loopproof: run stopped (kill switch {runner.stop_file}); remove that file, "
                  f"then `loopproof resume --ledger {runner.ledger.path}`", file=sys.stderr)
        else:
            print(f"loopproof: run stopped by signal; `loopproof resume --ledger "
                  f"{runner.ledger.path}` continues it", file=sys.stderr)
    if runner.ledger.torn:
        print(f"loopproof: {runner.ledger.torn}; truncated to the last complete record (the cut "
              f"bytes are kept in {runner.ledger.torn_kept} beside the ledger)", file=sys.stderr)
    if json_output:
        print(json.dumps(report, sort_keys=True))
    else:
        spend = report["spend"]
        print(f"{report['outcome']}{' (stopped)' if report['stopped'] else ''}: "
              f"{report['attempts_total']} attempts of W = {report['W']}, "
              f"{report['repairs_used']} repairs, spend {spend['settled']:g} of "
              f"{spend['budget']:g}")
        for name, n in report["nodes"].items():
            print(f"  {name}: {n['status']} after {n['attempts']} attempt(s) in activation "
                  f"{n['activation']}; verdicts {' '.join(n['verdicts']) or '-'}"
                  + (f"; cancelled in activation {', '.join(map(str, n['cancelled']))}"
                     if n.get("cancelled") else ""))
        if report["outcome_unknown"]:
            print(f"  {report['outcome_unknown']} attempt(s) had no recorded end (crash) and "
                  f"were charged and re-run")
        print(f"  ledger {report['ledger']} ({report['records']} records, head "
              f"{report['head'][:16]})")
        print(f"  sandbox {report['sandbox']}"
              + (" (none: workers and gates were not confined)"
                 if report["sandbox"] == "none" else ""))
    return code
