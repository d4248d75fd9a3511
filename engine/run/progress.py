"""A live progress display for a terminal: per node its status, attempt and verdicts, and spend
against the budget; every attempt in flight is bold, and with `max_parallel` > 1 the caption
names them all. Drawn on stderr with rich, and only when stderr is a terminal and the output
is not --json, so pipes and machine-read output never see it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TextIO

from loopproof.engine.record.replay import Replayed

Progress = Callable[[Replayed, dict[str, Any]], None]

_MARK = {"accept": "[green]✓[/]", "reject": "[red]✗[/]", "error": "[yellow]![/]"}


def wanted(json_output: bool, stream: TextIO | None = None) -> bool:
    stream = stream or sys.stderr
    return not json_output and hasattr(stream, "isatty") and stream.isatty()


class LiveProgress:
    """Redraws a small table after every ledger record. Use as a context manager."""

    def __init__(self, stream: TextIO | None = None) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console(file=stream or sys.stderr)
        self.live = Live(console=self.console, refresh_per_second=8, transient=False)
        self.last = ""

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)

    def __call__(self, r: Replayed, record: dict[str, Any]) -> None:
        self.last = record.get("type", "")
        self.live.update(self.render(r))

    def render(self, r: Replayed) -> Any:
        from rich.table import Table

        s, g = r.state, r.graph
        t = Table(title=f"loopproof — {s.outcome.value}", title_justify="left")
        for col in ("node", "status", "activation", "attempt", "verdicts"):
            t.add_column(col)
        flying = s.in_flight(g)  # every attempt in flight (several with max_parallel > 1)
        for name in g.names:
            verdicts = "".join(_MARK.get(v["verdict"], "?") for v in r.verdicts.get(name, []))
            style = "bold" if name in flying else ""
            t.add_row(name, s.status_of(g, name).value, str(s.activation_of(g, name)),
                      f"{s.attempts_of(g, name)}/{g.node(name).attempts}", verdicts, style=style)
        t.caption = (f"spend {s.settled:.2f} settled + {s.reserved:.2f} reserved of "
                     f"{g.spend_budget:g}  ·  attempts {s.attempts_total}  ·  repairs "
                     f"{s.repairs_used}/{g.repair_budget}  ·  last: {self.last}"
                     + (f"\nin flight {len(flying)}/{g.max_parallel}: {', '.join(flying)}"
                        if g.max_parallel > 1 else ""))
        return t
