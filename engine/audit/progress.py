"""Progress of a long audit on stderr: per phase, done/total, the rate and an estimate of the time
left. A rich bar on a terminal; elsewhere (a pipe, a CI log, under --json, whose report is on
stdout) one line every few seconds.

Why lines and not silence off a terminal: an audit of a real tree runs for minutes, and one that
printed nothing for ten minutes was stopped by its user as hung. Why not at once: an
audit of a few seconds needs no progress, so nothing is printed before `quiet_s` have passed.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any, TextIO

Tick = Callable[[], None]
Progress = Callable[[str, int], Tick]


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min {seconds % 60:02d} s"


class Lines:
    """`progress(phase, total) -> tick`: a line `audit: PHASE D/T (R/s, about E left)` at the
    first tick past the audit's first `quiet_s` seconds, then at most every `every_s` seconds,
    and when the phase ends."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 5.0, quiet_s: float = 3.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream or sys.stderr
        self.every_s, self.quiet_s, self.clock = every_s, quiet_s, clock
        self.started = clock()
        self.lock = threading.Lock()

    def __call__(self, phase: str, total: int) -> Tick:
        begun = self.clock()
        state = {"done": 0, "said": None}

        def tick() -> None:
            with self.lock:
                state["done"] += 1
                now, done = self.clock(), state["done"]
                if now - self.started < self.quiet_s:
                    return
                said = state["said"]
                if done < total and said is not None and now - said < self.every_s:
                    return
                state["said"] = now
                rate = done / (now - begun) if now > begun else 0.0
                left = f", about {_duration((total - done) / rate)} left" if rate and \
                    done < total else ""
                print(f"audit: {phase} {done}/{total} ({rate:.1f}/s{left}; "
                      f"{_duration(now - self.started)} so far)", file=self.stream, flush=True)

        return tick


def bar(stack: ExitStack) -> Progress:
    """A rich progress bar per phase on a terminal: done/total, the rate, the time left."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed:.1f}/s" if task.speed else "")

    shown = stack.enter_context(Progress(TextColumn("{task.description}"), BarColumn(),
                                         MofNCompleteColumn(), Rate(), TimeRemainingColumn(),
                                         transient=True, console=Console(stderr=True)))

    def start(phase: str, total: int) -> Tick:
        task = shown.add_task(phase, total=total)
        return lambda: shown.advance(task)

    return start


def on_stderr(stack: ExitStack) -> Progress:
    """The bar on a terminal, the lines elsewhere."""
    return bar(stack) if sys.stderr.isatty() else Lines()
