"""The deterministic graph the crash experiment kills and resumes.

Three nodes and one repair: `prepare` -> `build` -> `check`, with `check` repairing `build`.
`check` always fails in activation 0, so it is exhausted once and the repair re-runs `build` and
`check` (activation 1), where both pass. Each worker's verdict is a function of
(seed, node, activation, attempt) only, so a re-run after a crash does exactly what the first run
did. Each node passes from a seeded attempt number on and has exactly the attempts the uncrashed
run needs (no slack): every crash inside an attempt of `prepare` or `build` whose verdict is a
PASS is a crash inside that node's last attempt. Recovery must not need slack: resume charges an
interrupted attempt its open reservation and gives it back (model.Abandon), so the node runs the
same attempt number again and the run ends as the uncrashed one did.

Width (the cases with several attempts in flight): at `width` w > 1, `build` is w independent
nodes `build_0` ... `build_{w-1}`, each needing `prepare`, all needed by `check`, which repairs
`build_0`; the graph says `max_parallel = w`, so the w builds are begun together and are in
flight at once. At width 1 the graph is the three-node chain above, byte for byte.

Workers and gates are small standard-library scripts (worker.py, gate.py). The worker appends
one line per call to a calls file outside every workspace, so repeated execution is counted; it
runs in the default sandbox, and the calls file is the one path besides its workspace it may
write (the node field `writable`).
Spend is a command worker's wall clock, which differs between runs; the experiment therefore
sets B well above the pre-run spend bound (so admission never depends on timing) and normalises
wall-clock amounts out of the trace (docs/crash.md).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKER = HERE / "worker.py"
GATE = HERE / "gate.py"
CEILING = 10.0   # c_v, spend units (seconds of wall clock) per attempt
TIMEOUT = 10.0   # a worker that hangs is killed here; the real ones take milliseconds
SLACK = 0        # attempts beyond the passing one, per activation: none, so last attempts crash


@dataclass(frozen=True)
class CrashNode:
    name: str
    needs: tuple[str, ...]
    repairs: tuple[str, ...]
    pass_from: dict[int, int]  # activation -> first passing attempt (absent: never passes)
    attempts: int


def builds(width: int) -> tuple[str, ...]:
    """The build nodes at `width`: `build` alone, or build_0 ... build_{width-1}."""
    return ("build",) if width == 1 else tuple(f"build_{i}" for i in range(width))


def nodes(seed: int, width: int = 1) -> tuple[CrashNode, ...]:
    # The first passing attempt of `prepare` and `build` (1 or 2): four consecutive seeds cover
    # all four combinations, so even two seeds crash different attempts.
    p_prep, p_build, p_check = 1 + seed % 2, 1 + (seed // 2) % 2, 1
    names = builds(width)
    return (
        CrashNode("prepare", (), (), {0: p_prep}, p_prep + SLACK),
        *(CrashNode(b, ("prepare",), (), {0: p_build, 1: p_build}, p_build + SLACK)
          for b in names),
        # activation 0 never passes: `check` is exhausted after `attempts` tries and repairs
        # `build` (build_0); in activation 1 it passes from its first attempt.
        CrashNode("check", names, (names[0],), {1: p_check}, p_check + SLACK),
    )


def budget(seed: int, width: int = 1) -> float:
    """B: room for every attempt the graph can make, so admission never depends on timing."""
    ns = nodes(seed, width)
    total = sum(n.attempts for n in ns) + sum(n.attempts for n in ns if n.name != "prepare")
    return (total + 2) * CEILING


def write_graph(folder: Path, seed: int, calls_file: Path, width: int = 1) -> Path:
    """Write graph.toml for `seed` (and `width`) into `folder`; the workers count their calls in
    `calls_file`."""
    folder.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    lines = ["[graph]", "repair_budget = 1", f"spend_budget = {budget(seed, width)!r}"]
    lines += [f"max_parallel = {width}", ""] if width > 1 else [""]
    for n in nodes(seed, width):
        rule = ",".join(f"{a}:{k}" for a, k in sorted(n.pass_from.items()))
        worker = [py, "-S", str(WORKER), str(seed), n.name, rule, str(calls_file)]
        if width > 1 and n.name.startswith("build_"):
            worker.append(str(width))  # the wave's builds wait for each other (worker.py)
        gate = [py, "-S", str(GATE), str(seed), n.name]
        lines += [
            f"[node.{n.name}]",
            f"worker = {_toml_list(worker)}",
            f"gate = {_toml_list(gate)}",
            f"attempts = {n.attempts}",
            f"spend_ceiling = {CEILING!r}",
            f"timeout_s = {TIMEOUT!r}",
            f"needs = {_toml_list(n.needs)}",
            f"repairs = {_toml_list(n.repairs)}",
            f"writable = {_toml_list([str(calls_file)])}",
            "",
        ]
    path = folder / "graph.toml"
    path.write_text("\n".join(lines))
    return path


def _toml_list(items: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join('"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
                           for s in items) + "]"
