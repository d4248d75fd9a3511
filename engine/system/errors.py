"""Errors the CLI turns into exit codes. Each message is one line: the file, the field, the fix."""

from __future__ import annotations


class BadInput(Exception):
    """Bad user input (a spec, a catalogue, a policy, a worker's reply): exit 2, nothing written."""

    def __init__(self, file: str, field: str, problem: str, fix: str) -> None:
        self.file, self.field, self.problem, self.fix = file, field, problem, fix
        super().__init__(f"{file}: {field}: {problem}; fix: {fix}")


class LedgerCorrupt(Exception):
    """The ledger's chain does not verify, or a pinned file changed: exit 5, nothing appended."""
