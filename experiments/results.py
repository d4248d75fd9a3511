"""What every experiment shares: its command-line contract and deterministic result files.

Every experiment takes --scale {smoke,default,paper}, --seed, --out DIR (default results/<name>)
and --json. Result files are written with sorted keys and fixed separators, so the same seed
gives the same bytes; timings, where an experiment reports them, go to a file of their own.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path


def parser(name: str, description: str, scales: Iterable[str]) -> argparse.ArgumentParser:
    """The shared flags; an experiment adds its own (--jobs, --coder, ...) to what this returns."""
    p = argparse.ArgumentParser(prog=f"python -m experiments.{name}", description=description)
    p.add_argument("--scale", choices=sorted(scales), default="default",
                   help="smoke: seconds, for tests; default: minutes; paper: the papers' sizes")
    p.add_argument("--seed", type=int, default=0, help="the same seed gives the same result bytes")
    p.add_argument("--out", type=Path, default=Path("results") / name,
                   help=f"directory for the result files (default results/{name})")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    return p


def parse(p: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace | None:
    """Parse; None (after one line on stderr) for an --out that cannot be a results directory,
    which the experiment's main turns into exit 2 with nothing written."""
    args = p.parse_args(argv)
    if args.out.exists() and not args.out.is_dir():
        print(f"{p.prog}: --out {args.out}: is a file, not a directory; "
              "fix: name a directory (or leave --out out)", file=sys.stderr)
        return None
    return args


def csv_text(rows: Iterable[Mapping[str, object]], columns: Sequence[str]) -> str:
    """The named columns of each row as CSV with a header, '\\n' line ends, booleans as 0/1."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (int(v) if isinstance(v, bool) else v)
                    for k, v in ((k, r.get(k)) for k in columns)})
    return buf.getvalue()


def json_text(data: object) -> str:
    return json.dumps(data, sort_keys=True, indent=2) + "\n"


def write_csv(path: Path, rows: Iterable[Mapping[str, object]], columns: Sequence[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(csv_text(rows, columns), encoding="utf-8")


def write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json_text(data), encoding="utf-8")


def print_summary(summary: Mapping[str, object], as_json: bool) -> None:
    """--json: one line of JSON on stdout; otherwise one aligned line per figure."""
    if as_json:
        print(json.dumps(summary, sort_keys=True))
        return
    width = max((len(k) for k in summary), default=0)
    for k, v in summary.items():
        print(f"{k:>{width}}: {v}")
