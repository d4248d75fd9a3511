"""The docs' field tables, printed from the declarations (engine/system/fields.py): which table
of which file is shown in which doc, between which markers.

Why above every layer: the tables are declared where they are read (graph.toml's in the run
layer, the revision kind's in the admission layer, the policy's, a catalogue's loop.toml), and
only a module above all of them can list them all. `python -m loopproof.engine.field_tables`
prints every block; `--write` puts each in its doc; `--check` exits 1 naming each doc whose
block differs from its declaration (tests/engine/test_field_tables.py asks `stale`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from loopproof.engine.admission.revision import REVISION_FIELDS
from loopproof.engine.audit.catalogue import LOOP_FILE
from loopproof.engine.audit.catalogue import TABLES as LOOP_TABLES
from loopproof.engine.policy.pin import TABLES as POLICY_TABLES
from loopproof.engine.run.judge.table import TABLES as JUDGE_TABLES
from loopproof.engine.run.kinds import COMMAND_FIELDS
from loopproof.engine.run.proxy.config import LLM
from loopproof.engine.run.spec_checks import GRAPH, NODE, PLANNER, TOP
from loopproof.engine.system.fields import Table, dotted

COMMAND = "python -m loopproof.engine.field_tables --write"
ROOT = Path(__file__).resolve().parents[1]  # the checkout (engine/ is a folder of it)

# (doc, marker, table): each block `<!-- MARKER:begin ... -->` ... `<!-- MARKER:end -->`
BLOCKS: tuple[tuple[str, str, Table], ...] = (
    ("docs/engine.md", "fields.graph-toml", TOP),
    ("docs/engine.md", "fields.graph", GRAPH),
    ("docs/engine.md", "fields.node", NODE),
    ("docs/engine.md", "fields.command", Table('[node.NAME] kind = "command"', COMMAND_FIELDS)),
    ("docs/engine.md", "fields.planner", PLANNER),
    ("docs/evidence.md", "fields.revision",
     Table('[node.NAME] kind = "revision"', REVISION_FIELDS)),
    *(("docs/gates.md", f"fields.{kind}", t) for kind, t in JUDGE_TABLES.items()),
    ("docs/proxy.md", "fields.llm", LLM),
    ("docs/ledger.md", "fields.policy", dotted("the policy file", POLICY_TABLES.values())),
    ("docs/audit.md", "fields.loop-toml", LOOP_FILE),
    ("docs/audit.md", "fields.loop", dotted("loop.toml", LOOP_TABLES.values())),
)


def block(marker: str, table: Table) -> str:
    """The doc's text between and including the markers."""
    return (f"<!-- {marker}:begin (generated from the declaration of {table.title} by "
            f"`{COMMAND}`; do not edit) -->\n{table.markdown()}\n<!-- {marker}:end -->")


def _span(text: str, marker: str) -> tuple[int, int] | None:
    start, end = text.find(f"<!-- {marker}:begin"), text.find(f"<!-- {marker}:end -->")
    if start < 0 or end < start or text.count(f"<!-- {marker}:begin") != 1:
        return None
    return start, end + len(f"<!-- {marker}:end -->")


def stale(root: Path = ROOT) -> list[str]:
    """One line per block that is missing, doubled or not the declaration's table."""
    problems = []
    for doc, marker, table in BLOCKS:
        text = (root / doc).read_text(encoding="utf-8")
        span = _span(text, marker)
        if span is None:
            problems.append(f"{doc}: no single block {marker!r}; add the markers, then run "
                            f"`{COMMAND}`")
        elif text[span[0]:span[1]] != block(marker, table):
            problems.append(f"{doc}: the block {marker!r} is not the declaration of "
                            f"{table.title}; run `{COMMAND}`")
    return problems


def write(root: Path = ROOT) -> list[str]:
    """Put every block in its doc; the docs changed."""
    changed = []
    for doc, marker, table in BLOCKS:
        path = root / doc
        text = path.read_text(encoding="utf-8")
        span = _span(text, marker)
        if span is None:
            raise SystemExit(f"{doc}: no single block {marker!r}: add `<!-- {marker}:begin -->` "
                             f"and `<!-- {marker}:end -->` where the table goes")
        new = text[:span[0]] + block(marker, table) + text[span[1]:]
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed += [doc] if doc not in changed else []
    return changed


def main(argv: list[str]) -> int:
    """No argument: print every block; --write: put them in the docs; --check: exit 1 if a doc's
    block is stale."""
    if argv == ["--write"]:
        for doc in write():
            print(f"wrote {doc}", file=sys.stderr)
        return 0
    if argv == ["--check"]:
        problems = stale()
        for p in problems:
            print(p, file=sys.stderr)
        return 1 if problems else 0
    if argv:
        print(f"usage: {COMMAND.removesuffix(' --write')} [--write | --check]", file=sys.stderr)
        return 2
    for doc, marker, table in BLOCKS:
        print(f"{doc}:\n{block(marker, table)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
