"""The attack kit shared by the tests in this folder (one fixture, `kit`).

Each test plays an adversary against the engine through its front door (`engine.cli.main`, run
in this process, so an unhandled exception fails the test: a traceback is never an answer): a
hostile worker (a real program the graph runs), a hostile environment (a read-only folder,
racing processes) or a careless user (a bad graph.toml). The helpers are a fixture so that the
folder needs no package layout.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loopproof.engine import cli
from loopproof.engine.run import spec as spec_mod
from tests.support import oracles

PY = sys.executable


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def report(self) -> dict[str, Any]:
        return json.loads(self.out.strip().splitlines()[-1])

    @property
    def one_line(self) -> bool:
        """A refusal prints one line naming the fix, and no traceback (a warning, such as the
        one for `sandbox = "none"`, is not part of it)."""
        lines = error_lines(self.err)
        return len(lines) == 1 and "Traceback" not in self.err and "fix:" in lines[0]


def error_lines(err: str) -> list[str]:
    """The lines of stderr that are not warnings."""
    return [ln for ln in err.splitlines()
            if ln.strip() and not ln.startswith("loopproof: warning:")]


class Kit:
    """What an attack test needs: write programs and graphs, run the CLI, read ledgers."""

    PY = PY

    def __init__(self, tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp, self._capsys = tmp, capsys
        self.ledger = tmp / "run" / "L.jsonl"
        self.ledger.parent.mkdir()

    @staticmethod
    def unsandboxed() -> str:
        """`sandbox = "none"` where the engine has a sandbox switch: attacks on what the engine
        itself must enforce (the ledger's ownership, paths, trees) run without the sandbox, so
        the engine's own checks are what is tested."""
        return 'sandbox = "none"\n' if "sandbox" in spec_mod.GRAPH.names else ""

    def run(self, *argv: object) -> Result:
        """`loopproof ARGV...` in this process."""
        self._capsys.readouterr()
        code = cli.main([str(a) for a in argv])
        got = self._capsys.readouterr()
        return Result(code, got.out, got.err)

    def start(self, spec: Path, *extra: object) -> Result:
        return self.run("run", spec, "--ledger", self.ledger, "--json", *extra)

    def resume(self, *extra: object) -> Result:
        return self.run("resume", "--ledger", self.ledger, "--json", *extra)

    def script(self, name: str, body: str) -> str:
        """An attacker's (or a gate's) Python program, written to tmp/name."""
        p = self.tmp / name
        p.write_text(body)
        return str(p)

    def argv(self, name: str, body: str, *args: object) -> str:
        """A TOML argv list running `body` as a Python program with `args`."""
        return json.dumps([PY, self.script(name, body), *map(str, args)])

    def graph(self, nodes: dict[str, str], extra: str = "", budget: float = 100.0,
              sandbox: bool = False) -> Path:
        """A graph.toml; `nodes` maps a node name to its table's body (TOML lines)."""
        text = (f"[graph]\nspend_budget = {budget}\n"
                f"{'' if sandbox else self.unsandboxed()}{extra}\n")
        for node, body in nodes.items():
            text += f"[node.{json.dumps(node)}]\n{body}\n"
        p = self.tmp / "graph.toml"
        p.write_text(text)
        return p

    records = staticmethod(oracles.records)

    def leftovers(self) -> list[str]:
        """Everything the engine left in the ledger's folder."""
        return sorted(p.name for p in self.ledger.parent.iterdir())


@pytest.fixture
def kit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Kit:
    return Kit(tmp_path, capsys)
