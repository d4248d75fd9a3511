"""`loopproof`: the command-line front door. Each subcommand lives in `engine/commands/<name>.py`
with `add_arguments(parser)` and `main(args) -> int`, imported only when it is invoked.

Exit codes (docs/design.md, Conventions): 0 DONE / ok, 1 a check the command ran did not hold,
2 bad input (nothing written), 3 FAILED, 4 BUDGET_EXHAUSTED, 5 ledger corrupt or a pinned file
changed, 6 stopped by the kill switch.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
from typing import NoReturn

from loopproof.engine.kinds import register_builtin
from loopproof.engine.system import exits
from loopproof.engine.system.errors import BadInput, LedgerCorrupt
from loopproof.engine.system.exits import Exit

COMMANDS: dict[str, str] = {
    "run": "run a bounded-loop graph (GRAPH.toml) and write its ledger",
    "resume": "continue a run from its verified ledger, after a crash or a stop",
    "verify": "verify a ledger's hash chain",
    "show": "show a run as a timeline: attempts, spend against c_v and B, verdicts, outcome",
    "cancel": "ask that a node's activation end without a verdict (honoured on resume)",
    "bound": "print W and W_c, the most attempts and spend any run of a graph can take",
    "audit": "audit a gate catalogue with mutants: vacuity, self-attestation, false accepts",
    "receipt": "verify a completion receipt against its anchoring ledger and checkpoint store",
    "conformance": "run the admission layer's conformance cases (fault injections)",
}


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what, and where to look) and exit 2, like every
    other bad input, instead of the usage block and the error below it."""

    def error(self, message: str) -> NoReturn:
        self.exit(Exit.BAD_INPUT, f"{self.prog}: {message}; fix: see `{self.prog} --help`\n")


# the commands that load a graph spec (from its file, or from a ledger's first record)
LOADS_SPECS = frozenset({"run", "resume", "bound", "audit", "cancel"})

@functools.cache
def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; only the `only` subcommand's module is imported, and none for `--help` or a
    missing or unknown command, which need just the list above (a fast start: a command's
    module may pull in the whole engine, and `loopproof --help` should not pay for it).

    Built once per `only` and kept: argparse looks up a translation of every string it holds
    (about 4 ms a parser), which a caller of `main` in one process (the API, the tests) would
    pay at every call; parsing leaves a parser as it was (no command defines an action of its
    own or a mutable default)."""
    parser = Parser(
        prog="loopproof",
        description="Bounded loops for agent harnesses: " + ", ".join(COMMANDS) + ".",
        epilog=exits.epilog(),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        module = _module(name) if only == name else None
        if module is not None:
            module.add_arguments(p)
    return parser


def _module(name: str):
    try:
        return importlib.import_module(f"loopproof.engine.commands.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"loopproof.engine.commands.{name}":
            return None
        raise


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    only = argv[0] if argv and argv[0] in COMMANDS else None
    args = build_parser(only).parse_args(argv)
    module = _module(args.command)
    if module is None:
        print(f"loopproof {args.command}: not available in this build", file=sys.stderr)
        return Exit.BAD_INPUT
    if args.command in LOADS_SPECS:
        register_builtin()  # the node kinds of the layers above the run layer
    try:
        return int(module.main(args))
    except BadInput as exc:
        print(f"loopproof {args.command}: {exc}", file=sys.stderr)
        return Exit.BAD_INPUT
    except LedgerCorrupt as exc:
        print(f"loopproof {args.command}: ledger corrupt: {exc}", file=sys.stderr)
        return Exit.CORRUPT


if __name__ == "__main__":
    sys.exit(main())
