"""Every phase of a graph's audit reports its progress (issue 35 item 3: done/total for every
audit longer than a few seconds), the drawing of the mutants and the exploit probes too, and
each phase's count reaches its total: a phase that said nothing for a minute (the drawing, on
the bench's 13,000-line tree) looked hung."""

from __future__ import annotations

from collections.abc import Callable

from loopproof.engine import cli
from loopproof.engine.audit import progress as progress_mod
from tests.engine.audit.test_audit_kinds import KINDS, _graph, _run

PHASES = ("loaded files", "reference", "drawing mutants (loops x tiers)", "gate: absence",
          "differential", "gate", "exploits: reference", "exploits")


class Recorder:
    """A progress sink that keeps, per phase, its total and how many ticks it got."""

    def __init__(self) -> None:
        self.phases: list[list] = []

    def __call__(self, phase: str, total: int) -> Callable[[], None]:
        row = [phase, total, 0]
        self.phases.append(row)

        def tick() -> None:
            row[2] += 1

        return tick


def test_every_phase_reports_and_reaches_its_total(tmp_path, capsys, monkeypatch) -> None:
    graph = _graph(tmp_path / "g")
    ledger = _run(graph)
    seen = Recorder()
    monkeypatch.setattr(progress_mod, "on_stderr", lambda stack: seen)
    monkeypatch.setattr("loopproof.engine.commands.audit.on_stderr", lambda stack: seen)
    capsys.readouterr()
    assert cli.main(["audit", str(graph), "--ledger", str(ledger), "--json", "--jobs", "2",
                     "--max-tier2", "2", "--exploits", "exit-early/os-exit-at-import"]) == 0
    names = [p for p, _, _ in seen.phases]
    assert [p for p in PHASES if p not in names] == [], names
    for phase, total, ticks in seen.phases:
        assert ticks == total, (phase, total, ticks)
    drawn = next(row for row in seen.phases if row[0].startswith("drawing mutants"))
    assert drawn[1] == len(KINDS) * 2  # a gate of each kind, tiers 1 and 2
