"""The docs' field tables are printed from the declarations (engine/field_tables.py): a doc whose
block differs from its declaration fails here naming the doc and the command that regenerates it;
every table the engine declares, and every registered node kind's fields, is shown in some doc;
and no module reads TOML but through declared tables."""

from __future__ import annotations

import importlib
import pkgutil
import re
import shutil
from pathlib import Path

import pytest

import loopproof.engine
from loopproof.engine import field_tables
from loopproof.engine.kinds import register_builtin
from loopproof.engine.run.kinds import KINDS
from loopproof.engine.system.fields import Table
from tests.support.paths import REPO


def test_every_doc_block_is_the_declarations_table() -> None:
    assert field_tables.stale(REPO) == [], f"run `{field_tables.COMMAND}`"


def _docs_copy(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    for doc in {doc for doc, _, _ in field_tables.BLOCKS}:
        shutil.copyfile(REPO / doc, tmp_path / doc)
    return tmp_path


def test_a_row_edited_by_hand_is_named_with_the_command_and_write_restores_it(tmp_path) -> None:
    root = _docs_copy(tmp_path)
    proxy = root / "docs" / "proxy.md"
    text = proxy.read_text()
    edited = text.replace("| `max_tokens` | an integer from 1 to 1000000 | `1024` |",
                          "| `max_tokens` | an integer from 1 to 1000000 | `2048` |")
    assert edited != text
    proxy.write_text(edited)
    assert field_tables.stale(root) == [
        "docs/proxy.md: the block 'fields.llm' is not the declaration of [node.NAME.llm]; run "
        f"`{field_tables.COMMAND}`"]
    assert field_tables.write(root) == ["docs/proxy.md"]
    assert proxy.read_text() == text and field_tables.stale(root) == []


def test_a_block_whose_markers_are_gone_is_named(tmp_path) -> None:
    root = _docs_copy(tmp_path)
    ledger = root / "docs" / "ledger.md"
    ledger.write_text(re.sub(r"<!-- fields\.policy:begin.*?<!-- fields\.policy:end -->", "",
                             ledger.read_text(), flags=re.S))
    (problem,) = field_tables.stale(root)
    assert problem.startswith("docs/ledger.md: no single block 'fields.policy'")
    with pytest.raises(SystemExit, match="fields.policy"):
        field_tables.write(root)


def _declared_tables() -> dict[str, Table]:
    """Every Table an engine module holds at module level (alone or in a dict of them)."""
    found: dict[str, Table] = {}
    for info in pkgutil.walk_packages(loopproof.engine.__path__, "loopproof.engine."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            values = value.items() if isinstance(value, dict) else [(None, value)]
            for key, v in values:
                if isinstance(v, Table):
                    found[f"{info.name}.{name}" + (f"[{key!r}]" if key else "")] = v
    return found


def test_every_declared_table_and_kind_is_shown_in_a_doc() -> None:
    register_builtin()
    shown = {(f.name, f.doc) for _, _, t in field_tables.BLOCKS for f in t}
    tables = _declared_tables()
    assert len(tables) >= 10, sorted(tables)  # the walk finds them (graph.toml, judge, ...)
    for where, table in tables.items():
        if table.noun == "table" and table not in [t for _, _, t in field_tables.BLOCKS]:
            continue  # a file's list of tables: each shown as its own fields, dotted
        missing = [f.name for f in table if (f.name, f.doc) not in shown
                   and (table.prefix + f.name, f.doc) not in shown]
        assert not missing, f"{where}: {missing} in no doc: add it to engine/field_tables.py"
    shipped = {k: d for k, d in KINDS.items()  # not the kinds other tests register
               if d.factory.__module__.startswith("loopproof.engine.")}
    assert {"command", "revision"} <= shipped.keys()
    for kind, declared in shipped.items():
        missing = [f.name for f in declared.fields if (f.name, f.doc) not in shown]
        assert not missing, f"kind {kind!r}: {missing} in no doc"


TOML_READERS = {"engine/run/spec.py", "engine/policy/pin.py", "engine/audit/catalogue.py"}
PARSER = "engine/system/toml_reader.py"  # the parser itself


def test_only_modules_that_read_through_declared_tables_parse_toml() -> None:
    """A module that parses TOML reads what it parsed through `Table.read`; a new one is named
    here, to be declared the same way (engine/system/fields.py)."""
    parsing = {p.relative_to(REPO).as_posix() for p in (REPO / "engine").rglob("*.py")
               if re.search(r"\b(tomllib|toml_reader)\.loads?\(", p.read_text())}
    assert parsing - {PARSER} == TOML_READERS
    for rel in TOML_READERS:
        assert re.search(r"\b[A-Z_]+(\[[^\]]+\])?\.read\(", (REPO / rel).read_text()), rel
    suggest = [p.relative_to(REPO).as_posix() for p in (REPO / "engine").rglob("*.py")
               if "get_close_matches" in p.read_text()]
    assert suggest == ["engine/system/fields.py"]  # unknown keys: one mechanism names them
