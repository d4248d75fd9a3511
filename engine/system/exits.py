"""The exit codes of the `loopproof` command and of every engine entry point, declared once.

Why an enum in the lowest layer: the CLI, the runner's finish, `verify`, `show`, `receipt`, the
proxy's bridge and the studies that drive the engine all return these, and a code typed as a
bare number in one of them drifts from the table in docs/design.md ("Conventions") unseen;
tests/engine/system/test_exits.py holds the docs' table, the CLI's epilog and this enum to each other and finds
an exit code defined anywhere else.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0                # DONE, or the command's check held
    CHECK_FAILED = 1      # a check the command ran did not hold (`conformance` with a failing case)
    BAD_INPUT = 2         # a spec, ledger, policy, catalogue or argument is wrong; nothing written
    FAILED = 3            # the run FAILED, or every node DONE with the release conditions unmet
    BUDGET_EXHAUSTED = 4  # the run was refused its next attempt by the budget B
    CORRUPT = 5           # a ledger does not verify, or a pinned file or the policy changed
    STOPPED = 6           # stopped by the kill switch or a signal: `resume` continues


WORDS: dict[Exit, str] = {
    Exit.OK: "DONE/ok",
    Exit.CHECK_FAILED: "a check the command ran did not hold",
    Exit.BAD_INPUT: "bad input (nothing written)",
    Exit.FAILED: "FAILED",
    Exit.BUDGET_EXHAUSTED: "BUDGET_EXHAUSTED",
    Exit.CORRUPT: "ledger corrupt or pinned file changed",
    Exit.STOPPED: "stopped by the kill switch (resume continues)",
}


def epilog() -> str:
    """The CLI's one line on exit codes."""
    return "exit codes: " + ", ".join(f"{int(code)} {WORDS[code]}" for code in Exit)
