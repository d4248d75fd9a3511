"""The graph.toml size limit, both sides: a careless user's giant spec is refused with one line
and exit 2, nothing written; a generated graph over the limit is read when the command line
asks for it (`--max-spec-bytes`), which is how the benchmarks give `loopproof bound` and the
engine their 100,000- and 10,000-node graphs."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopproof.engine import cli
from loopproof.engine.run import spec as spec_mod
from loopproof.engine.run.values import MAX_SPEC_BYTES
from tests.support.engine_child import engine_run

HEAD = "[graph]\nspend_budget = 1e9\n"


def chain(n: int) -> str:
    return HEAD + "".join(f'[node.n{i}]\nworker = ["true"]\ngate = ["true"]\nspend_ceiling = 1.0\n'
                          f'needs = {[f"n{i - 1}"] if i else []}\n'.replace("'", '"')
                          for i in range(n))


def padded(size: int) -> str:
    """A valid one-node graph of exactly `size` bytes (a comment fills it)."""
    body = chain(1) + "# "
    return body + "x" * (size - len(body) - 1) + "\n"


def test_the_limit_is_exact(tmp_path: Path) -> None:
    at, over = tmp_path / "at.toml", tmp_path / "over.toml"
    at.write_text(padded(MAX_SPEC_BYTES))
    over.write_text(padded(MAX_SPEC_BYTES + 1))
    assert at.stat().st_size == MAX_SPEC_BYTES and over.stat().st_size == MAX_SPEC_BYTES + 1
    assert spec_mod.load(at).bounds()["W"] == 1
    with pytest.raises(spec_mod.BadInput, match="larger than the limit of 1048576 bytes"):
        spec_mod.load(over)
    assert spec_mod.load(over, MAX_SPEC_BYTES + 1).bounds()["W"] == 1


@pytest.mark.parametrize("command", ["run", "bound"])
def test_a_giant_spec_gets_one_line_exit_2_nothing_written(command: str, tmp_path: Path,
                                                            capsys) -> None:
    spec = tmp_path / "graph.toml"
    spec.write_text(chain(15_000))  # a generated graph of 15,000 nodes, ~1.3 MB
    assert spec.stat().st_size > MAX_SPEC_BYTES
    argv = [command, str(spec)] + (["--ledger", str(tmp_path / "run.jsonl")]
                                   if command == "run" else [])
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert str(spec) in lines[0] and "(file)" in lines[0]
    assert f"larger than the limit of {MAX_SPEC_BYTES} bytes" in lines[0]
    assert "fix:" in lines[0] and "--max-spec-bytes" in lines[0]
    assert [p.name for p in tmp_path.iterdir()] == ["graph.toml"]  # no ledger, no L.work


def test_the_command_line_raises_the_limit_for_a_generated_graph(tmp_path: Path) -> None:
    """In its own process, as the benchmark runs it (forked warm: tests/support/engine_child.py):
    the same file, asked for, is bounded."""
    spec = tmp_path / "graph.toml"
    spec.write_text(chain(15_000))
    base = ["cli", "bound", str(spec), "--json"]
    refused = engine_run(base)
    assert refused.returncode == 2 and refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1
    read = engine_run(base + ["--max-spec-bytes", str(spec.stat().st_size)])
    assert read.returncode == 0, read.stderr
    assert '"W": 15000' in read.stdout
    short = engine_run(base + ["--max-spec-bytes", str(spec.stat().st_size - 1)])
    assert short.returncode == 2 and "larger than the limit" in short.stderr


@pytest.mark.parametrize("value", ["0", "-5", "lots", "1e9"])
def test_a_bad_limit_is_refused_by_the_parser(value: str, tmp_path: Path, capsys) -> None:
    spec = tmp_path / "graph.toml"
    spec.write_text(chain(1))
    with pytest.raises(SystemExit) as exc:
        cli.main(["bound", str(spec), "--max-spec-bytes", value])
    assert exc.value.code == 2
    assert "not a positive number of bytes" in capsys.readouterr().err

