"""The one way a test writes a spec: a folder holding graph.toml, made from Python values, and
the files its nodes name.

Why one: about nine builders and 82 inline `[graph]` blocks each wrote TOML by hand (f-strings,
`json.dumps` for a list, a `more` string for whatever else), so each quoted, ordered and
defaulted in its own way. Here a spec is a dict per table, written by rtoml (the reader's own
library: what it writes, the engine reads back as the same values). A test about the TOML text
itself (a typo, a wrong type, a duplicate table) still writes its text by hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import rtoml

from loopproof.model.graph import LoopGraph

Table = Mapping[str, Any]


def spec_text(nodes: Mapping[str, Table] | None = None, **graph: Any) -> str:
    """graph.toml's text: the [graph] table of `graph`'s fields, then a [node.NAME] table per
    node (a dict among a node's fields is its sub-table: `llm`, `gate`, `judge`, ...)."""
    doc: dict[str, Any] = {"graph": dict(graph)}
    if nodes:
        doc["node"] = {name: dict(fields) for name, fields in nodes.items()}
    return rtoml.dumps(doc)


def write_spec(folder: Path, nodes: Mapping[str, Table] | None = None, *,
               files: Mapping[str, str | bytes] | None = None, name: str = "graph.toml",
               **graph: Any) -> Path:
    """Write `spec_text(nodes, **graph)` as `folder/name`, and each of `files` (a path relative
    to `folder` -> its text or bytes); the spec's path."""
    folder.mkdir(parents=True, exist_ok=True)
    for rel, content in (files or {}).items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    path = folder / name
    path.write_text(spec_text(nodes, **graph))
    return path


def command_node(worker: list[str], gate: list[str], **fields: Any) -> dict[str, Any]:
    """A node table that runs `worker` and then `gate`, each a command (argv)."""
    return {"worker": worker, "gate": gate, **fields}


def model_tables(graph: LoopGraph) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A model graph as spec tables: the [graph] fields (K, B) and, per node, its a_v, c_v,
    needs and repairs (add each node's kind or commands to run it)."""
    fields = {"repair_budget": graph.repair_budget, "spend_budget": graph.spend_budget}
    nodes = {n.name: {"attempts": n.attempts, "spend_ceiling": n.spend_ceiling,
                      "needs": list(n.needs), "repairs": list(n.repairs)}
             for n in (graph.node(v) for v in graph.names)}
    return fields, nodes
