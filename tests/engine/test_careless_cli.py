"""A careless user on every `loopproof` subcommand: a missing file, a folder, an empty file,
bytes that are not UTF-8, a binary file given as a ledger, a TOML value of the wrong type in
each field of a spec, a typo in an option. Each is one line naming the file, the field and the
fix, exit 2 (a ledger whose first line is complete but fails its check: exit 5, corrupt), no
traceback, and nothing written or changed (`resume` once cut a binary "ledger" without a newline
to 0 bytes, `verify` called an empty file "verified, 0 records", a date in a spec named no
field, and `python -m loopproof.engine.record.signing keygen` into a missing folder was a traceback)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from loopproof.engine.cli import main
from loopproof.engine.record.signing import main as signing_main
from loopproof.engine.run.spec import COMMAND_FIELDS, GRAPH, NODE
from tests.support.launchers import python_asked_once  # noqa: F401  (a fixture)
from tests.support.paths import REPO
from tests.support.refusals import refused, snapshot

PIPELINE = REPO / "examples" / "pipeline"

BAD_FILES = {
    "empty": b"",
    "not UTF-8": b"\xff\xfe[graph]\n\xc3",
    "binary, no newline": bytes(range(11, 256)),
    "binary": bytes(range(256)) * 4,
    "a JSON line, not a record": b'{"hello": 1}\n',
}
# A complete first line that fails its check cannot be told from a tampered record 0: that is
# a corrupt ledger (exit 5, one line), never cut or repaired; so are final bytes without a
# newline that are not the start of a record (docs/ledger.md's recovery rule: only a strict
# prefix of a record or zero padding is a torn tail), here the binary file without a newline.
# Empty (no run leaves it: record 0 is in place before the file appears): bad input, exit 2.
NO_RECORD = {"empty"}

# every spec here is a fresh copy of an example: its `python3` (pyenv's shim, ~0.2 CPU-s a
# question) is asked once (tests/support/launchers.py)
pytestmark = pytest.mark.usefixtures("python_asked_once")


def receipt_case(tmp: Path) -> Path:
    """A receipt-shaped file (never reached: the ledger is refused first)."""
    receipt = tmp / "receipt.json"
    receipt.write_text('{"digest": "0"}\n')
    return receipt


LEDGER_COMMANDS = {
    "verify": lambda f, tmp: ["verify", str(f)],
    "verify --json": lambda f, tmp: ["verify", str(f), "--json"],
    "show": lambda f, tmp: ["show", str(f)],
    "resume": lambda f, tmp: ["resume", "--ledger", str(f)],
    "receipt --ledger": lambda f, tmp: ["receipt", str(receipt_case(tmp)), "--ledger", str(f)],
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
@pytest.mark.parametrize("command", sorted(LEDGER_COMMANDS))
def test_a_file_that_is_no_ledger_is_one_line_and_left_as_it_is(capsys, tmp_path, command,
                                                                 kind) -> None:
    ledger = tmp_path / "run.jsonl"
    ledger.write_bytes(BAD_FILES[kind])
    argv = LEDGER_COMMANDS[command](ledger, tmp_path)
    if command.startswith("receipt") and kind not in NO_RECORD:  # its report lists problems
        before = snapshot(tmp_path)
        assert main(argv) == 5
        out = capsys.readouterr()
        assert f"- ledger: {ledger}: line 1" in out.out and not out.err, out
        assert snapshot(tmp_path) == before
        return
    refused(capsys, argv, tmp_path, str(ledger), code_=2 if kind in NO_RECORD else 5)


@pytest.mark.parametrize("command", sorted(LEDGER_COMMANDS))
def test_a_folder_given_as_a_ledger_is_one_line(capsys, tmp_path, command) -> None:
    folder = tmp_path / "run.jsonl"
    folder.mkdir()
    err = refused(capsys, LEDGER_COMMANDS[command](folder, tmp_path), tmp_path, str(folder))
    assert "directory" in err


def test_a_graph_audited_against_a_folder_is_one_line(capsys, tmp_path) -> None:
    shutil.copytree(REPO / "examples" / "median-command", tmp_path / "median")
    (tmp_path / "L").mkdir()
    refused(capsys, ["audit", str(tmp_path / "median" / "graph.toml"), "--ledger",
                     str(tmp_path / "L")], tmp_path, "directory")


SPEC_FILES = {**BAD_FILES, "a folder": None, "missing": ...}


@pytest.mark.parametrize("kind", sorted(SPEC_FILES))
@pytest.mark.parametrize("command", ["run", "bound"])
def test_a_spec_that_is_no_spec_is_one_line(capsys, tmp_path, command, kind) -> None:
    spec = tmp_path / "graph.toml"
    content = SPEC_FILES[kind]
    if content is None:
        spec.mkdir()
    elif content is not ...:
        spec.write_bytes(content)
    argv = [command, str(spec)] + (["--ledger", str(tmp_path / "L")] if command == "run" else [])
    refused(capsys, argv, tmp_path, str(spec))


WRONG = {"a string": '"x"', "a list": "[1]", "a table": "{ a = 1 }", "a date": "1979-05-27"}
# values of a field's own type, which are not wrong for it
FITS = {("a string", "policy"), ("a string", "stop_file"), ("a string", "sandbox"),
        ("a string", "kind"), ("a string", "gate_errors"), ("a table", "llm"),
        ("a list", "worker"), ("a list", "gate")}


def spec_with(table: str, field: str, value: str) -> str:
    """examples/pipeline/graph.toml with `field = value` set in `table` (replacing it)."""
    out, current = [], None
    for line in (PIPELINE / "graph.toml").read_text().splitlines():
        if line.startswith("["):
            if current == table:
                out.append(f"{field} = {value}")
            current = line.strip()
        if current == table and line.split("=")[0].strip() == field:
            continue
        out.append(line)
    if current == table:
        out.append(f"{field} = {value}")
    return "\n".join(out) + "\n"


SPEC_CASES = [(table, field, kind) for table, fields in
              (("[graph]", GRAPH.by_name), ("[node.split]", NODE.plus("", COMMAND_FIELDS).by_name))
              for field in fields for kind in WRONG if (kind, field) not in FITS]
SPEC_CASES += [("", top, kind) for top in ("graph", "node", "planner") for kind in WRONG]


@pytest.mark.parametrize(("table", "field", "kind"), SPEC_CASES)
def test_a_field_of_the_wrong_type_is_one_line_naming_it(capsys, tmp_path, table, field,
                                                         kind) -> None:
    folder = tmp_path / "p"
    shutil.copytree(PIPELINE, folder)
    if table:
        text = spec_with(table, field, WRONG[kind])
    else:  # a top-level name given a value instead of a table
        kept, skip = [], False
        for line in (PIPELINE / "graph.toml").read_text().splitlines():
            if line.startswith("["):  # drop the tables of that name, headers and bodies
                skip = line.strip() == f"[{field}]" or line.startswith(f"[{field}.")
            if not skip:
                kept.append(line)
        text = f"{field} = {WRONG[kind]}\n" + "\n".join(kept) + "\n"
    (folder / "graph.toml").write_text(text)
    argv = ["bound", str(folder / "graph.toml")]
    if table == "" and field != "planner" and kind == "a table":
        # `graph = { a = 1 }` is a [graph] table missing spend_budget; still one line
        refused(capsys, argv, tmp_path, "graph.toml")
        return
    refused(capsys, argv, tmp_path, "graph.toml", field)


def test_a_typo_in_an_option_is_one_line(capsys, tmp_path) -> None:
    err = refused(capsys, ["resume", "--ledger", str(tmp_path / "L"), "--price", "abc"],
                  tmp_path, "--price")
    assert "loopproof resume --help" in err
    refused(capsys, ["bogus"], tmp_path, "bogus")


def test_receipt_with_a_store_that_is_no_folder_is_one_line(capsys, tmp_path) -> None:
    ledger = tmp_path / "guard.jsonl"
    ledger.write_text("x\n")
    (tmp_path / "store").write_text("x")
    refused(capsys, ["receipt", str(receipt_case(tmp_path)), "--ledger", str(ledger), "--store",
                     str(tmp_path / "store")], tmp_path, "--store")


def test_keygen_into_a_missing_folder_is_one_line_and_writes_no_half_pair(capsys,
                                                                          tmp_path) -> None:
    def keygen(private: Path, public: Path) -> list[str]:
        return ["keygen", "--private", str(private), "--public", str(public)]

    refused(capsys, keygen(tmp_path / "no" / "run.key", tmp_path / "run.pub"), tmp_path,
            "run.key", "does not exist", entry=signing_main)
    refused(capsys, keygen(tmp_path / "run.key", tmp_path / "no" / "run.pub"), tmp_path,
            "run.pub", "does not exist", entry=signing_main)
    refused(capsys, keygen(tmp_path / "k", tmp_path / "k"), tmp_path, "same path",
            entry=signing_main)
    if os.geteuid() != 0:  # root writes anywhere; the folder check above is the one that holds
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        refused(capsys, keygen(tmp_path / "run.key", ro / "run.pub"), tmp_path, "run.pub",
                entry=signing_main)
